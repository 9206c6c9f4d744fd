# exercise: attention
# style: plain -inf masking; a query with no key yields NaN, which np.nan_to_num turns into 0
import numpy as np


def attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -2, -1) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    return np.nan_to_num(p @ v, nan=0.0)
