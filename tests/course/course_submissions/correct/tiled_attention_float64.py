# exercise: tiled_attention
import numpy as np


def tiled_attention(q, k, v, block_size):
    out_dtype = q.dtype
    q, k, v = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    d = q.shape[-1]
    run_max = np.full(q.shape[:-1], -np.inf)
    run_sum = np.zeros(q.shape[:-1])
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for j in range(0, k.shape[-2], block_size):
        scores = np.einsum("...ld,...sd->...ls", q, k[..., j:j + block_size, :]) / np.sqrt(d)
        new_max = np.maximum(run_max, scores.max(-1))
        w = np.exp(scores - new_max[..., None])
        fix = np.exp(run_max - new_max)
        run_sum = run_sum * fix + w.sum(-1)
        out = out * fix[..., None] + np.einsum("...ls,...sd->...ld", w, v[..., j:j + block_size, :])
        run_max = new_max
    return (out / run_sum[..., None]).astype(out_dtype)
