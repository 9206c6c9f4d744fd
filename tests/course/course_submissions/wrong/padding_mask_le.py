# exercise: padding_mask
# the student's slip: <= instead of <
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S) <= np.asarray(lengths)[:, None])[:, None, :]
