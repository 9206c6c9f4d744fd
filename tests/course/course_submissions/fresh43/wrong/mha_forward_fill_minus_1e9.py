# exercise: mha_forward
# slip: masked scores set to -1e9: a sequence padded to length 0 averages v instead of giving b_o
import numpy as np


def _split(x, h, d):
    B, L, _ = x.shape
    return x.reshape(B, L, h, d).transpose(0, 2, 1, 3)


def _attend(q, k, v, mask, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -1e9).astype(s.dtype)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z > 0, z, 1)) @ v


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    B, L, D = query.shape
    d_k = params["W_q"].shape[1] // h
    d_v = params["W_v"].shape[1] // h
    scale = query.dtype.type(1 / np.sqrt(d_k))
    q = _split(query @ params["W_q"] + params["b_q"], h, d_k)
    k = _split(key @ params["W_k"] + params["b_k"], h, d_k)
    v = _split(value @ params["W_v"] + params["b_v"], h, d_v)
    o = _attend(q, k, v, mask, scale)
    return o.transpose(0, 2, 1, 3).reshape(B, L, h * d_v) @ params["W_o"] + params["b_o"]
