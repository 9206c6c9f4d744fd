# exercise: attention
# the student's slip: a fully masked row: -inf - -inf
import numpy as np


def attention(q, k, v, mask=None):
    d = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / d ** 0.5)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.matmul(e / np.sum(e, axis=-1, keepdims=True), v)
