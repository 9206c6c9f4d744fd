# exercise: mha_forward
# the student's slip: copy-pasted the query line for the keys and kept W_q and b_q
# diagnosis: the keys projected with W_q
import math

import numpy as np


def _split(x, h):
    *b, n, f = x.shape
    return np.swapaxes(x.reshape(*b, n, h, f // h), -2, -3)


def _merge(x):
    *b, h, n, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*b, n, h * d)


def mha_forward(query, key, value, params, num_heads, mask=None):
    P, h = params, num_heads
    q = _split(query @ P["W_q"] + P["b_q"], h)
    k = _split(key @ P["W_q"] + P["b_q"], h)
    v = _split(value @ P["W_v"] + P["b_v"], h)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    return _merge((e / np.where(z == 0, 1, z)) @ v) @ P["W_o"] + P["b_o"]
