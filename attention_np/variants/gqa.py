"""Grouped-query attention (GQA) and multi-query attention (MQA): fewer key/value heads than query heads.

Beyond the paper. Multi-head attention (§3.2.2) gives every head its own keys and values. When
decoding with a KV cache, those cached keys and values dominate memory traffic, so GQA (Ainslie et
al., 2023) lets a *group* of ``H / H_kv`` query heads share one key/value head; MQA (Shazeer, 2019)
is the extreme ``H_kv = 1``.

Query head ``n`` uses key/value head ``n // (H / H_kv)``: consecutive query heads share, as in
PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)`` (``repeat_interleave``).

The key/value heads are never copied ``H / H_kv`` times. Instead the query heads are *grouped*::

    q (..., H, L, d)  ->  (..., H_kv, G, L, d)      G = H / H_kv query heads per group
    k (..., H_kv, S, d) -> (..., H_kv, 1, S, d)     broadcasts over the G heads of its group

and ordinary batched attention does the rest. In the backward, broadcasting k over the G axis
becomes a sum over that axis: a shared key/value head collects the gradients of its whole group.
"""

from __future__ import annotations

import numpy as np


def kv_groups(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> int:
    """``G = H / H_kv``, the number of query heads per key/value head; a clear error otherwise."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim < 3:
            raise ValueError(f"spec.enable_gqa=True needs a head axis: {name} must be (..., heads, "
                             f"positions, features), got shape {x.shape}")
    H, H_k, H_v = q.shape[-3], k.shape[-3], v.shape[-3]
    if H_k != H_v:
        raise ValueError(f"k has {H_k} heads but v has {H_v} (k {k.shape}, v {v.shape}); "
                         f"keys and values share their heads")
    if H_k == 0 or H % H_k:
        raise ValueError(f"q has H={H} heads, not a multiple of the H_kv={H_k} heads of k and v "
                         f"(q {q.shape}, k {k.shape})")
    return H // H_k


def group_queries(x: np.ndarray, groups: int) -> np.ndarray:
    """``(..., H, L, d) -> (..., H_kv, G, L, d)``: query head ``n`` goes to group ``n // G``.

    A view (splitting an axis never copies). Also used for the (..., H, L, S) weights and the
    (..., H, L, d_v) outputs, which are laid out by query head.
    """
    *batch, H, L, d = x.shape
    return x.reshape(*batch, H // groups, groups, L, d)


def ungroup_queries(x: np.ndarray) -> np.ndarray:
    """``(..., H_kv, G, L, d) -> (..., H, L, d)``, the inverse of :func:`group_queries`."""
    *batch, H_kv, G, L, d = x.shape
    return x.reshape(*batch, H_kv * G, L, d)


def group_kv(x: np.ndarray) -> np.ndarray:
    """``(..., H_kv, S, d) -> (..., H_kv, 1, S, d)``: one key/value head broadcast over its group."""
    return x[..., None, :, :]


def group_heads(x: np.ndarray | None, heads: int, groups: int, name: str) -> np.ndarray | None:
    """A mask, bias or dropout keep-mask laid out per query head, ``(..., H | 1, L, S)``,
    regrouped to broadcast against the grouped scores ``(..., H_kv, G, L, S)``.

    With fewer than three dims there is no head axis and ``x`` broadcasts as it is.
    """
    if x is None or x.ndim < 3:
        return x
    n = x.shape[-3]
    if n == heads:
        return group_queries(x, groups)
    if n == 1:
        return x[..., None, :, :]                        # (..., 1, 1, L, S)
    raise ValueError(f"{name} of shape {x.shape} has {n} heads at axis -3; with spec.enable_gqa=True "
                     f"it must have 1 or the H={heads} query heads")
