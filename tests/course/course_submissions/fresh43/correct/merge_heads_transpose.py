# exercise: merge_heads
# style: an explicit transpose permutation built for any number of leading axes
import numpy as np


def merge_heads(x):
    n = x.ndim
    perm = list(range(n - 3)) + [n - 2, n - 3, n - 1]
    y = np.transpose(x, perm)
    return y.reshape(y.shape[:-2] + (y.shape[-2] * y.shape[-1],))
