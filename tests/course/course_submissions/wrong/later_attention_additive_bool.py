# exercise: attention
# the student's slip: adds the bool mask to the scores
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
    if mask is not None:
        s = s + mask
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    return w / w.sum(-1, keepdims=True) @ v
