# exercise: attention_backward
# the student's slip: softmax backward sums <dp, p> over axis -2 instead of -1
# diagnosis: the softmax backward is wrong
import math

import numpy as np


def _reduce_to(g, shape):
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _probs(q, k, mask, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return e / np.where(z == 0, 1, z)


def attention_backward(dout, q, k, v, mask=None):
    c = 1 / math.sqrt(q.shape[-1])
    p = _probs(q, k, mask, c)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-2, keepdims=True))
    dq = ds @ k * c
    dk = np.swapaxes(ds, -1, -2) @ q * c
    return dq, _reduce_to(dk, k.shape), _reduce_to(dv, v.shape)
