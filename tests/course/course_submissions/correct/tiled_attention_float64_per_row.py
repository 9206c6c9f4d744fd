# exercise: tiled_attention
# the student's style: float64 inside, a per-row running max kept as a flat (..., L) array
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1], -np.inf)
    l = np.zeros(q.shape[:-1])
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for j in range(0, k.shape[-2], block_size):
        s = np.matmul(q64, np.swapaxes(k64[..., j:j + block_size, :], -1, -2)) * scale
        m_new = np.maximum(m, s.max(-1))
        alpha = np.exp(m - m_new)
        e = np.exp(s - m_new[..., None])
        l = alpha * l + e.sum(-1)
        acc = alpha[..., None] * acc + e @ v64[..., j:j + block_size, :]
        m = m_new
    return (acc / l[..., None]).astype(q.dtype)
