# exercise: attention
# slip: applies the mask with scores[~mask] = -inf, which only works when the mask has the scores' full shape.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        scores[~mask] = -np.inf
    m = scores.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    z[z == 0] = 1
    return (e / z) @ v
