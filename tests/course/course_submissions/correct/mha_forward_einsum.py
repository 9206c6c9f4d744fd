# exercise: mha_forward
import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    q = query @ params["W_q"] + params["b_q"]
    k = key @ params["W_k"] + params["b_k"]
    v = value @ params["W_v"] + params["b_v"]
    q = q.reshape(*q.shape[:-1], h, -1)                    # (B, L, h, d_k)
    k = k.reshape(*k.shape[:-1], h, -1)
    v = v.reshape(*v.shape[:-1], h, -1)
    d_k = q.shape[-1]
    s = np.einsum("...lhd,...shd->...hls", q, k) / np.sqrt(d_k).astype(query.dtype)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0
    w = np.exp(s - top)
    w = w / np.maximum(w.sum(-1, keepdims=True), np.finfo(w.dtype).tiny)
    heads = np.einsum("...hls,...shd->...lhd", w, v)        # (B, L, h, d_v)
    concat = heads.reshape(*heads.shape[:-2], -1)
    return concat @ params["W_o"] + params["b_o"]
