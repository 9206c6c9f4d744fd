# exercise: mha_forward
# the student's slip: squeezes the stacked heads, which drops the head axis when h = 1 (and B or L when 1)
import math

import numpy as np


def mha_forward(query, key, value, params, num_heads, mask=None):
    h = num_heads
    B, L, _ = query.shape
    S = key.shape[1]
    d_k = params["W_q"].shape[1] // h
    d_v = params["W_v"].shape[1] // h
    q = (query @ params["W_q"] + params["b_q"]).reshape(B, L, h, d_k)
    k = (key @ params["W_k"] + params["b_k"]).reshape(B, S, h, d_k)
    v = (value @ params["W_v"] + params["b_v"]).reshape(B, S, h, d_v)
    outs = []
    for i in range(h):
        s = q[:, :, i] @ np.swapaxes(k[:, :, i], -1, -2) / math.sqrt(d_k)
        if mask is not None:
            s = np.where(mask[:, 0] if mask.ndim == 4 else mask, s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        outs.append((e / e.sum(-1, keepdims=True)) @ v[:, :, i])
    heads = np.stack(outs, axis=2).squeeze()          # (B, L, h, d_v)
    return heads.reshape(B, L, h * d_v) @ params["W_o"] + params["b_o"] if heads.ndim == 4 else (
        heads @ params["W_o"][:d_v] + params["b_o"])
