# exercise: mha_forward
# the student's slip: scales by sqrt of the full projection width
# diagnosis: scaled by sqrt(h * d_k) (all heads' width) instead of one head's d_k
import math

import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    def split(t):
        *b, n, f = t.shape
        return np.swapaxes(t.reshape(*b, n, num_heads, f // num_heads), -2, -3)
    q = split(query @ params["W_q"] + params["b_q"])
    k = split(key @ params["W_k"] + params["b_k"])
    v = split(value @ params["W_v"] + params["b_v"])
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(params["W_q"].shape[1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    heads = e / e.sum(-1, keepdims=True) @ v
    *b, h, n, d = heads.shape
    return np.swapaxes(heads, -2, -3).reshape(*b, n, h * d) @ params["W_o"] + params["b_o"]
