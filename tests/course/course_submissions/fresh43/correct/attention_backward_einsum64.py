# exercise: attention_backward
# style: float64 einsum on k and v broadcast to q's batch, then np.add.reduce back to each input's shape
import numpy as np


def _back_to(g, shape):
    extra = g.ndim - len(shape)
    g = np.add.reduce(g, axis=tuple(range(extra))) if extra else g
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] > 1:
            g = np.add.reduce(g, axis=ax, keepdims=True)
    return g


def attention_backward(dout, q, k, v, mask=None):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    q64 = np.broadcast_to(q, lead + q.shape[-2:]).astype(np.float64)
    k64 = np.broadcast_to(k, lead + k.shape[-2:]).astype(np.float64)
    v64 = np.broadcast_to(v, lead + v.shape[-2:]).astype(np.float64)
    do = np.asarray(dout, dtype=np.float64)
    c = 1.0 / np.sqrt(q.shape[-1])
    s = np.einsum("...id,...jd->...ij", q64, k64) * c
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    tot = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    dv = np.einsum("...ij,...id->...jd", p, do)
    dp = np.einsum("...id,...jd->...ij", do, v64)
    ds = p * dp - p * np.einsum("...ij,...ij->...i", p, dp)[..., None]
    dq = np.einsum("...ij,...jd->...id", ds, k64) * c
    dk = np.einsum("...ij,...id->...jd", ds, q64) * c
    return (_back_to(dq, q.shape).astype(q.dtype), _back_to(dk, k.shape).astype(k.dtype),
            _back_to(dv, v.shape).astype(v.dtype))
