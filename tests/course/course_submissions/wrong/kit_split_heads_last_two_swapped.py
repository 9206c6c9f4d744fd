# exercise: split_heads
# the student's slip: swaps the last two axes after the reshape: (..., L, d, h) -> wrong axes
# diagnosis: axes in the wrong order
import numpy as np


def split_heads(x, num_heads):
    *b, L, f = x.shape
    y = x.reshape(*b, L, num_heads, f // num_heads)
    return np.swapaxes(y, -1, -3)
