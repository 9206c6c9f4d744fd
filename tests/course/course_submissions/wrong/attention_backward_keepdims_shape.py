# exercise: attention_backward
# the student's slip: sums the broadcast axes with keepdims=True: dk (1, 1, S, d) for k (S, d)
# diagnosis: broadcast gradients summed back to the wrong shape
import math

import numpy as np


def _masked_softmax(s):
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return e / np.where(z == 0, 1.0, z)


def attention_backward(dout, q, k, v, mask=None):
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    p = _masked_softmax(s)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    extra = dk.ndim - k.ndim
    if extra > 0:
        axes = tuple(range(extra))
        dk = dk.sum(axis=axes, keepdims=True).reshape(dk.shape[:extra - 1] + k.shape) \
            if extra == 1 else dk.sum(axis=axes, keepdims=True)
        dv = dv.sum(axis=axes, keepdims=True).reshape(dv.shape[:extra - 1] + v.shape) \
            if extra == 1 else dv.sum(axis=axes, keepdims=True)
    return dq, dk, dv
