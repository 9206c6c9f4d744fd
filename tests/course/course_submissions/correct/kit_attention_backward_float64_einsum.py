# exercise: attention_backward
import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    # float64 inside, einsum everywhere, broadcast axes summed with np.sum(..., keepdims) per axis
    dt = q.dtype
    dout, q, k, v = (np.asarray(a, dtype=np.float64) for a in (dout, q, k, v))
    c = 1.0 / np.sqrt(q.shape[-1])
    s = np.einsum("...ld,...sd->...ls", q, k) * c
    keep = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    s = np.where(keep, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.where(keep, np.exp(s - np.where(keep.any(-1, keepdims=True), top, 0.0)), 0.0)
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z > 0, z, 1.0)
    dp = np.einsum("...lv,...sv->...ls", dout, v)
    ds = p * (dp - np.einsum("...ls,...ls->...l", dp, p)[..., None])
    dq = np.einsum("...ls,...sd->...ld", ds, k) * c
    dk = np.einsum("...ls,...ld->...sd", ds, q) * c
    dv = np.einsum("...ls,...lv->...sv", p, dout)

    def back(g, shape):
        lead = g.ndim - len(shape)
        g = g.sum(axis=tuple(range(lead)))
        for ax, n in enumerate(shape):
            if n == 1:
                g = g.sum(axis=ax, keepdims=True)
        return g

    return back(dq, q.shape).astype(dt), back(dk, k.shape).astype(dt), back(dv, v.shape).astype(dt)
