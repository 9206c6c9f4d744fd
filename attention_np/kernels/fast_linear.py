"""The projections ``y = x @ W + b`` of :mod:`attention_np.paper.linear`, for the hot loops.

The same numbers (to rounding) and the same errors; two changes of *how*:

- the rows of every batch entry go through **one 2-D product**, ``(rows, d_in) @ (d_in, d_out)``:
  NumPy runs ``(B, n, d_in) @ (d_in, d_out)`` as B small products, which costs a tiny model
  (``python -m attention_np train``: B = 64 sequences of n = 10 tokens) more than the arithmetic;
- the argument checks take a **fast lane** when the inputs are already float arrays of one dtype
  and matching shapes, and fall back to the paper's checks (and their messages) otherwise.
"""

from __future__ import annotations

import numpy as np

from attention_np.paper import linear as paper


def _plain(x, W, b=None) -> bool:
    """Whether ``x``, ``W`` (and ``b``) are float ndarrays of one dtype with matching shapes."""
    return (type(x) is np.ndarray and type(W) is np.ndarray and x.dtype.kind == "f"
            and W.dtype == x.dtype and W.ndim == 2 and x.ndim >= 1 and x.shape[-1] == W.shape[0]
            and (b is None or (type(b) is np.ndarray and b.dtype == x.dtype
                               and b.shape == (W.shape[1],))))


def linear_forward(x, W, b=None) -> np.ndarray:
    """``y = x @ W + b``, as :func:`attention_np.paper.linear.linear_forward`.

    ``x (..., d_in)``, ``W (d_in, d_out)``, ``b (d_out,)`` or None -> ``y (..., d_out)``.
    """
    if not _plain(x, W, b):
        return paper.linear_forward(x, W, b)                  # its checks, its messages
    y = x.reshape(-1, x.shape[-1]) @ W                         # (rows, d_out): one product
    if b is not None:
        y += b
    return y.reshape(x.shape[:-1] + W.shape[1:])               # (..., d_out)


def linear_backward(dy, x, W, has_bias: bool):
    """``dx, dW, db`` of ``y = x @ W + b``, as :func:`attention_np.paper.linear.linear_backward`.

    ``dy (..., d_out)``, ``x (..., d_in)``, ``W (d_in, d_out)`` -> ``dx (..., d_in)``,
    ``dW (d_in, d_out)``, ``db (d_out,)`` (None when ``has_bias`` is False).
    """
    if not (_plain(x, W) and type(dy) is np.ndarray and dy.dtype == x.dtype
            and dy.shape == x.shape[:-1] + W.shape[1:] and isinstance(has_bias, (bool, np.bool_))):
        return paper.linear_backward(dy, x, W, has_bias)      # its checks, its messages
    x2 = x.reshape(-1, x.shape[-1])                            # (rows, d_in)
    dy2 = dy.reshape(-1, dy.shape[-1])                         # (rows, d_out)
    # forward: y = x @ W + b  ->  dx = dy @ W.T,  dW = x.T @ dy (summed over rows),  db = sum of dy
    dx = (dy2 @ W.T).reshape(x.shape)                          # (..., d_in)
    dW = x2.T @ dy2                                            # (d_in, d_out)
    db = dy2.sum(axis=0) if has_bias else None                 # (d_out,)
    return dx, dW, db
