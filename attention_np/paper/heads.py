"""Splitting features into heads and concatenating them back (§3.2.2).

Head ``i`` owns feature columns ``[i*d, (i+1)*d)``: the layout of the paper's
``Concat(head_1, ..., head_h)`` and of PyTorch's ``nn.MultiheadAttention``.
Each function is the other's backward: the gradient of ``split_heads`` is ``merge_heads`` of
the upstream gradient, and vice versa.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_int


def split_heads(x, num_heads: int) -> np.ndarray:
    """``(..., L, h*d) -> (..., h, L, d)``; head ``i`` is feature columns ``[i*d, (i+1)*d)``.

    Returns a view of ``x`` (no copy).
    """
    x = np.asarray(x)
    check_int(num_heads, "num_heads")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dims (..., L, h*d), got shape {x.shape}")
    *batch, L, features = x.shape
    if features % num_heads:
        raise ValueError(f"x has {features} features, not divisible by num_heads={num_heads}")
    x = x.reshape(*batch, L, num_heads, features // num_heads)  # (..., L, h, d)
    return np.swapaxes(x, -2, -3)                                # (..., h, L, d)


def merge_heads(x) -> np.ndarray:
    """``(..., h, L, d) -> (..., L, h*d)``: the paper's ``Concat(head_1, ..., head_h)``."""
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dims (..., h, L, d), got shape {x.shape}")
    *batch, h, L, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*batch, L, h * d)   # (..., L, h, d) -> (..., L, h*d)
