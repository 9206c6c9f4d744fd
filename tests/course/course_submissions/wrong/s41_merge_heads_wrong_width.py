# exercise: merge_heads
# the student's slip: reshapes to (..., n, h * d) without moving the head axis next to the features
# diagnosis: reshape without the transpose
import numpy as np


def merge_heads(x):
    *b, h, n, d = x.shape
    return np.ascontiguousarray(x).reshape(*b, n, h * d)
