# exercise: attention
# slip: fills the allowed positions with -inf instead of the masked ones (np.where arguments swapped).
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
