# exercise: tiled_attention
# slip: rescales the accumulator when the max grows but adds to the running sum l without rescaling it.
import numpy as np


def tiled_attention(q, k, v, block_size):
    dt = q.dtype
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    L, S = q.shape[-2], k.shape[-2]
    scale = dt.type(1.0 / np.sqrt(q.shape[-1]))
    m = np.full(lead + (L, 1), -np.inf, dtype=dt)
    l = np.zeros(lead + (L, 1), dtype=dt)
    acc = np.zeros(lead + (L, v.shape[-1]), dtype=dt)
    for start in range(0, S, block_size):
        kb = k[..., start:start + block_size, :]
        vb = v[..., start:start + block_size, :]
        s = (q @ np.swapaxes(kb, -1, -2)) * scale
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        alpha = np.exp(m - m_new)
        e = np.exp(s - m_new)
        l = l + e.sum(axis=-1, keepdims=True)
        acc = acc * alpha + e @ vb
        m = m_new
    return acc / l
