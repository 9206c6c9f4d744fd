# exercise: split_heads
# slip: sets x.shape in place to avoid a copy: the caller's array changes shape (and a non-contiguous x fails)
import numpy as np


def split_heads(x, num_heads):
    *lead, L, hd = x.shape
    x.shape = (*lead, L, num_heads, hd // num_heads)
    return np.swapaxes(x, -2, -3)
