# exercise: merge_heads
# the student's slip: moves the head axis last
import numpy as np


def merge_heads(x):
    *b, h, L, d = x.shape
    return np.moveaxis(x, -3, -1).reshape(*b, L, h * d)
