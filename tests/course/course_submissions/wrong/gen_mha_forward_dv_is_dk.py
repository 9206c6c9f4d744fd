# exercise: mha_forward
# the student's slip: splits the values into heads of width d_k (assumes d_v == d_k)
import math

import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    d_k = params["W_q"].shape[1] // h
    B, L, _ = query.shape
    S = key.shape[1]

    def heads(y, n):
        return y.reshape(B, n, h, d_k).transpose(0, 2, 1, 3)

    q = heads(query @ params["W_q"] + params["b_q"], L)
    k = heads(key @ params["W_k"] + params["b_k"], S)
    v = heads(value @ params["W_v"] + params["b_v"], S)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, L, h * d_k)
    return out @ params["W_o"] + params["b_o"]
