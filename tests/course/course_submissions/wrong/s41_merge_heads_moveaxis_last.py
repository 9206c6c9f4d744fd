# exercise: merge_heads
# the student's slip: moves the head axis to the very end before flattening (features of one head interleaved)
# diagnosis: merge transposed (heads interleaved)
import numpy as np


def merge_heads(x):
    *b, h, n, d = x.shape
    return np.moveaxis(x, -3, -1).reshape(*b, n, d * h)
