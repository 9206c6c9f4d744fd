# exercise: attention
# style: broadcasts everything to one batch shape and loops over it, each matrix in float64
import numpy as np


def attention(q, k, v, mask=None):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    L, S = q.shape[-2], k.shape[-2]
    qb = np.broadcast_to(q, lead + q.shape[-2:]).astype(np.float64)
    kb = np.broadcast_to(k, lead + k.shape[-2:]).astype(np.float64)
    vb = np.broadcast_to(v, lead + v.shape[-2:]).astype(np.float64)
    mb = np.ones(lead + (L, S), bool) if mask is None else np.broadcast_to(mask, lead + (L, S))
    out = np.zeros(lead + (L, v.shape[-1]))
    for idx in np.ndindex(*lead):
        s = qb[idx] @ kb[idx].T / np.sqrt(q.shape[-1])
        for i in range(L):
            allowed = mb[idx][i]
            if not allowed.any():
                continue
            row = s[i][allowed]
            w = np.exp(row - row.max())
            out[idx][i] = (w / w.sum()) @ vb[idx][allowed]
    return out.astype(q.dtype)
