# exercise: tiled_attention
import numpy as np


def tiled_attention(q, k, v, block_size):
    dt = q.dtype
    scale = dt.type(1.0 / np.sqrt(q.shape[-1]))
    m = np.full(q.shape[:-1] + (1,), np.finfo(dt).min, dtype=dt)
    total = np.zeros(q.shape[:-1] + (1,), dtype=dt)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=dt)
    for j in range(0, k.shape[-2], block_size):
        s = np.matmul(q, np.swapaxes(k[..., j:j + block_size, :], -1, -2)) * scale
        new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shrink = np.exp(m - new)
        e = np.exp(s - new)
        total = total * shrink + e.sum(axis=-1, keepdims=True)
        out = out * shrink + np.matmul(e, v[..., j:j + block_size, :])
        m = new
    return out / total
