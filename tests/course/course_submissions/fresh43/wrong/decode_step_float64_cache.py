# exercise: decode_step
# slip: grows the caches in np.zeros buffers (float64): float32 inputs give float64 caches and output
import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    B, _, D = x.shape
    h = num_heads

    def heads(y):
        return y.reshape(B, 1, h, -1).transpose(0, 2, 1, 3)

    q = heads(x @ params["W_q"] + params["b_q"])
    t = k_cache.shape[2]
    k = np.zeros(k_cache.shape[:2] + (t + 1, k_cache.shape[3]))
    v = np.zeros(v_cache.shape[:2] + (t + 1, v_cache.shape[3]))
    k[:, :, :t], v[:, :, :t] = k_cache, v_cache
    k[:, :, t:] = heads(x @ params["W_k"] + params["b_k"])
    v[:, :, t:] = heads(x @ params["W_v"] + params["b_v"])
    s = q @ k.transpose(0, 1, 3, 2) / x.dtype.type(np.sqrt(q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    o = (e / e.sum(axis=-1, keepdims=True)) @ v
    out = o.transpose(0, 2, 1, 3).reshape(B, 1, -1) @ params["W_o"] + params["b_o"]
    return out, k, v
