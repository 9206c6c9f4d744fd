# exercise: decode_step
# the student's slip: squeezes x (B, 1, d_model) to (B, d_model), which drops B too when B = 1
import math

import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    h = num_heads
    x2 = x.squeeze()                                  # "the sequence axis is 1"
    n = x2.shape[0]

    def heads(y):                                     # (B, h*d) -> (B, h, 1, d)
        return y.reshape(n, h, 1, -1)

    q = heads(x2 @ params["W_q"] + params["b_q"])
    k = np.concatenate([k_cache, heads(x2 @ params["W_k"] + params["b_k"])], axis=-2)
    v = np.concatenate([v_cache, heads(x2 @ params["W_v"] + params["b_v"])], axis=-2)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    out = (w @ v).reshape(n, 1, -1)
    return out @ params["W_o"] + params["b_o"], k, v
