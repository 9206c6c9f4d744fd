r"""Splitting the projected features into ``h`` heads, and the paper's
:math:`\mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)` (§3.2.2).

Head ``i`` owns feature columns ``[i*d, (i+1)*d)``, the layout of PyTorch's
``nn.MultiheadAttention``. Each function is the other's backward.
"""

from __future__ import annotations

import numpy as np

from attention_np.paper._validate import check_int


def split_heads(x, num_heads: int) -> np.ndarray:
    """``(..., L, h*d) -> (..., h, L, d)``; head ``i`` is feature columns ``[i*d, (i+1)*d)``.

    Returns a view of ``x``. Its backward is :func:`merge_heads`.

    Parameters
    ----------
    x : array (..., L, h*d), any dtype
    num_heads : int, ``h``; divides the last dim
    """
    x = np.asarray(x)
    h = check_int(num_heads, "num_heads")
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dims (..., L, h*d), got shape {x.shape}")
    *batch, L, features = x.shape
    if features % h:
        raise ValueError(f"x has {features} features, not divisible by num_heads={h}")
    x = x.reshape(*batch, L, h, features // h)     # (..., L, h, d)
    return np.swapaxes(x, -2, -3)                  # (..., h, L, d)


def merge_heads(x) -> np.ndarray:
    """``(..., h, L, d) -> (..., L, h*d)``: the Concat. Its backward is :func:`split_heads`.

    Parameters
    ----------
    x : array (..., h, L, d), any dtype
    """
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x must have at least 3 dims (..., h, L, d), got shape {x.shape}")
    *batch, h, L, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*batch, L, h * d)   # (..., L, h, d) -> (..., L, h*d)
