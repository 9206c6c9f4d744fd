# exercise: attention
# slip: subtracts the max of all the scores (every batch and query) instead of each query's own max.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max())
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v
