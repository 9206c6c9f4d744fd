# exercise: mha_backward
# style: the forward as split/merge matmuls in the input dtype, the backward by matmul and tensordot.
import numpy as np


def _split(x, h):
    B, n, w = x.shape
    return x.reshape(B, n, h, w // h).transpose(0, 2, 1, 3)


def _merge(x):
    B, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, n, h * d)


def mha_backward(dout, query, key, value, params, num_heads):
    h = num_heads
    Qp = query @ params["W_q"] + params["b_q"]
    Kp = key @ params["W_k"] + params["b_k"]
    Vp = value @ params["W_v"] + params["b_v"]
    q, k, v = _split(Qp, h), _split(Kp, h), _split(Vp, h)
    c = query.dtype.type(1 / np.sqrt(q.shape[-1]))
    s = q @ k.swapaxes(-1, -2) * c
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    concat = _merge(p @ v)
    grads = {"W_o": np.tensordot(concat, dout, axes=([0, 1], [0, 1])), "b_o": dout.sum(axis=(0, 1))}
    dheads = _split(dout @ params["W_o"].T, h)
    dv = p.swapaxes(-1, -2) @ dheads
    dp = dheads @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * c
    dQp, dKp, dVp = _merge(ds @ k), _merge(ds.swapaxes(-1, -2) @ q), _merge(dv)
    for name, x, g in (("q", query, dQp), ("k", key, dKp), ("v", value, dVp)):
        grads["W_" + name] = np.tensordot(x, g, axes=([0, 1], [0, 1]))
        grads["b_" + name] = g.sum(axis=(0, 1))
    return dQp @ params["W_q"].T, dKp @ params["W_k"].T, dVp @ params["W_v"].T, grads
