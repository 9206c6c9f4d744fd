# exercise: attention
# the student's slip: softmax over axis -2 (the queries) instead of the keys
# diagnosis: softmax over the wrong axis (over queries)
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-2, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-2, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
