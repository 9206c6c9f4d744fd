# exercise: padding_mask
# the student's slip: counts positions from 1: arange(1, S + 1) < lengths
# diagnosis: padding mask off by one (the last real key left out)
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(1, S + 1)[None, :] < lengths[:, None])[:, None, :]
