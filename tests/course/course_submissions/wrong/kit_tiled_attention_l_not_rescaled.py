# exercise: tiled_attention
# the student's slip: rescales the output accumulator but not the running sum l
# diagnosis: online softmax without the rescale of the running sum
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
        p = np.exp(s - m_new)
        acc = acc * np.exp(m - m_new) + p @ v[..., j:j + block_size, :]
        l = l + p.sum(-1, keepdims=True)
        m = m_new
    return acc / l
