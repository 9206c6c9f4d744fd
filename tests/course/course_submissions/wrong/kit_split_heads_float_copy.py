# exercise: split_heads
# the student's slip: np.array(x, dtype=float) 'to be safe', so a float32 input comes back float64
# diagnosis: dtype not kept
import numpy as np


def split_heads(x, num_heads):
    x = np.array(x, dtype=float)
    *b, L, f = x.shape
    return np.swapaxes(x.reshape(*b, L, num_heads, f // num_heads), -2, -3)
