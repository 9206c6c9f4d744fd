# exercise: merge_heads
# slip: moves the head axis to the end (..., L, d, h) before the reshape, interleaving the heads' features.
import numpy as np


def merge_heads(x):
    *lead, h, L, d = x.shape
    return np.moveaxis(x, -3, -1).reshape(*lead, L, h * d)
