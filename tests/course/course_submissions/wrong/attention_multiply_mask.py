# exercise: attention
# the student's slip: multiplies the scores by the mask
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
    if mask is not None:
        s = s * mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v
