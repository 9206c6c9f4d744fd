# exercise: padding_mask
# the student's slip: pads on the left (real keys at the end) instead of on the right
# diagnosis: reversed along an axis
import numpy as np


def padding_mask(lengths, S):
    j = np.arange(S)
    return (j[None, :] >= S - np.asarray(lengths)[:, None])[:, None, :]
