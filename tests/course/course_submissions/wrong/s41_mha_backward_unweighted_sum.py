# exercise: mha_backward
# the student's slip: the softmax backward subtracts the row sum of dp, not of dp * p
# diagnosis: wrong gradients
import math

import numpy as np


def _split(x, h):
    *b, n, f = x.shape
    return np.swapaxes(x.reshape(*b, n, h, f // h), -2, -3)


def _merge(x):
    *b, h, n, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*b, n, h * d)


def mha_backward(dout, query, key, value, params, num_heads):
    P, h = params, num_heads
    q = _split(query @ P["W_q"] + P["b_q"], h)
    k = _split(key @ P["W_k"] + P["b_k"], h)
    v = _split(value @ P["W_v"] + P["b_v"], h)
    c = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * c
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    concat = _merge(p @ v)

    dW_o = np.einsum("bli,blj->ij", concat, dout)
    db_o = dout.sum(axis=(0, 1))
    dheads = _split(dout @ P["W_o"].T, h)
    dv = np.einsum("bhls,bhld->bhsd", p, dheads)
    dp = np.einsum("bhld,bhsd->bhls", dheads, v)
    ds = p * (dp - dp.sum(-1, keepdims=True))
    dq = np.einsum("bhls,bhsd->bhld", ds, k) * c
    dk = np.einsum("bhls,bhld->bhsd", ds, q) * c
    grads = {"W_o": dW_o, "b_o": db_o}
    outs = []
    for n, x, g in (("q", query, dq), ("k", key, dk), ("v", value, dv)):
        g = _merge(g)
        grads["W_" + n] = np.einsum("bli,blj->ij", x, g)
        grads["b_" + n] = g.sum(axis=(0, 1))
        outs.append(g @ P["W_" + n].T)
    return outs[0], outs[1], outs[2], grads
