# exercise: decode_step
# the student's slip: concatenates the new key and value on the feature axis (-1) instead of time (-2)
# diagnosis: cache of the wrong shape
import math

import numpy as np


def _heads(y, h):                       # (B, 1, h*d) -> (B, h, 1, d)
    B = y.shape[0]
    return y.reshape(B, 1, h, -1).transpose(0, 2, 1, 3)


def decode_step(x, k_cache, v_cache, params, num_heads):
    h = num_heads
    q = _heads(x @ params["W_q"] + params["b_q"], h)
    k_new = _heads(x @ params["W_k"] + params["b_k"], h)
    v_new = _heads(x @ params["W_v"] + params["b_v"], h)
    if k_cache.shape[-2] == 0:
        k, v = k_new, v_new
    else:
        k = np.concatenate([k_cache, np.broadcast_to(k_new, k_cache.shape)], axis=-1)
        v = np.concatenate([v_cache, np.broadcast_to(v_new, v_cache.shape)], axis=-1)
    s = q @ np.swapaxes(k[..., :q.shape[-1]], -1, -2) / math.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    o = (w @ v[..., :q.shape[-1]]).transpose(0, 2, 1, 3).reshape(x.shape[0], 1, -1)
    return o @ params["W_o"] + params["b_o"], k, v
