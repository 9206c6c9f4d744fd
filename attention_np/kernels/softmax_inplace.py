"""The softmax in place, for the kernels: ``exp(x - max)`` written over the scores buffer, so that
one (L, S) array serves the scores, their exponentials and the weights. The readable softmax is
:mod:`attention_np.paper.softmax`; the two give the same numbers.
"""

from __future__ import annotations

import numpy as np


def softmax_numerator_(x: np.ndarray, axis: int = -1):
    """``exp(x - max(x))`` in place along ``axis``, and its sums: the softmax before its division.

    Returns ``(x, total)``, ``total`` with ``keepdims``, so that ``softmax(x) = x / total``.
    Entries equal to ``-inf`` become 0. A slice whose entries are all ``-inf`` (a fully masked
    query row) becomes all 0 with ``total = 1``, so dividing keeps 0 rather than 0/0 = NaN.
    The attention forward stops here and divides its (L, d_v) output by ``total`` instead of
    the (L, S) weights.
    """
    m = x.max(axis=axis, keepdims=True, initial=-np.inf)   # initial: a slice may be empty (S = 0)
    x, total = _exp_shifted_(x, m, axis)
    total[total == 0] = 1
    return x, total


def softmax_numerator_with_sink_(x: np.ndarray, sink: np.ndarray):
    """:func:`softmax_numerator_` along the last axis with one more entry per row, ``sink``, that
    joins the max and the sum but is not stored: the attention sink
    (:mod:`attention_np.variants.sinks`), a logit per head broadcastable to ``(..., L, 1)``.

    Returns ``(x, total, e_sink)``: ``x = exp(x - m)``, ``e_sink = exp(sink - m)`` (..., L, 1) and
    ``total = sum(x) + e_sink``, ``m`` the row max over ``x`` and the sink. A row of ``x`` all
    ``-inf`` (every key masked) puts all its weight on the sink: ``x`` 0, ``e_sink = total``.
    """
    m = np.maximum(x.max(axis=-1, keepdims=True, initial=-np.inf), sink)     # (..., L, 1)
    x, total = _exp_shifted_(x, m, -1)
    e_sink = np.exp(sink - m)                                                # (..., L, 1)
    total += e_sink
    total[total == 0] = 1                                  # a -inf sink on a fully masked row
    return x, total, e_sink


def _exp_shifted_(x: np.ndarray, m: np.ndarray, axis: int):
    """``x = exp(x - m)`` in place (``m`` the max, changed to 0 where it is ``-inf``) and its sum."""
    # A fully masked slice has max -inf; shifting by it would give (-inf) - (-inf) = NaN.
    # Shift it by 0 instead: its exp is then exp(-inf) = 0 everywhere.
    m[m == -np.inf] = 0
    x -= m
    np.exp(x, out=x)                                   # every entry in [0, 1]
    return x, x.sum(axis=axis, keepdims=True)          # >= 1, or 0 for a fully masked slice


def softmax_(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax of ``x`` along ``axis``, computed in place; returns ``x``.

    ``-inf`` entries get weight 0, and a slice of all ``-inf`` becomes all 0 (see
    :func:`softmax_numerator_`).
    """
    x, total = softmax_numerator_(x, axis)
    x /= total
    return x

