# exercise: attention
# the student's slip: softmax first, then mask and renormalise
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]).astype(q.dtype)
    e = np.exp(s - s.max(-1, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    if mask is not None:
        w = w * mask
        total = w.sum(-1, keepdims=True)
        w = w / np.where(total == 0, 1, total)
    return w @ v
