# exercise: attention
# slip: decides "this query has no key" with mask.any over the wrong axis (-2, the queries): an all-masked
# row inside a sequence that has other allowed rows gets NaN, and a (.., 1, S) mask is judged per key
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is None:
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v
    s = np.where(mask, s, -np.inf)
    dead = ~np.broadcast_to(mask, s.shape).any(axis=-2, keepdims=True).all(axis=-1, keepdims=True)
    s = np.where(dead, 0, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = np.where(dead, 0, e / e.sum(axis=-1, keepdims=True))
    return p @ v
