# exercise: tiled_attention
# the student's slip: np.full(..., -np.inf) and np.zeros(...) without dtype: float64 running state, float32
#   in, float64 out
# diagnosis: dtype not kept
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf)
    l = np.zeros(q.shape[:-1] + (1,))
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        corr = np.exp(m - m_new)
        p = np.exp(s - m_new)
        acc = acc * corr + p @ v[..., j:j + block_size, :]
        l = l * corr + p.sum(-1, keepdims=True)
        m = m_new
    return acc / l
