# exercise: attention
# slip: k.T instead of swapping the last two axes: .T reverses every axis of a batched k
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ k.T / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v
