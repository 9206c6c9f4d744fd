# exercise: tiled_attention
# the student's slip: S // block_size blocks
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    S = k.shape[-2]
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, (S // block_size) * block_size, block_size):
        kb = k[..., start:start + block_size, :]
        vb = v[..., start:start + block_size, :]
        s = (q @ np.swapaxes(kb, -1, -2)) * scale
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        corr = np.exp(m - m_new)
        p = np.exp(s - m_new)
        l = l * corr + p.sum(-1, keepdims=True)
        acc = acc * corr + p @ vb
        m = m_new
    return acc / l
