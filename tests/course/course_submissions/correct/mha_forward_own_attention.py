# exercise: mha_forward
import math

import numpy as np


def _split(x, h):
    *b, n, f = x.shape
    return np.swapaxes(x.reshape(*b, n, h, f // h), -2, -3)


def _attend(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v


def mha_forward(query, key, value, params, num_heads, mask=None):
    q = _split(query @ params["W_q"] + params["b_q"], num_heads)
    k = _split(key @ params["W_k"] + params["b_k"], num_heads)
    v = _split(value @ params["W_v"] + params["b_v"], num_heads)
    heads = _attend(q, k, v, mask)
    *b, h, n, d = heads.shape
    concat = np.swapaxes(heads, -2, -3).reshape(*b, n, h * d)
    return concat @ params["W_o"] + params["b_o"]
