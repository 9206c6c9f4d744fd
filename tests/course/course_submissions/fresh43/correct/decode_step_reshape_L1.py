# exercise: decode_step
# style: splits the new position with a direct reshape (B, 1, h*d) -> (B, h, 1, d): right here since L = 1
import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    B = x.shape[0]
    d_k = params["W_q"].shape[1] // num_heads
    d_v = params["W_v"].shape[1] // num_heads
    q = (x @ params["W_q"] + params["b_q"]).reshape(B, num_heads, 1, d_k)
    k = (x @ params["W_k"] + params["b_k"]).reshape(B, num_heads, 1, d_k)
    v = (x @ params["W_v"] + params["b_v"]).reshape(B, num_heads, 1, d_v)
    K = np.concatenate((k_cache, k), axis=-2)
    V = np.concatenate((v_cache, v), axis=-2)
    scores = np.matmul(q, np.swapaxes(K, -1, -2)) * x.dtype.type(d_k ** -0.5)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    o = np.matmul(w, V)
    merged = np.swapaxes(o, 1, 2).reshape(B, 1, num_heads * d_v)
    return merged @ params["W_o"] + params["b_o"], K, V
