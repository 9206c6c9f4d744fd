# exercise: split_heads
# the student's slip: reshapes the features as (d, h)
import numpy as np


def split_heads(x, num_heads):
    *b, L, f = x.shape
    y = x.reshape(*b, L, f // num_heads, num_heads)
    return np.moveaxis(y, -1, -3)
