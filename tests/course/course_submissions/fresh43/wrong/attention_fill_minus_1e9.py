# exercise: attention
# slip: masked scores set to -1e9: a query with no allowed key averages v instead of returning 0
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -1e9).astype(s.dtype)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v
