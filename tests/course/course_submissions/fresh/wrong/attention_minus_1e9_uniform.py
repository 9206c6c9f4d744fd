# exercise: attention
# slip: fills masked scores with -1e9, not -inf, so a query with no allowed key gets uniform weights.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, q.dtype.type(-1e9))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v
