# exercise: mha_forward
# style: einsum projections straight into heads (W reshaped to (d_model, h, d)), guarded -inf mask
import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    d_model = query.shape[-1]
    d_k = params["W_q"].shape[1] // h
    d_v = params["W_v"].shape[1] // h
    wq = params["W_q"].reshape(d_model, h, d_k)
    wk = params["W_k"].reshape(d_model, h, d_k)
    wv = params["W_v"].reshape(d_model, h, d_v)
    q = np.einsum("bld,dhk->bhlk", query, wq) + params["b_q"].reshape(h, 1, d_k)
    k = np.einsum("bsd,dhk->bhsk", key, wk) + params["b_k"].reshape(h, 1, d_k)
    v = np.einsum("bsd,dhk->bhsk", value, wv) + params["b_v"].reshape(h, 1, d_v)
    s = np.einsum("bhlk,bhsk->bhls", q, k) / query.dtype.type(np.sqrt(d_k))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(axis=-1, keepdims=True)
    p = e / np.where(z > 0, z, 1)
    heads = np.einsum("bhls,bhsk->blhk", p, v)
    B, L = query.shape[:2]
    return heads.reshape(B, L, h * d_v) @ params["W_o"] + params["b_o"]
