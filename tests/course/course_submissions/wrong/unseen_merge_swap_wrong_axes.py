# exercise: merge_heads
# the student's slip: swaps the last two axes
# diagnosis: positions mixed in the merge
import numpy as np


def merge_heads(x):
    *b, h, L, d = x.shape
    return np.swapaxes(x, -1, -2).reshape(*b, L, h * d)
