# exercise: attention
# style: all in float64, the mask applied by boolean indexing on a broadcast copy, cast back at the end.
import math

import numpy as np


def attention(q, k, v, mask=None):
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    scores = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        shape = np.broadcast_shapes(scores.shape, np.shape(mask))
        scores = np.broadcast_to(scores, shape).copy()
        scores[~np.broadcast_to(mask, shape)] = -np.inf
    row_max = scores.max(axis=-1, keepdims=True)
    row_max[~np.isfinite(row_max)] = 0.0
    w = np.exp(scores - row_max)
    total = w.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    return ((w / total) @ v64).astype(q.dtype)
