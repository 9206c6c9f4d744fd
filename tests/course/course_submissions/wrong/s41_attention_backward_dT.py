# exercise: attention_backward
# the student's slip: .T for the transposes, which reverses every axis of a batched array
# diagnosis: does not broadcast
import math

import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    c = 1 / math.sqrt(q.shape[-1])
    s = q @ k.T * c
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    dv = p.T @ dout
    dp = dout @ v.T
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return ds @ k * c, ds.T @ q * c, dv
