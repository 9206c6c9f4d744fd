# exercise: mha_forward
import math

import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    # the weights reshaped per head, (d_model, h, d_k), and einsum for every product
    h = num_heads
    W = {n: params["W_" + n].reshape(params["W_" + n].shape[0], h, -1) for n in "qkv"}
    b = {n: params["b_" + n].reshape(h, -1) for n in "qkv"}
    q = np.einsum("bld,dhk->bhlk", query, W["q"]) + b["q"][:, None, :]
    k = np.einsum("bsd,dhk->bhsk", key, W["k"]) + b["k"][:, None, :]
    v = np.einsum("bsd,dhk->bhsk", value, W["v"]) + b["v"][:, None, :]
    s = np.einsum("bhlk,bhsk->bhls", q, k) * (1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isinf(top), 0, top))
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    heads = np.einsum("bhls,bhsk->blhk", p, v)
    W_o = params["W_o"].reshape(h, -1, params["W_o"].shape[-1])
    return np.einsum("blhk,hkd->bld", heads, W_o) + params["b_o"]
