"""The affine projection ``y = x @ W + b`` used for ``W^Q, W^K, W^V`` and ``W^O`` (§3.2.2).

``W`` has shape ``(d_in, d_out)``: the paper's orientation, so that ``W_i^Q`` is a block of
columns. (PyTorch's ``nn.Linear`` stores the transpose, ``(d_out, d_in)``.)
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_float_array, check_dout, check_int, check_min_ndim, check_same_dtype


def glorot_uniform(rng: np.random.Generator, fan_in: int, fan_out: int,
                   shape: tuple | None = None) -> np.ndarray:
    """Glorot (Xavier) uniform weights: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``.

    Var = a²/3 = 2 / (fan_in + fan_out) keeps activations and gradients at a similar scale.
    ``shape`` defaults to ``(fan_in, fan_out)``; float64, draw order fixed by ``rng``.
    """
    check_int(fan_in, "fan_in")
    check_int(fan_out, "fan_out")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a np.random.Generator, got {type(rng).__name__}")
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out) if shape is None else shape)


def _check_linear(x, W, b):
    """``x (..., d_in)``, ``W (d_in, d_out)``, ``b (d_out,)`` or None, of one floating dtype."""
    x = as_float_array(x, "x")
    W = as_float_array(W, "W")
    check_min_ndim(x, "x", 1, "(..., d_in)")
    if W.ndim != 2 or W.shape[0] != x.shape[-1]:
        raise ValueError(f"W must have shape (d_in, d_out) = ({x.shape[-1]}, d_out) for x of "
                         f"shape {x.shape}, got W of shape {W.shape}")
    arrays = {"x": x, "W": W}
    if b is not None:
        b = as_float_array(b, "b")
        if b.shape != (W.shape[1],):
            raise ValueError(f"b must have shape (d_out,) = ({W.shape[1]},), got {b.shape}")
        arrays["b"] = b
    check_same_dtype(**arrays)
    return x, W, b


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``(..., d_in) @ (d_in, d_out) + (d_out,) -> (..., d_out)``."""
    x, W, b = _check_linear(x, W, b)
    # One (rows, d_in) @ (d_in, d_out) product: for x (B, L, d_in), ``x @ W`` would run B
    # small products (NumPy's matmul loops over the batch dims).
    y = (x.reshape(-1, x.shape[-1]) @ W).reshape(x.shape[:-1] + W.shape[1:])
    if b is not None:
        y += b
    return y


def linear_backward(dy: np.ndarray, x: np.ndarray, W: np.ndarray, has_bias: bool):
    """Gradients of ``y = x @ W + b``.

    forward: y = x @ W + b  ->  dx = dy @ W.T,  dW = sum over rows of x.T @ dy,  db = sum of dy

    Returns ``(dx, dW, db)`` with ``db`` None when there is no bias.
    """
    x, W, _ = _check_linear(x, W, None)
    dy = check_dout(dy, x.shape[:-1] + W.shape[1:], x.dtype, "dy", "y")
    if not isinstance(has_bias, (bool, np.bool_)):
        raise TypeError(f"has_bias must be a bool, got {has_bias!r}")
    x2 = x.reshape(-1, x.shape[-1])                 # (rows, d_in): every batch position is a row
    dy2 = dy.reshape(-1, dy.shape[-1])              # (rows, d_out)
    dx = (dy2 @ W.T).reshape(x.shape)               # (..., d_in)
    dW = x2.T @ dy2                                 # (d_in, d_out)
    db = dy2.sum(axis=0) if has_bias else None      # (d_out,)
    return dx, dW, db
