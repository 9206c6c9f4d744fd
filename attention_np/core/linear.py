"""The affine projection ``y = x @ W + b`` used for ``W^Q, W^K, W^V`` and ``W^O`` (§3.2.2).

``W`` has shape ``(d_in, d_out)``: the paper's orientation, so that ``W_i^Q`` is a block of
columns. (PyTorch's ``nn.Linear`` stores the transpose, ``(d_out, d_in)``.)
"""

from __future__ import annotations

import numpy as np


def glorot_uniform(rng: np.random.Generator, fan_in: int, fan_out: int,
                   shape: tuple | None = None) -> np.ndarray:
    """Glorot (Xavier) uniform weights: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``.

    Var = a²/3 = 2 / (fan_in + fan_out) keeps activations and gradients at a similar scale.
    ``shape`` defaults to ``(fan_in, fan_out)``; float64, draw order fixed by ``rng``.
    """
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out) if shape is None else shape)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``(..., d_in) @ (d_in, d_out) + (d_out,) -> (..., d_out)``."""
    y = x @ W
    if b is not None:
        y += b
    return y


def linear_backward(dy: np.ndarray, x: np.ndarray, W: np.ndarray, has_bias: bool):
    """Gradients of ``y = x @ W + b``.

    forward: y = x @ W + b  ->  dx = dy @ W.T,  dW = sum over rows of x.T @ dy,  db = sum of dy

    Returns ``(dx, dW, db)`` with ``db`` None when there is no bias.
    """
    dx = dy @ W.T                                   # (..., d_in)
    x2 = x.reshape(-1, x.shape[-1])                 # (rows, d_in): every batch position is a row
    dy2 = dy.reshape(-1, dy.shape[-1])              # (rows, d_out)
    dW = x2.T @ dy2                                 # (d_in, d_out)
    db = dy2.sum(axis=0) if has_bias else None      # (d_out,)
    return dx, dW, db
