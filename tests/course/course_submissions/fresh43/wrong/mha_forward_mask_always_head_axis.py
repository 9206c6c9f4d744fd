# exercise: mha_forward
# slip: always inserts the head axis (mask[:, None]), also into (L, S) and (B, 1, L, S) masks that already
# broadcast
import numpy as np


def _split(x, h, d):
    B, L, _ = x.shape
    return x.reshape(B, L, h, d).transpose(0, 2, 1, 3)


def _attend(q, k, v, mask, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
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
    o = _attend(q, k, v, None if mask is None else mask[:, None], scale)
    return o.transpose(0, 2, 1, 3).reshape(B, L, h * d_v) @ params["W_o"] + params["b_o"]
