# exercise: attention
# slip: divides by np.sqrt(d_k), a float64 scalar, so float32 inputs come back float64.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
