# exercise: attention
# slip: divides by sqrt of v's width (d_v) instead of sqrt(d_k), right only when d_k == d_v.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(v.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
