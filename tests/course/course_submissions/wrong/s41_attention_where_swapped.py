# exercise: attention
# the student's slip: np.where(mask, -inf, s): the arguments of where swapped (True taken as blocked)
# diagnosis: mask polarity flipped
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
