r"""Softmax cross-entropy, the loss of a classifier over the vocabulary:

.. math:: \ell = -\frac{1}{N} \sum_{n} \log \mathrm{softmax}(z_n)_{y_n}

Its gradient w.r.t. the logits is the famous ``(softmax(z) - onehot(y)) / N``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.core.softmax import softmax_numerator_


@dataclass(frozen=True)
class CrossEntropyCache:
    probs: np.ndarray      # (..., V) softmax of the logits
    targets: np.ndarray    # (...,) int


def cross_entropy_forward(logits: np.ndarray, targets):
    """Mean cross-entropy over every position.

    Parameters
    ----------
    logits : (..., V)
    targets : int array (...,) with values in [0, V)

    Returns
    -------
    loss : float
    cache : CrossEntropyCache
    """
    targets = np.asarray(targets)
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {logits.shape} must be targets {targets.shape} + (V,)")
    V = logits.shape[-1]
    if targets.size and (targets.min() < 0 or targets.max() >= V):
        raise ValueError(f"targets must be in [0, {V}), got [{targets.min()}, {targets.max()}]")
    # log softmax = z - log(sum(exp(z))) with z = logits - max: stable for any logits.
    z = logits - logits.max(axis=-1, keepdims=True)                        # (..., V), max 0
    # exp(z) and its row sums (z's max is already 0, so the shift inside is exact: z - 0 = z)
    e, total = softmax_numerator_(z.copy())                                # (..., V), (..., 1)
    log_probs = z - np.log(total)                                          # (..., V)
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)    # (..., 1)
    loss = -float(picked.mean())
    e /= total                                                             # softmax(logits)
    return loss, CrossEntropyCache(e, targets)


def cross_entropy_backward(dloss: float, cache: CrossEntropyCache) -> np.ndarray:
    """forward: loss = -mean(log_softmax(z)[y])  ->  dz = dloss * (softmax(z) - onehot(y)) / N."""
    probs, targets = cache.probs, cache.targets
    dz = probs.copy()                                                      # (..., V)
    np.put_along_axis(dz, targets[..., None],
                      np.take_along_axis(dz, targets[..., None], axis=-1) - 1, axis=-1)
    dz *= dz.dtype.type(dloss / max(targets.size, 1))
    return dz
