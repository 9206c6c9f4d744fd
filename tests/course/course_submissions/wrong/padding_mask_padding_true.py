# exercise: padding_mask
# the student's slip: marks the padding
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S)[None, None, :] >= np.asarray(lengths)[:, None, None])
