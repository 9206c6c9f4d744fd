# exercise: decode_step
# the student's slip: returns only the output
import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    B, _, d = x.shape
    h = num_heads
    def heads(y):
        return y.reshape(B, 1, h, -1).transpose(0, 2, 1, 3)
    q = heads(x @ params["W_q"] + params["b_q"])
    k = np.concatenate([k_cache, heads(x @ params["W_k"] + params["b_k"])], axis=2)
    v = np.concatenate([v_cache, heads(x @ params["W_v"] + params["b_v"])], axis=2)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(np.float32(q.shape[-1])).astype(x.dtype)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, 1, -1) @ params["W_o"] + params["b_o"]
