# exercise: attention
# slip: subtracts the max over all scores (one scalar), not each row's: far-apart rows underflow to 0/0
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = np.max(s[np.isfinite(s)]) if np.isfinite(s).any() else 0.0
    e = np.exp(s - top)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v
