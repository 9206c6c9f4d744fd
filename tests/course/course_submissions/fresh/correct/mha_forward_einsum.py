# exercise: mha_forward
# style: projections and heads in one einsum each, per-head weights viewed as (d_model, h, d).
import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    dm = query.shape[-1]
    Wq = params["W_q"].reshape(dm, h, -1)
    Wk = params["W_k"].reshape(dm, h, -1)
    Wv = params["W_v"].reshape(dm, h, -1)
    d_k = Wq.shape[-1]
    q = np.einsum("bld,dhk->bhlk", query, Wq) + params["b_q"].reshape(h, 1, d_k)
    k = np.einsum("bsd,dhk->bhsk", key, Wk) + params["b_k"].reshape(h, 1, d_k)
    v = np.einsum("bsd,dhk->bhsk", value, Wv) + params["b_v"].reshape(h, 1, -1)
    s = np.einsum("bhlk,bhsk->bhls", q, k) / query.dtype.type(np.sqrt(d_k))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isinf(m), 0, m)
    e = np.exp(s - m)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z == 0, 1, z)
    heads = np.einsum("bhls,bhsv->bhlv", w, v)
    Wo = params["W_o"].reshape(h, -1, dm)
    return np.einsum("bhlv,hvd->bld", heads, Wo) + params["b_o"]
