r"""Scaled dot-product attention, Eq. (1) of "Attention Is All You Need" (§3.2.1):

.. math:: \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V

The forward is Figure 2 (left), one line per box: MatMul, Scale, Mask (opt.), SoftMax, MatMul.
The backward walks the same lines in reverse, each step quoting the forward line it undoes.

Shapes: ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)`` -> ``out (..., L, d_v)``;
leading batch dims broadcast, and each gradient is summed back to its input's shape.

Inputs are assumed finite. A masked key's weight is exactly 0, but ``0 * NaN`` is NaN: a NaN in
a masked value reaches the output here, and one in a masked key reaches ``dq``. The fast path
(``attention_np.sdpa_forward``) isolates them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.paper._validate import (
    as_bool_mask,
    as_float_array,
    broadcast_batch,
    check_bool,
    check_broadcasts_to,
    check_cache,
    check_d_v,
    check_dout,
    check_same_dtype,
    check_scale,
    sum_to_shape,
)
from attention_np.paper.masks import causal_mask
from attention_np.paper.softmax import softmax, softmax_backward


@dataclass(frozen=True)
class AttentionCache:
    """What :func:`sdpa_backward` needs from :func:`sdpa_forward`, and nothing else.

    ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)``, ``scale`` (the factor on
    ``QKᵀ``) and ``weights (..., L, S)``: ``softmax(scores)``, 0 at masked keys and on a row
    with every key masked.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray
    scale: float

    made_by = "attention_np.paper.sdpa_forward"


def _check_inputs(q, k, v, mask, is_causal, scale):
    """Float arrays of one dtype, matching ``d_k`` and ``S``; the mask with ``is_causal`` ANDed in."""
    q = as_float_array(q, "q", 2, "(..., L, d_k)")
    k = as_float_array(k, "k", 2, "(..., S, d_k)")
    v = as_float_array(v, "v", 2, "(..., S, d_v)")
    check_d_v(v)
    check_same_dtype(q=q, k=k, v=v)
    (L, d_k), (S, d_k2) = q.shape[-2:], k.shape[-2:]
    if d_k != d_k2:
        raise ValueError(f"q has d_k={d_k} but k has d_k={d_k2} (q {q.shape}, k {k.shape})")
    if v.shape[-2] != S:
        raise ValueError(f"k has S={S} positions but v has S={v.shape[-2]} (k {k.shape}, v {v.shape})")
    batch = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}
    if mask is not None:
        mask = as_bool_mask(mask)
        batch["mask"] = check_broadcasts_to(mask, "mask", (L, S), "scores (..., L, S)")[:-2]
    broadcast_batch(**batch)
    if check_bool(is_causal, "is_causal"):          # query i sees keys j <= i (top left)
        mask = causal_mask(L, S) if mask is None else mask & causal_mask(L, S)
    return q, k, v, mask, check_scale(scale, d_k)


def sdpa_forward(q, k, v, mask=None, *, is_causal: bool = False, scale=None):
    r"""Eq. (1), forward: the five boxes of Figure 2.

    .. math:: \text{scores} = QK^\top \cdot \text{scale},\quad
              \text{weights} = \mathrm{softmax}(\text{scores}),\quad \text{out} = \text{weights}\,V

    Parameters
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    mask : bool, broadcastable to (..., L, S), optional
        True = this query may attend to this key.
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (top-left aligned, §3.2.3); ANDed with ``mask``.
    scale : float, optional
        Default :math:`1/\sqrt{d_k}` (footnote 4); ``scale=1.0`` is dot-product attention.

    Returns
    -------
    out : (..., L, d_v), the dtype of ``q``
    cache : AttentionCache
        ``cache.weights`` is (..., L, S). A query row with every key masked gets weights 0
        and output 0 (never NaN).
    """
    q, k, v, mask, scale = _check_inputs(q, k, v, mask, is_causal, scale)
    scores = q @ np.swapaxes(k, -1, -2)          # MatMul    (..., L, S)
    scores = scores * scale                      # Scale     (..., L, S)
    # Mask (opt.): a masked score takes no part in the softmax, so its weight is exactly 0
    weights = softmax(scores, where=mask)        # SoftMax   (..., L, S); a row left with no key: 0
    out = weights @ v                            # MatMul    (..., L, d_v)
    return out, AttentionCache(q, k, v, weights, scale)


def sdpa_backward(dout, cache: AttentionCache):
    """Eq. (1), backward: the gradients of the loss w.r.t. ``q``, ``k`` and ``v``.

    Parameters
    ----------
    dout : (..., L, d_v) gradient w.r.t. ``out``, of the output's dtype
    cache : AttentionCache from :func:`sdpa_forward`

    Returns
    -------
    dq, dk, dv : each with the shape of its input (broadcast batch dims summed back)
    """
    check_cache(cache, AttentionCache, AttentionCache.made_by)
    q, k, v, weights, scale = cache.q, cache.k, cache.v, cache.weights, cache.scale
    out_shape = np.broadcast_shapes(weights.shape[:-2], v.shape[:-2]) + (q.shape[-2], v.shape[-1])
    dout = check_dout(dout, out_shape, q.dtype)                        # (..., L, d_v)

    # forward: out = weights @ v  ->  dweights = dout @ v.T,  dv = weights.T @ dout
    dweights = dout @ np.swapaxes(v, -1, -2)                           # (..., L, S)
    dv = np.swapaxes(weights, -1, -2) @ dout                           # (..., S, d_v)
    # forward: weights = softmax(scores, where=mask)  ->  dscores = weights * (dweights - rowsum)
    # (0 where the weight is 0: a masked key, a fully masked row; v's batch dims are in dweights)
    dscores = softmax_backward(dweights, np.broadcast_to(weights, dweights.shape))  # (..., L, S)
    # forward: scores = scores * scale  ->  dscores = dscores * scale
    dscores = dscores * scale                                          # (..., L, S)
    # forward: scores = q @ k.T  ->  dq = dscores @ k,  dk = dscores.T @ q
    dq = dscores @ k                                                   # (..., L, d_k)
    dk = np.swapaxes(dscores, -1, -2) @ q                              # (..., S, d_k)
    return sum_to_shape(dq, q.shape), sum_to_shape(dk, k.shape), sum_to_shape(dv, v.shape)


def scaled_dot_product_attention(q, k, v, mask=None, *, is_causal: bool = False, scale=None):
    """Eq. (1) for inference: :func:`sdpa_forward` returning ``(out, weights)``, weights (..., L, S)."""
    out, cache = sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=scale)
    return out, cache.weights
