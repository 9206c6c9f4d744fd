# exercise: split_heads
# slip: reshape (..., L, d, h) then move h forward: head i gets columns i, i+h, ... (right when d or h is 1)
import numpy as np


def split_heads(x, num_heads):
    *lead, L, hd = x.shape
    return np.moveaxis(x.reshape(*lead, L, hd // num_heads, num_heads), -1, -3)
