# exercise: split_heads
# slip: calls .squeeze() on the result, which drops the head axis when h = 1 (and any size-1 axis).
import numpy as np


def split_heads(x, num_heads):
    *lead, L, w = x.shape
    return np.swapaxes(x.reshape(*lead, L, num_heads, w // num_heads), -2, -3).squeeze()
