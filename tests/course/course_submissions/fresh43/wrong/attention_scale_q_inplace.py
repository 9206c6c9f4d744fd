# exercise: attention
# slip: scales q in place (q *= 1/sqrt(d_k)) before the product: the caller's q is changed
import numpy as np


def attention(q, k, v, mask=None):
    q *= q.dtype.type(1 / np.sqrt(q.shape[-1]))
    s = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v
