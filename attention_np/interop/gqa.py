"""Grouped-query attention as plain attention with repeated key/value heads.

In grouped-query attention (GQA; multi-query attention when ``H_kv = 1``) the ``H`` query heads
share ``H_kv`` key/value heads: query head ``n`` uses key/value head ``n // (H / H_kv)``. That is
exactly ordinary attention after repeating each key/value head ``H / H_kv`` times in place,
torch's ``repeat_interleave`` and JAX's grouping of query heads, so the frameworks' GQA can be
diffed against :func:`sdpa_forward` on repeated heads. (When ``sdpa_forward(...,
enable_gqa=True)`` exists, it computes the same numbers without the copies.)
"""

from __future__ import annotations

import numpy as np

from ..attention import sdpa_backward, sdpa_forward


def repeat_kv_heads(x, num_heads: int) -> np.ndarray:
    """``(..., H_kv, S, d) -> (..., H, S, d)``: head ``j`` repeated ``H / H_kv`` times in a row."""
    x = np.asarray(x)
    H_kv = x.shape[-3]
    if num_heads % H_kv:
        raise ValueError(f"num_heads={num_heads} is not a multiple of the {H_kv} key/value heads "
                         f"of shape {x.shape}")
    return np.repeat(x, num_heads // H_kv, axis=-3)


def repeat_kv_heads_backward(dx, num_kv_heads: int) -> np.ndarray:
    """Backward of :func:`repeat_kv_heads`: each key/value head sums the gradients of its copies.

    forward: x_rep[..., n, :, :] = x[..., n // G, :, :]  ->  dx[..., j] = sum over its G copies
    """
    dx = np.asarray(dx)
    *batch, H, S, d = dx.shape
    if H % num_kv_heads:
        raise ValueError(f"dx has {H} heads, not a multiple of num_kv_heads={num_kv_heads}")
    return dx.reshape(*batch, num_kv_heads, H // num_kv_heads, S, d).sum(axis=-3)


def gqa_sdpa_forward(q, k, v, mask=None, **kwargs):
    """:func:`sdpa_forward` with ``k, v`` of ``H_kv`` heads shared by the ``H`` heads of ``q``.

    ``q (..., H, L, d_k)``, ``k (..., H_kv, S, d_k)``, ``v (..., H_kv, S, d_v)``; returns
    ``(out, cache)`` for :func:`gqa_sdpa_backward`. Other keyword arguments go to ``sdpa_forward``.
    """
    H, H_kv = np.shape(q)[-3], np.shape(k)[-3]
    out, cache = sdpa_forward(q, repeat_kv_heads(k, H), repeat_kv_heads(v, H), mask, **kwargs)
    return out, (cache, H_kv)


def gqa_sdpa_backward(dout, cache):
    """Backward of :func:`gqa_sdpa_forward`: ``(dq, dk, dv)`` with ``dk, dv`` of ``H_kv`` heads."""
    sdpa_cache, H_kv = cache
    dq, dk, dv = sdpa_backward(dout, sdpa_cache)
    return dq, repeat_kv_heads_backward(dk, H_kv), repeat_kv_heads_backward(dv, H_kv)
