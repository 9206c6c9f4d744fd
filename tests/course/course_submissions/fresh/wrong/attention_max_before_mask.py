# exercise: attention
# slip: takes the row max before masking, so a masked key with a huge score underflows the row to 0.
import numpy as np


def attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    if mask is not None:
        e = np.where(mask, e, 0)
    z = e.sum(axis=-1, keepdims=True)
    return np.nan_to_num(e / z) @ v
