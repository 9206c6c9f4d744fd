"""Footnote 4 on trained weights: do a trained model's queries and keys look like its assumption?

Footnote 4 assumes the components of ``q`` and ``k`` are independent random variables with mean 0
and variance 1; then ``Var(q·k) = d_k`` and the scaled scores ``q·k/√d_k`` have variance 1. That is
true of random projections at initialisation. Here the same numbers are measured on the ``q`` and
``k`` a model actually computes, one head at a time (notebooks 5 and 9):

- ``var_ratio``: ``Var(q·k) / d_k`` over every allowed (query, key) pair (1 under the assumption);
- ``independent_ratio``: what ``Var(q·k) / d_k`` would be if the components were independent, with
  their measured means and variances, ``Σ_i (E[q_i²] E[k_i²] - E[q_i]² E[k_i]²) / d_k``: the gap
  to ``var_ratio`` is what the correlations between components contribute;
- ``entropy``: the mean entropy (nats) of the head's softmax rows, ``softmax(q·kᵀ/√d_k)``, against
  ``max_entropy`` (uniform weights, ``log S``) and ``random_entropy`` (the same rows, with ``q`` and
  ``k`` replaced by unit-variance Gaussian noise: the assumption itself).
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_generator, check_array
from attention_np.nn.model import model_forward
from attention_np.paper.softmax import softmax


def _row_entropy(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each softmax row over the allowed keys: (..., L, S) -> (..., L)."""
    p = softmax(scores, where=allowed)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(-1)


def attention_statistics(q, k, mask=None, *, rng=0) -> dict:
    """Footnote 4's quantities, measured per head on real queries and keys.

    Parameters
    ----------
    q : (B, h, L, d_k) the queries before the ``1/√d_k`` scale (``cache.attention.q``)
    k : (B, h, S, d_k) the keys
    mask : bool, broadcastable to (B, h, L, S), True = this pair counts (e.g. neither token is
        padding); default every pair. Query rows with no allowed key are left out.
    rng : seed or Generator for the random baseline

    Returns
    -------
    dict of (h,) arrays: ``var_ratio``, ``independent_ratio``, ``mean_ratio`` (``E[q·k] / √d_k``),
    ``entropy``, ``max_entropy``, ``random_entropy`` (see the module docstring)
    """
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if q.ndim != 4 or k.ndim != 4 or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q must be (B, h, L, d_k) and k (B, h, S, d_k) with the same B, h and "
                         f"d_k, got q {q.shape} and k {k.shape}")
    B, h, L, d_k = q.shape
    S = k.shape[2]
    if mask is not None:
        mask = check_array(mask, "mask", kind="bool", layout="broadcastable to (B, h, L, S)")
        try:
            fits = np.broadcast_shapes(mask.shape, (B, h, L, S)) == (B, h, L, S)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"mask of shape {mask.shape} does not broadcast to the scores "
                             f"(B, h, L, S) = {(B, h, L, S)}")
    allowed = np.broadcast_to(True if mask is None else mask, (B, h, L, S))
    rows = allowed.any(-1)                                             # (B, h, L): rows that count
    n = allowed.sum(axis=(0, 2, 3))                                    # (h,) pairs per head

    dots = q @ np.swapaxes(k, -1, -2)                                  # (B, h, L, S) q·k, unscaled
    mean = np.where(allowed, dots, 0).sum(axis=(0, 2, 3)) / n          # (h,)
    var = np.where(allowed, (dots - mean[:, None, None]) ** 2, 0).sum(axis=(0, 2, 3)) / n

    # Moments of each component over the same pairs: query i counts once per key it may see.
    per_q = allowed.sum(-1)[..., None]                                 # (B, h, L, 1)
    per_k = allowed.sum(-2)[..., None]                                 # (B, h, S, 1)
    eq, eq2 = ((per_q * q ** p).sum(axis=(0, 2)) / n[:, None] for p in (1, 2))   # (h, d_k)
    ek, ek2 = ((per_k * k ** p).sum(axis=(0, 2)) / n[:, None] for p in (1, 2))
    independent = (eq2 * ek2 - eq ** 2 * ek ** 2).sum(-1)              # (h,)

    def mean_entropy(scores):                                          # (B, h, L, S) -> (h,)
        return np.where(rows, _row_entropy(scores, allowed), 0).sum(axis=(0, 2)) / rows.sum(axis=(0, 2))

    g = as_generator(rng)
    q_rand, k_rand = g.standard_normal(q.shape), g.standard_normal(k.shape)
    return {
        "var_ratio": var / d_k,
        "independent_ratio": independent / d_k,
        "mean_ratio": mean / np.sqrt(d_k),
        "entropy": mean_entropy(dots / np.sqrt(d_k)),
        "max_entropy": np.where(rows, np.log(np.maximum(allowed.sum(-1), 1)), 0).sum(axis=(0, 2))
        / rows.sum(axis=(0, 2)),
        "random_entropy": mean_entropy(q_rand @ np.swapaxes(k_rand, -1, -2) / np.sqrt(d_k)),
    }


def encoder_statistics(params: dict, config, tokens, *, rng=0) -> list:
    """:func:`attention_statistics` of every layer of an :mod:`attention_np.nn` encoder.

    Parameters
    ----------
    params, config : the model (``init_model`` or ``train(...).params``) and its ModelConfig
    tokens : int (B, L) input sequences

    Returns
    -------
    list with one dict per layer
    """
    _, cache = model_forward(params, tokens, config)
    return [attention_statistics(layer.attn.attention.q, layer.attn.attention.k, rng=rng)
            for layer in cache.layers]
