# exercise: merge_heads
# slip: moves the head axis last, so columns come out d-major (col = j*h + i): right when h or d is 1
import numpy as np


def merge_heads(x):
    *lead, h, L, d = x.shape
    return np.moveaxis(x, -3, -1).reshape(*lead, L, d * h)
