# exercise: attention
# the student's slip: multiplies the scores by where(mask, 1, -inf)
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
    if mask is not None:
        s = s * np.where(mask, 1.0, -np.inf).astype(q.dtype)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return e / np.where(z == 0, 1, z) @ v
