# exercise: merge_heads
# the student's slip: reshape(-1, h * d) after the swap, which folds the batch into the positions
# diagnosis: does not work with batch axes
import numpy as np


def merge_heads(x):
    h, d = x.shape[-3], x.shape[-1]
    return np.swapaxes(x, -3, -2).reshape(-1, h * d)
