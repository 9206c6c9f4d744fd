# exercise: attention
# the student's slip: the stability shift takes the max over the queries (axis -2), not over each row
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-2, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
