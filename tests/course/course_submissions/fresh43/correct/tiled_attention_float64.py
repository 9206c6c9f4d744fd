# exercise: tiled_attention
# style: the same online softmax kept in float64 inside, a while loop over blocks, cast back at the end
import numpy as np


def tiled_attention(q, k, v, block_size):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1])
    run_max = np.full(q.shape[:-1], -np.inf)
    run_sum = np.zeros(q.shape[:-1])
    run_out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    start = 0
    while start < k.shape[-2]:
        kb = k64[..., start:start + block_size, :]
        vb = v64[..., start:start + block_size, :]
        s = np.einsum("...ld,...sd->...ls", q64, kb) * scale
        new_max = np.maximum(run_max, s.max(axis=-1))
        fix = np.exp(run_max - new_max)
        w = np.exp(s - new_max[..., None])
        run_sum = run_sum * fix + w.sum(axis=-1)
        run_out = run_out * fix[..., None] + np.einsum("...ls,...sd->...ld", w, vb)
        run_max = new_max
        start += block_size
    return (run_out / run_sum[..., None]).astype(q.dtype)
