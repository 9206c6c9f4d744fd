# exercise: attention
# slip: reshapes the mask to the scores' shape instead of broadcasting it: fails for (L, S) and (B, 1, S)
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(np.reshape(mask, s.shape), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v
