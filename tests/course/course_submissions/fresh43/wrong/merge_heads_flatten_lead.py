# exercise: merge_heads
# slip: reshape(-1, L, h*d) folds every leading axis into one: (h, L, d) gains an axis, two lead axes merge
import numpy as np


def merge_heads(x):
    h, L, d = x.shape[-3:]
    return np.swapaxes(x, -2, -3).reshape(-1, L, h * d)
