# exercise: tiled_attention
# slip: the running sum and output start as np.zeros (float64): float32 inputs give float64
import numpy as np


def tiled_attention(q, k, v, block_size):
    dt = q.dtype
    scale = dt.type(1 / np.sqrt(q.shape[-1]))
    S = k.shape[-2]
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=dt)
    l = np.zeros(q.shape[:-1] + (1,))
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for j in range(0, S, block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        alpha = np.exp(m - m_new)
        e = np.exp(s - m_new)
        l = l * alpha + e.sum(axis=-1, keepdims=True)
        acc = acc * alpha + e @ v[..., j:j + block_size, :]
        m = m_new
    return acc / l
