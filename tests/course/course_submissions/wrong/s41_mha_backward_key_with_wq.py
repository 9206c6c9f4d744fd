# exercise: mha_backward
# the student's slip: recomputes the keys with W_q and b_q in the forward (copy-paste of the query line)
import math

import numpy as np


def _split(x, h):
    *b, n, f = x.shape
    return np.swapaxes(x.reshape(*b, n, h, f // h), -2, -3)


def _merge(x):
    *b, h, n, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*b, n, h * d)


def _flat(x):
    return x.reshape(-1, x.shape[-1])


def mha_backward(dout, query, key, value, params, num_heads):
    P, h = params, num_heads
    q = _split(query @ P["W_q"] + P["b_q"], h)
    k = _split(key @ P["W_q"] + P["b_q"], h)
    v = _split(value @ P["W_v"] + P["b_v"], h)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    heads = p @ v
    concat = _merge(heads)
    grads = {"W_o": _flat(concat).T @ _flat(dout), "b_o": _flat(dout).sum(0)}
    dheads = _split(dout @ P["W_o"].T, h)
    dv = np.swapaxes(p, -1, -2) @ dheads
    dp = dheads @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    out = []
    for name, x, g in (("q", query, dq), ("k", key, dk), ("v", value, dv)):
        g = _merge(g)
        grads["W_" + name] = _flat(x).T @ _flat(g)
        grads["b_" + name] = _flat(g).sum(0)
        out.append(g @ P["W_" + name].T)
    return out[0], out[1], out[2], grads
