r"""The projections of §3.2.2, :math:`y = xW + b`, for :math:`W^Q, W^K, W^V` and :math:`W^O`.

``W`` has shape ``(d_in, d_out)``, the paper's orientation: :math:`W_i^Q` is a block of columns
of ``W_q``. (PyTorch's ``nn.Linear`` stores the transpose, ``(d_out, d_in)``.)
"""

from __future__ import annotations

import numpy as np

from attention_np.paper._validate import as_float_array, check_dout, check_same_dtype


def _check_linear(x, W, b):
    x = as_float_array(x, "x", 1, "(..., d_in)")
    W = as_float_array(W, "W")
    if W.ndim != 2 or W.shape[0] != x.shape[-1]:
        raise ValueError(f"W must have shape (d_in, d_out) = ({x.shape[-1]}, d_out) for x of "
                         f"shape {x.shape}, got W of shape {W.shape}")
    arrays = {"x": x, "W": W}
    if b is not None:
        b = arrays["b"] = as_float_array(b, "b")
        if b.shape != (W.shape[1],):
            raise ValueError(f"b must have shape (d_out,) = ({W.shape[1]},), got {b.shape}")
    check_same_dtype(**arrays)
    return x, W, b


def linear_forward(x, W, b=None) -> np.ndarray:
    """``y = x @ W + b``.

    Parameters
    ----------
    x : (..., d_in)
    W : (d_in, d_out)
    b : (d_out,), optional

    Returns
    -------
    y : (..., d_out)
    """
    x, W, b = _check_linear(x, W, b)
    y = x @ W                                  # (..., d_in) @ (d_in, d_out) -> (..., d_out)
    return y if b is None else y + b           # (d_out,) broadcasts over every row


def linear_backward(dy, x, W, has_bias: bool):
    """Gradients of ``y = x @ W + b``.

    Parameters
    ----------
    dy : (..., d_out) upstream gradient
    x : (..., d_in), the forward's input
    W : (d_in, d_out), the forward's weight
    has_bias : bool, whether the forward added a ``b``

    Returns
    -------
    dx : (..., d_in)
    dW : (d_in, d_out)
    db : (d_out,), or None when ``has_bias`` is False
    """
    x, W, _ = _check_linear(x, W, None)
    dy = check_dout(dy, x.shape[:-1] + W.shape[1:], x.dtype, "dy", "y = x @ W")
    if not isinstance(has_bias, (bool, np.bool_)):
        raise TypeError(f"has_bias must be a bool, got {has_bias!r}")
    x2 = x.reshape(-1, x.shape[-1])            # (rows, d_in): every batch position is one row
    dy2 = dy.reshape(-1, dy.shape[-1])         # (rows, d_out)
    # forward: y = x @ W + b  ->  dx = dy @ W.T,  dW = x.T @ dy (summed over rows),  db = sum of dy
    dx = dy @ W.T                              # (..., d_in)
    dW = x2.T @ dy2                            # (d_in, d_out)
    db = dy2.sum(axis=0) if has_bias else None  # (d_out,)
    return dx, dW, db
