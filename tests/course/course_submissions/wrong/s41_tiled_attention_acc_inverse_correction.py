# exercise: tiled_attention
# the student's slip: rescales the accumulator with exp(m_new - m) (inverted) on the accumulator only
# diagnosis: NaN in the output
import math

import numpy as np


def tiled_attention(q, k, v, block_size):
    c = 1 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * c
        m_new = np.maximum(m, s.max(-1, keepdims=True))
        e = np.exp(s - m_new)
        l = l * np.exp(m - m_new) + e.sum(-1, keepdims=True)
        acc = acc * np.exp(m_new - m) + e @ v[..., j:j + block_size, :]
        m = m_new
    return acc / l
