# exercise: tiled_attention
# the student's slip: the block max is taken without keepdims, so it lines up with the keys, not the queries
# diagnosis: shapes that do not broadcast
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    c = 1 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * c
        m_new = np.maximum(m, s.max(-1))
        corr = np.exp(m - m_new)
        e = np.exp(s - m_new)
        l = l * corr + e.sum(-1, keepdims=True)
        acc = acc * corr + e @ v[..., j:j + block_size, :]
        m = m_new
    return acc / l
