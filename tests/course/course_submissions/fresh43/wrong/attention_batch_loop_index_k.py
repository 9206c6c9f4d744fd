# exercise: attention
# slip: loops over q's first axis and indexes k[b], v[b], mask[b]: wrong when k, v or the mask are shared
# (fewer leading axes or a leading axis of size 1), and a 2-D q is taken as a batch of rows
import numpy as np


def _one(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v


def attention(q, k, v, mask=None):
    if q.ndim == 2:
        return _one(q, k, v, mask)
    return np.stack([_one(q[b], k[b % k.shape[0]], v[b % v.shape[0]],
                          None if mask is None or mask.ndim < q.ndim else mask[b % mask.shape[0]])
                     for b in range(q.shape[0])])
