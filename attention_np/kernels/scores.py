r"""The scores of Eq. (1), ``QKᵀ·scale + bias``: formed safely, and their backward pieces.

Every path that computes Eq. (1) (fused, blocked, tiled) forms its scores with these helpers:

- **scale q, not the scores**: ``(q·scale) @ kᵀ`` scales L·d_k numbers instead of L·S, the same
  product; only when ``q·scale`` alone overflows (a huge ``scale``) is the product scaled after;
- (soft-capping, between the two, is a variant: :mod:`attention_np.variants.softcap`;)
- **a bias** added (it may add batch dims), and its gradient summed back to the bias's shape.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import sum_to_shape
from attention_np.variants.gqa import ungroup_queries


def scaled_scores(q, k, scale: float, out=None) -> np.ndarray:
    """``(q * scale) @ k.T``, or ``(q @ k.T) * scale`` when ``q * scale`` alone overflows.

    ``q (..., L, d_k)``, ``k (..., S, d_k)`` -> ``(..., L, S)``, written into ``out`` if given.
    """
    s = q.dtype.type(scale)
    with np.errstate(over="ignore"):       # caught below
        qs = q * s
    if overflowed(qs, q):                  # scores representable, q * scale not
        return np.multiply(np.matmul(q, np.swapaxes(k, -1, -2), out=out), s, out=out)
    return np.matmul(qs, np.swapaxes(k, -1, -2), out=out)


def overflowed(qs: np.ndarray, q: np.ndarray) -> bool:
    """Whether ``qs = q * scale`` is inf where ``q`` is finite."""
    return bool((np.isinf(qs) & np.isfinite(q)).any())


def grow_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    """``x`` itself if it already has ``shape``, else a broadcast copy (a mask or bias added batch dims)."""
    return x if x.shape == shape else np.broadcast_to(x, shape).copy()


def add_bias(scores: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``scores + bias``, in place when the bias adds no batch dims."""
    scores = grow_to(scores, np.broadcast_shapes(scores.shape, bias.shape))
    scores += bias
    return scores


def bias_gradient(dscores, bias_shape, groups: int = 1):
    """forward: ``scores = ... + bias``  ->  ``dbias = dscores`` summed to ``bias_shape``.

    ``dscores (..., L, S)``, grouped ``(..., H_kv, G, L, S)`` when ``groups > 1`` (grouped-query
    attention); None when the forward had no bias (``bias_shape`` None).
    """
    if bias_shape is None:
        return None
    if groups > 1:
        dscores = ungroup_queries(dscores)                           # (..., H, L, S)
    return sum_to_shape(dscores, bias_shape)
