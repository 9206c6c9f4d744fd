# exercise: tiled_attention
# style: each block's normalized output and logsumexp, merged pairwise in float64 (no running accumulator).
import numpy as np


def tiled_attention(q, k, v, block_size):
    q64, k64, v64 = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    c = 1.0 / np.sqrt(q.shape[-1])
    out, lse = None, None
    for j in range(0, k.shape[-2], block_size):
        s = q64 @ np.swapaxes(k64[..., j:j + block_size, :], -1, -2) * c
        mb = s.max(axis=-1, keepdims=True)
        e = np.exp(s - mb)
        zb = e.sum(axis=-1, keepdims=True)
        ob = (e / zb) @ v64[..., j:j + block_size, :]
        lb = mb + np.log(zb)
        if out is None:
            out, lse = ob, lb
        else:
            new = np.logaddexp(lse, lb)
            out = np.exp(lse - new) * out + np.exp(lb - new) * ob
            lse = new
    return out.astype(q.dtype)
