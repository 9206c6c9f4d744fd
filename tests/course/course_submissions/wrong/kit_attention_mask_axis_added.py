# exercise: attention
# the student's slip: a mask with fewer axes than the scores gets mask[:, None] (a head axis after the
#   first), which misplaces an (L, S) mask
# diagnosis: an (L, S) mask is not lined up with the scores
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        if mask.ndim < s.ndim:
            mask = mask[:, None]
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
