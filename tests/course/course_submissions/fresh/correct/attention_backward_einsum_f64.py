# exercise: attention_backward
# style: float64 einsum over broadcast copies, then each gradient summed back to its input's shape.
import numpy as np


def _sum_to(g, shape):
    extra = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True)


def attention_backward(dout, q, k, v, mask=None):
    dt = q.dtype
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], dout.shape[:-2])
    Q, K, V, dO = (np.broadcast_to(a.astype(np.float64), lead + a.shape[-2:]) for a in (q, k, v, dout))
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = np.einsum("...ld,...sd->...ls", Q, K) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    P = e / np.where(z > 0, z, 1.0)
    dV = np.einsum("...ls,...ld->...sd", P, dO)
    dP = np.einsum("...ld,...sd->...ls", dO, V)
    dS = P * (dP - np.einsum("...ls,...ls->...l", dP, P)[..., None]) * scale
    dQ = np.einsum("...ls,...sd->...ld", dS, K)
    dK = np.einsum("...ls,...ld->...sd", dS, Q)
    return (_sum_to(dQ, q.shape).astype(dt), _sum_to(dK, k.shape).astype(dt), _sum_to(dV, v.shape).astype(dt))
