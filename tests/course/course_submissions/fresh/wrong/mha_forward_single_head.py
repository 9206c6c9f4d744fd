# exercise: mha_forward
# slip: never splits into heads: runs one attention over the full projected width, right only for h = 1.
import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    q = query @ params["W_q"] + params["b_q"]
    k = key @ params["W_k"] + params["b_k"]
    v = value @ params["W_v"] + params["b_v"]
    s = q @ np.swapaxes(k, -1, -2) / q.dtype.type(np.sqrt(q.shape[-1] // num_heads))
    if mask is not None:
        s = np.where(mask[:, 0] if mask.ndim == 4 else mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v @ params["W_o"] + params["b_o"]
