# exercise: mha_backward
# style: the whole backward in float64 einsum, weights viewed as (d_model, h, d), cast back at the end.
import numpy as np


def mha_backward(dout, query, key, value, params, num_heads):
    dt = query.dtype
    h = num_heads
    X, Y, Z, G = (a.astype(np.float64) for a in (query, key, value, dout))
    P = {n: a.astype(np.float64) for n, a in params.items()}
    dm = X.shape[-1]
    Wq, Wk, Wv = (P[n].reshape(dm, h, -1) for n in ("W_q", "W_k", "W_v"))
    d_k, d_v = Wq.shape[-1], Wv.shape[-1]
    Wo = P["W_o"].reshape(h, d_v, dm)
    q = np.einsum("bld,dhk->bhlk", X, Wq) + P["b_q"].reshape(h, 1, d_k)
    k = np.einsum("bsd,dhk->bhsk", Y, Wk) + P["b_k"].reshape(h, 1, d_k)
    v = np.einsum("bsd,dhk->bhsk", Z, Wv) + P["b_v"].reshape(h, 1, d_v)
    c = 1.0 / np.sqrt(d_k)
    s = np.einsum("bhlk,bhsk->bhls", q, k) * c
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    heads = np.einsum("bhls,bhsv->bhlv", p, v)
    grads = {"b_o": G.sum(axis=(0, 1)), "W_o": np.einsum("bhlv,bld->hvd", heads, G).reshape(h * d_v, dm)}
    dheads = np.einsum("bld,hvd->bhlv", G, Wo)
    dv = np.einsum("bhls,bhlv->bhsv", p, dheads)
    dp = np.einsum("bhlv,bhsv->bhls", dheads, v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * c
    dq = np.einsum("bhls,bhsk->bhlk", ds, k)
    dk = np.einsum("bhls,bhlk->bhsk", ds, q)
    grads["W_q"] = np.einsum("bld,bhlk->dhk", X, dq).reshape(dm, h * d_k)
    grads["W_k"] = np.einsum("bsd,bhsk->dhk", Y, dk).reshape(dm, h * d_k)
    grads["W_v"] = np.einsum("bsd,bhsk->dhk", Z, dv).reshape(dm, h * d_v)
    grads["b_q"] = dq.sum(axis=(0, 2)).reshape(-1)
    grads["b_k"] = dk.sum(axis=(0, 2)).reshape(-1)
    grads["b_v"] = dv.sum(axis=(0, 2)).reshape(-1)
    dX = np.einsum("bhlk,dhk->bld", dq, Wq)
    dY = np.einsum("bhsk,dhk->bsd", dk, Wk)
    dZ = np.einsum("bhsk,dhk->bsd", dv, Wv)
    return dX.astype(dt), dY.astype(dt), dZ.astype(dt), {n: g.astype(dt) for n, g in grads.items()}
