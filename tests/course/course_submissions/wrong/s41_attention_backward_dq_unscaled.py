# exercise: attention_backward
# the student's slip: scales dk by 1/sqrt(d_k) but forgets it on dq
# diagnosis: dq off by a constant factor (sqrt(d_k))
import math

import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    c = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * c
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k
    dk = np.swapaxes(ds, -1, -2) @ q * c

    def back(g, x):
        g = g.sum(axis=tuple(range(g.ndim - x.ndim))) if g.ndim > x.ndim else g
        ax = tuple(i for i, n in enumerate(x.shape) if n == 1 and g.shape[i] != 1)
        return g.sum(axis=ax, keepdims=True) if ax else g
    return dq, back(dk, k), back(dv, v)
