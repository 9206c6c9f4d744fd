# exercise: attention
# slip: softmax over every key, then zero the masked weights and renormalise: a masked key scoring ~1e3
# takes all the mass first (the allowed weights underflow to 0, 0/0), and a row with no key is 0/0
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    if mask is not None:
        p = p * mask
        p = p / p.sum(axis=-1, keepdims=True)
    return p @ v
