# exercise: tiled_attention
import numpy as np


def tiled_attention(q, k, v, block_size):
    # a running log-sum-exp per query (np.logaddexp), float64 inside, cast back at the end
    dt = q.dtype
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    q = q / np.sqrt(q.shape[-1])
    lse = np.full(q.shape[:-1] + (1,), -np.inf)
    out = 0.0
    for j in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2)
        b_max = s.max(-1, keepdims=True)
        b_lse = b_max + np.log(np.exp(s - b_max).sum(-1, keepdims=True))
        new = np.logaddexp(lse, b_lse)
        out = out * np.exp(lse - new) + np.exp(s - new) @ v[..., j:j + block_size, :]
        lse = new
    return out.astype(dt)
