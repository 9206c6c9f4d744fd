r"""Softmax cross-entropy, the loss of a classifier over the vocabulary:

.. math:: \ell = -\frac{1}{N} \sum_{n} \log \mathrm{softmax}(z_n)_{y_n}

Its gradient w.r.t. the logits is the famous ``(softmax(z) - onehot(y)) / N``.

Label smoothing (§5.4, the paper uses :math:`\epsilon_{ls} = 0.1`) replaces the one-hot target
by :math:`q = (1 - \epsilon)\,\mathrm{onehot}(y) + \epsilon / V`, as
``torch.nn.CrossEntropyLoss(label_smoothing=eps)``: the loss is
:math:`-\frac{1}{N}\sum_n \sum_c q_{nc} \log \mathrm{softmax}(z_n)_c` and the gradient
``(softmax(z) - q) / N``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.kernels.softmax_inplace import softmax_numerator_


@dataclass(frozen=True)
class CrossEntropyCache:
    probs: np.ndarray      # (..., V) softmax of the logits
    targets: np.ndarray    # (...,) int
    label_smoothing: float = 0.0


def cross_entropy_forward(logits: np.ndarray, targets, *, label_smoothing: float = 0.0):
    """Mean cross-entropy over every position.

    Parameters
    ----------
    logits : (..., V)
    targets : int array (...,) with values in [0, V)
    label_smoothing : float in [0, 1]
        ``eps``: the target puts ``1 - eps + eps/V`` on the label and ``eps/V`` on every class.

    Returns
    -------
    loss : float
    cache : CrossEntropyCache
    """
    targets = np.asarray(targets)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
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
    if label_smoothing:
        # sum_c q_c log p_c = (1 - eps) log p_y + (eps / V) sum_c log p_c
        uniform = -float(log_probs.mean(axis=-1).mean())                   # mean over c, then n
        loss = (1.0 - label_smoothing) * loss + label_smoothing * uniform
    e /= total                                                             # softmax(logits)
    return loss, CrossEntropyCache(e, targets, float(label_smoothing))


def cross_entropy_backward(dloss: float, cache: CrossEntropyCache) -> np.ndarray:
    """forward: loss = -mean(sum_c q_c log_softmax(z)_c)  ->  dz = dloss * (softmax(z) - q) / N,
    with ``q = onehot(y)`` without label smoothing."""
    probs, targets, eps = cache.probs, cache.targets, cache.label_smoothing
    dz = probs.copy()                                                      # (..., V)
    if eps:
        dz -= dz.dtype.type(eps / dz.shape[-1])                            # the eps / V of q
    np.put_along_axis(dz, targets[..., None],
                      np.take_along_axis(dz, targets[..., None], axis=-1) - (1 - eps), axis=-1)
    dz *= dz.dtype.type(dloss / max(targets.size, 1))
    return dz
