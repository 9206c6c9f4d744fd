# exercise: mha_backward
# the student's slip: merges the head gradients back with a plain reshape (no swap of the head and position
#   axes)
# diagnosis: head gradients split or merged wrongly
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

    grads = {"W_o": np.einsum("bli,blj->ij", concat, dout), "b_o": dout.sum(axis=(0, 1))}
    dheads = _split(dout @ P["W_o"].T, h)
    dv = np.swapaxes(p, -1, -2) @ dheads
    dp = dheads @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * c
    dk = np.swapaxes(ds, -1, -2) @ q * c
    outs = []
    for n, x, g in (("q", query, dq), ("k", key, dk), ("v", value, dv)):
        B, _, n_pos, _ = g.shape
        g = g.reshape(B, n_pos, -1)
        grads["W_" + n] = np.einsum("bli,blj->ij", x, g)
        grads["b_" + n] = g.sum(axis=(0, 1))
        outs.append(g @ P["W_" + n].T)
    return outs[0], outs[1], outs[2], grads
