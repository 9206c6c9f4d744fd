# exercise: attention
# the student's slip: applies the mask by multiplying exp(s - max) by it (max taken before masking)
# diagnosis: a masked key's score still counts
import math

import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    if mask is not None:
        e = e * mask
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
