# exercise: split_heads
# slip: squeezes the result "to tidy it": every axis of size 1 (one head, L = 1, d = 1, B = 1) disappears
import numpy as np


def split_heads(x, num_heads):
    *lead, L, hd = x.shape
    return np.squeeze(np.swapaxes(x.reshape(*lead, L, num_heads, hd // num_heads), -2, -3))
