# exercise: attention
# style: broadcast k and v with np.broadcast_to, einsum scores, np.where for the mask, a safe denominator.
import numpy as np


def attention(q, k, v, mask=None):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q = np.broadcast_to(q, lead + q.shape[-2:])
    k = np.broadcast_to(k, lead + k.shape[-2:])
    v = np.broadcast_to(v, lead + v.shape[-2:])
    scores = np.einsum("...ld,...sd->...ls", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    e = np.exp(scores - top)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z == 0, 1, z)
    return np.einsum("...ls,...sd->...ld", w, v)
