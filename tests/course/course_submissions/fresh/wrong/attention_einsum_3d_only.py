# exercise: attention
# slip: hard-codes the einsum 'bld,bsd->bls', right only for 3-D q, k, v with the same batch axis.
import numpy as np


def attention(q, k, v, mask=None):
    scores = np.einsum("bld,bsd->bls", q, k) / q.dtype.type(np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.einsum("bls,bsd->bld", e / np.where(z == 0, 1, z), v)
