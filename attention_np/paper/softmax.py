r"""The softmax of Eq. (1) and its vector-Jacobian product.

.. math:: \mathrm{softmax}(x)_j = \frac{e^{x_j - m}}{\sum_k e^{x_k - m}}, \qquad m = \max_k x_k

Subtracting the maximum changes nothing mathematically (:math:`e^{-m}` cancels) but keeps every
exponent <= 0, so nothing overflows, even for scores of 1e5.
"""

from __future__ import annotations

import numpy as np

from attention_np.paper._validate import as_bool_mask, as_float_array, check_dout


def _check_axis(axis, x: np.ndarray, name: str) -> None:
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dim (the axis that sums to 1), got a 0-d array")
    if (not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_))
            or not -x.ndim <= axis < x.ndim):
        raise ValueError(f"axis must be an int in [-{x.ndim}, {x.ndim}) for {name} of shape "
                         f"{x.shape}, got {axis!r}")


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def softmax(x, axis: int = -1, *, where=None) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    Parameters
    ----------
    x : float array, any shape (at least 1-D)
    axis : int
        The axis that sums to 1.
    where : bool array broadcastable to ``x.shape``, optional
        False entries take no part and get weight 0 (the Mask box of Figure 2). A slice with
        nothing allowed is all 0: never NaN, no warning.

    Returns
    -------
    p : array of ``x.shape`` and ``x.dtype``
    """
    x = as_float_array(x, "x")
    _check_axis(axis, x, "x")
    if where is not None:
        where = as_bool_mask(where, "where")
        if not _broadcasts_to(where.shape, x.shape):
            raise ValueError(f"where of shape {where.shape} does not broadcast to x of shape {x.shape}")
        x = np.where(where, x, x.dtype.type(-np.inf))       # a left-out entry: exp(-inf) = 0
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(m == -np.inf, 0, m)                        # nothing allowed: shift by 0 (-inf - -inf is NaN)
    e = np.exp(x - m)                                       # every entry in [0, 1]
    total = np.sum(e, axis=axis, keepdims=True)             # >= 1, or 0 when nothing is allowed
    return e / np.where(total == 0, 1, total)


def softmax_backward(dp, p, axis: int = -1) -> np.ndarray:
    r"""Vector-Jacobian product of the softmax: the gradient w.r.t. its input.

    The Jacobian is :math:`\partial p_i / \partial x_j = p_i(\delta_{ij} - p_j)`, so

    .. math:: dx_j = \sum_i dp_i\, p_i (\delta_{ij} - p_j) = p_j \Big(dp_j - \sum_i dp_i\, p_i\Big)

    The (n x n) Jacobian is never built. Where ``p`` is 0 (a masked entry, a row with nothing
    allowed) the gradient is 0: the mask needs no backward of its own.

    Parameters
    ----------
    dp : array of ``p.shape`` and dtype
        Upstream gradient w.r.t. the softmax output.
    p : array
        The softmax output of the forward pass.
    axis : int
        The axis the forward summed to 1.

    Returns
    -------
    dx : array of ``p.shape``
    """
    p = as_float_array(p, "p")
    dp = check_dout(dp, p.shape, p.dtype, "dp", "p")
    _check_axis(axis, p, "p")
    # forward: p = e / sum(e)  ->  dx = p * (dp - sum(dp * p)), the sum along axis (keepdims)
    return p * (dp - np.sum(dp * p, axis=axis, keepdims=True))      # p's shape
