# exercise: mha_backward
# slip: sums the bias gradients over positions only and takes batch element 0 (as if B were 1).
import numpy as np


def _split(x, h):
    B, n, w = x.shape
    return x.reshape(B, n, h, w // h).transpose(0, 2, 1, 3)


def _merge(x):
    B, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, n, h * d)


def mha_backward(dout, query, key, value, params, num_heads):
    h = num_heads
    q = _split(query @ params["W_q"] + params["b_q"], h)
    k = _split(key @ params["W_k"] + params["b_k"], h)
    v = _split(value @ params["W_v"] + params["b_v"], h)
    c = query.dtype.type(1 / np.sqrt(q.shape[-1]))
    s = q @ k.swapaxes(-1, -2) * c
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    concat = _merge(p @ v)
    grads = {"W_o": np.einsum("bli,blj->ij", concat, dout), "b_o": dout.sum(axis=1)[0]}
    dheads = _split(dout @ params["W_o"].T, h)
    dv = p.swapaxes(-1, -2) @ dheads
    dp = dheads @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * c
    dQ, dK, dV = _merge(ds @ k), _merge(ds.swapaxes(-1, -2) @ q), _merge(dv)
    grads["W_q"] = np.einsum("bli,blj->ij", query, dQ)
    grads["W_k"] = np.einsum("bli,blj->ij", key, dK)
    grads["W_v"] = np.einsum("bli,blj->ij", value, dV)
    grads["b_q"] = dQ.sum(axis=1)[0]
    grads["b_k"] = dK.sum(axis=1)[0]
    grads["b_v"] = dV.sum(axis=1)[0]
    return dQ @ params["W_q"].T, dK @ params["W_k"].T, dV @ params["W_v"].T, grads
