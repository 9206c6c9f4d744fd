# exercise: attention
# the student's slip: takes d_k = k.shape[-2] (the number of keys) instead of k.shape[-1]
# diagnosis: scaled by sqrt(S), the number of keys, instead of sqrt(d_k)
import math

import numpy as np


def attention(q, k, v, mask=None):
    d_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
