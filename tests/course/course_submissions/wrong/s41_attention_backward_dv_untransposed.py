# exercise: attention_backward
# the student's slip: dv = p @ dout (einsum letters of p in the forward order), not p^T @ dout
# diagnosis: wrong gradients
import math

import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    c = 1 / math.sqrt(q.shape[-1])
    s = np.einsum("...ld,...sd->...ls", q, k) * c
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    dv = np.einsum("...ls,...ld->...ld", p, dout)
    dp = np.einsum("...ld,...sd->...ls", dout, v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = np.einsum("...ls,...sd->...ld", ds, k) * c
    dk = np.einsum("...ls,...ld->...sd", ds, q) * c

    def back(g, x):
        g = g.sum(axis=tuple(range(g.ndim - x.ndim))) if g.ndim > x.ndim else g
        ax = tuple(i for i, n in enumerate(x.shape) if n == 1 and g.shape[i] != 1)
        return g.sum(axis=ax, keepdims=True) if ax else g
    return dq, back(dk, k), back(dv, v)
