# exercise: attention
# the student's slip: masks by boolean indexing, scores[..., ~mask] = -inf (needs the mask's full shape)
# diagnosis: a mask that only broadcasts is not handled
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.copy()
        s[..., ~mask] = -np.inf
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1.0, z)) @ v
