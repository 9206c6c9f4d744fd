# exercise: tiled_attention
# the student's slip: averages the softmax of each block
import numpy as np


def tiled_attention(q, k, v, block_size):
    outs = []
    for j in range(0, k.shape[-2], block_size):
        kb = k[..., j:j + block_size, :]
        s = q @ np.swapaxes(kb, -1, -2) / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
        e = np.exp(s - s.max(-1, keepdims=True))
        outs.append((e / e.sum(-1, keepdims=True)) @ v[..., j:j + block_size, :])
    return sum(outs) / len(outs)
