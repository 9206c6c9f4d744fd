# exercise: attention_backward
# the student's slip: a query with no allowed key: -inf - (-inf) gives NaN gradients
# diagnosis: NaN for a query with no allowed key
import math

import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    while dk.ndim > k.ndim:
        dk, dv = dk.sum(0), dv.sum(0)
    if dk.shape != k.shape:
        dk, dv = dk.sum(0, keepdims=True), dv.sum(0, keepdims=True)
    return dq, dk, dv
