# exercise: attention_backward
# the student's slip: forgets the mask in the backward
# diagnosis: the mask is ignored
import math

import numpy as np


def _sum_to(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] != 1:
            g = g.sum(axis=ax, keepdims=True)
    return g


def attention_backward(dout, q, k, v, mask=None):
    scale = 1 / math.sqrt(q.shape[-1])
    kt = np.swapaxes(k, -1, -2)
    s = (q @ kt) * scale
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = (ds @ k) * scale
    dk = (np.swapaxes(ds, -1, -2) @ q) * scale
    return dq, _sum_to(dk, k.shape), _sum_to(dv, v.shape)
