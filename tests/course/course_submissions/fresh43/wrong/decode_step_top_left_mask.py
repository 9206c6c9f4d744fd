# exercise: decode_step
# slip: applies a top-left causal mask to the one query: it sees only key 0 (right only when t = 0)
import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    B, _, D = x.shape
    h = num_heads

    def heads(y):
        return y.reshape(B, 1, h, -1).transpose(0, 2, 1, 3)

    q = heads(x @ params["W_q"] + params["b_q"])
    k = np.concatenate([k_cache, heads(x @ params["W_k"] + params["b_k"])], axis=2)
    v = np.concatenate([v_cache, heads(x @ params["W_v"] + params["b_v"])], axis=2)
    s = q @ k.transpose(0, 1, 3, 2) / x.dtype.type(np.sqrt(q.shape[-1]))
    allowed = np.arange(s.shape[-1]) <= 0
    s = np.where(allowed, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    o = (e / e.sum(axis=-1, keepdims=True)) @ v
    out = o.transpose(0, 2, 1, 3).reshape(B, 1, -1) @ params["W_o"] + params["b_o"]
    return out, k, v
