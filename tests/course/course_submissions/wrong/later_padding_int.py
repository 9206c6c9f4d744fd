# exercise: padding_mask
# the student's slip: returns 0/1 integers
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S)[None, None, :] < np.asarray(lengths)[:, None, None]).astype(np.int8)
