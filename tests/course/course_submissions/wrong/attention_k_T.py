# exercise: attention
# the student's slip: k.T
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ k.T / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return e / np.where(z == 0, 1, z) @ v
