# exercise: split_heads
# slip: head width taken from the wrong axis (x.shape[-2] // h): right only when L == h*d
import numpy as np


def split_heads(x, num_heads):
    *lead, L, hd = x.shape
    d = L // num_heads
    return np.swapaxes(x.reshape(*lead, L, num_heads, d), -2, -3)
