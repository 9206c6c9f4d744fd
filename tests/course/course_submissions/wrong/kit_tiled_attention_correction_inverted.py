# exercise: tiled_attention
# the student's slip: the correction factor is exp(m_new - m_old) instead of exp(m_old - m_new)
# diagnosis: the rescale when the running max grows is wrong
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        corr = np.exp(m_new - m) if np.isfinite(m).all() else np.zeros_like(m)
        p = np.exp(s - m_new)
        acc = acc * corr + p @ v[..., j:j + block_size, :]
        l = l * corr + p.sum(-1, keepdims=True)
        m = m_new
    return acc / l
