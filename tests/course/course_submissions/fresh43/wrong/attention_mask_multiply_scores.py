# exercise: attention
# slip: multiplies the scores by the mask (a masked score becomes 0, not -inf): masked keys keep weight
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = s * mask
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v
