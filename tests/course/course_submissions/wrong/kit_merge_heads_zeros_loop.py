# exercise: merge_heads
# the student's slip: fills np.zeros((..., L, h*d)) head by head: float64 buffer for a float32 input
# diagnosis: dtype not kept
import numpy as np


def merge_heads(x):
    *b, h, L, d = x.shape
    out = np.zeros((*b, L, h * d))
    for i in range(h):
        out[..., i * d:(i + 1) * d] = x[..., i, :, :]
    return out
