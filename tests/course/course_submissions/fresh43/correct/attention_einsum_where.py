# exercise: attention
# style: einsum scores, -inf fill with np.where, rows with no key guarded by a finite max and a safe sum
import numpy as np


def attention(q, k, v, mask=None):
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    s = np.einsum("...ld,...sd->...ls", q, k) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    den = e.sum(axis=-1, keepdims=True)
    p = e / np.where(den == 0, 1, den)
    return np.einsum("...ls,...sd->...ld", p, v).astype(q.dtype)
