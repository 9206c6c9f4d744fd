# exercise: padding_mask
# the student's slip: positions on the middle axis: lengths[:, None, None] > arange(S)[:, None], a (B, S, 1)
#   mask
# diagnosis: padding mask of the wrong shape
import numpy as np


def padding_mask(lengths, S):
    return lengths[:, None, None] > np.arange(S)[:, None]
