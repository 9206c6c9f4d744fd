"""Numerically stable softmax and its vector-Jacobian product.

The softmax turns a row of scores into weights that are positive and sum to 1:

    softmax(x)_j = exp(x_j) / sum_k exp(x_k)

Subtracting the row maximum first changes nothing mathematically (the factor exp(-m)
cancels) but keeps every exponent <= 0, so nothing overflows even for scores of 1e5.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bool_mask, as_float_array


def softmax(x, axis: int = -1, *, where=None) -> np.ndarray:
    r"""Numerically stable softmax along ``axis``.

    .. math:: \mathrm{softmax}(x)_j = \frac{e^{x_j - m}}{\sum_k e^{x_k - m}}, \quad m = \max_k x_k

    Parameters
    ----------
    x : float array, any shape
    axis : int
        The axis that sums to 1.
    where : bool array broadcastable to ``x.shape``, optional
        False entries are left out of the sum and get weight 0. A slice with nothing
        allowed is all 0 (never NaN), as is a slice whose entries are all ``-inf``.

    Returns
    -------
    p : array of ``x.shape`` and ``x.dtype``
    """
    x = as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dim (the axis that sums to 1), got a 0-d array")
    if not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis must be an int in [-{x.ndim}, {x.ndim}) for x of shape "
                         f"{x.shape}, got {axis!r}")
    if where is None:
        where = np.ones(x.shape, dtype=bool)
    where = as_bool_mask(where, "where")
    try:
        where = np.broadcast_to(where, x.shape)
    except ValueError:
        raise ValueError(f"where of shape {where.shape} does not broadcast to "
                         f"x of shape {x.shape}") from None
    where = where & (x != -np.inf)                       # a -inf entry gets weight 0 as well
    # Subtracting the row maximum changes nothing (exp(-m) cancels) but keeps every exponent <= 0.
    m = np.max(x, axis=axis, keepdims=True, where=where, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)                   # a slice with nothing allowed: shift by 0
    e = np.exp(x - m, where=where, out=np.zeros_like(x))  # 0 where not allowed
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)            # a slice with nothing allowed stays 0


def softmax_backward(dp, p, axis: int = -1) -> np.ndarray:
    r"""Vector-Jacobian product of the softmax: the gradient w.r.t. its input.

    With :math:`p = \mathrm{softmax}(x)`, the Jacobian is
    :math:`\partial p_i / \partial x_j = p_i(\delta_{ij} - p_j)`, so

    .. math:: dx_j = \sum_i dp_i\, p_i (\delta_{ij} - p_j) = p_j \Big(dp_j - \sum_i dp_i\, p_i\Big)

    The (n × n) Jacobian is never built: one row sum and two elementwise operations.
    Where ``p`` is 0 (masked entries, fully masked rows) the gradient is 0.

    Parameters
    ----------
    dp : array of ``p.shape``
        Upstream gradient w.r.t. the softmax output.
    p : array
        The softmax output of the forward pass.

    Returns
    -------
    dx : array of ``p.shape``
    """
    dp = as_float_array(dp, "dp")
    p = as_float_array(p, "p")
    if dp.shape != p.shape:
        raise ValueError(f"dp has shape {dp.shape} but p has shape {p.shape}")
    if dp.dtype != p.dtype:
        raise TypeError(f"dp has dtype {dp.dtype} but p has dtype {p.dtype} "
                        f"(mixed float32/float64 is refused, not silently upcast)")
    if p.ndim == 0 or not isinstance(axis, (int, np.integer)) or not -p.ndim <= axis < p.ndim:
        raise ValueError(f"axis must be an int in [-{p.ndim}, {p.ndim}) for p of shape "
                         f"{p.shape}, got {axis!r}")
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))
