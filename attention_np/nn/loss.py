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

from attention_np._checks import check_array, check_cache, check_ids, check_number, check_probability
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
    logits = check_array(logits, "logits", min_ndim=1, layout="(..., V)")
    label_smoothing = check_probability(label_smoothing, "label_smoothing")
    V = logits.shape[-1]
    if V < 1:
        raise ValueError(f"logits must have at least one class (V >= 1), got shape {logits.shape}")
    targets = check_ids(targets, "targets", V, what=f"V={V} classes of logits")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"targets has shape {targets.shape} but logits {logits.shape} needs "
                         f"{logits.shape[:-1]} (logits = targets + (V,))")
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
    with ``q = onehot(y)`` without label smoothing.

    Parameters
    ----------
    dloss : float
        The gradient of the loss (1.0 to differentiate the loss itself).
    cache : CrossEntropyCache from :func:`cross_entropy_forward`
    """
    check_cache(cache, CrossEntropyCache, "cross_entropy_forward")
    dloss = check_number(dloss, "dloss")
    probs, targets, eps = cache.probs, cache.targets, cache.label_smoothing
    dz = probs.copy()                                                      # (..., V)
    if eps:
        dz -= dz.dtype.type(eps / dz.shape[-1])                            # the eps / V of q
    np.put_along_axis(dz, targets[..., None],
                      np.take_along_axis(dz, targets[..., None], axis=-1) - (1 - eps), axis=-1)
    dz *= dz.dtype.type(dloss / max(targets.size, 1))
    return dz
