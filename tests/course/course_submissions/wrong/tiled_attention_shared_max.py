# exercise: tiled_attention
# the student's slip: one running max per block, shared by all the queries
# diagnosis: one running max shared by all queries
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    m = -np.inf
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
        m_new = max(m, float(s.max()))
        e = np.exp(s - m_new)
        l = l * math.exp(m - m_new) + e.sum(-1, keepdims=True)
        acc = acc * math.exp(m - m_new) + e @ v[..., j:j + block_size, :]
        m = m_new
    return (acc / l).astype(q.dtype)
