# exercise: attention
# slip: divides by sqrt(d_v) (v.shape[-1]) instead of sqrt(d_k): the same when d_k == d_v
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(v.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v
