r"""Attention sinks (beyond the paper): a learned logit per head in every softmax denominator.

gpt-oss (and StreamingLLM's "sink" idea) lets a head attend to *nothing*: each head ``n`` has a
learned logit ``s_n`` that joins every row of scores in the softmax and is then dropped,

.. math:: \text{weights}_{ij} = \frac{e^{\text{scores}_{ij}}}{e^{s_n} + \sum_{j'} e^{\text{scores}_{ij'}}},

so a row's weights sum to less than 1. That is exactly Eq. (1) with one extra key whose score is
``s_n`` and whose value is 0: the code appends that key (a zero key, a bias column ``s_n`` and a zero
value) and runs the fused kernel (:func:`attention_np.kernels.fused.sdpa_plan`); the gradient of
the sink logit is the bias gradient of the extra column, ``dsinks_n = sum_i dscores[i, S]``
(summed over batch and rows).

A row whose every real key is masked puts all its weight on the sink: output 0, as the project's
convention for a fully masked row (and as gpt-oss).

In :func:`attention_np.mha_forward` (when ``params`` holds them) the logits are
``params["sinks"]``, ``(h,)``, as gpt-oss keeps ``self.sinks`` in its attention module;
``mha_backward`` returns their gradient in ``grads["sinks"]``. The tiled path
(:mod:`attention_np.kernels.tiled`) starts its online softmax from the sink instead of appending
a key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_bias,
    as_bool_mask,
    as_float_array,
    check_broadcasts_to,
    check_cache,
    check_qkv,
    sum_to_shape,
)
from attention_np.kernels import fused
from attention_np.kernels.plan import Plan
from attention_np.paper.masks import causal_mask
from attention_np.variants.window import window_mask


@dataclass(frozen=True)
class SinksCache:
    """What :func:`sdpa_sinks_backward` needs: the cache of the extended attention and the shapes.

    ``attention`` is the :class:`~attention_np.kernels.fused.SDPACache` over ``S + 1`` keys (the sink
    last); ``weights`` are the ``(..., L, S)`` weights of the real keys (each row sums to < 1).
    """

    attention: fused.SDPACache
    S: int
    sinks_shape: tuple
    bias_shape: tuple | None

    made_by = "attention_np.sdpa_sinks_forward (attention_np.kernels.sinks)"

    @property
    def weights(self) -> np.ndarray:
        return self.attention.weights[..., :self.S]


def sdpa_sinks_forward(q, k, v, sinks, mask=None, *, bias=None, is_causal: bool = False,
                       scale=None, enable_gqa: bool = False, window=None, softcap=None):
    """Eq. (1) with a learned sink logit per head in the softmax denominator (gpt-oss).

    Parameters
    ----------
    q : (..., h, L, d_k)
    k, v : (..., h | h_kv, S, d_k | d_v)
    sinks : float (h,), one logit per query head
    mask, bias, is_causal, scale, enable_gqa, window : as in :func:`attention_np.sdpa_forward`
    softcap : float, optional
        Caps ``QKᵀ·scale`` as in :func:`attention_np.sdpa_forward`; the sink logit is not capped
        (its key is zero: ``c·tanh(0) = 0``, then its bias column adds ``s_n``).

    Returns
    -------
    out : (..., h, L, d_v)
    cache : SinksCache
    """
    q, k, v, scale = check_qkv(q, k, v, scale)
    sinks = check_sinks(sinks, q)
    L, S = q.shape[-2], k.shape[-2]
    # The real keys' mask (causal, window, mask), then one always-visible sink key appended.
    allowed = np.ones((L, S), bool)
    if is_causal:
        allowed &= causal_mask(L, S)
    local = None if window is None else window_mask(L, S, window)
    if local is not None:
        allowed &= local
    if mask is not None:
        mask = as_bool_mask(mask)
        allowed = np.broadcast_to(allowed, check_broadcasts_to(mask, "mask", (L, S), "scores (..., L, S)"))
        allowed = allowed & mask
    # A query that may attend no real key attends the sink alone (value 0): zero it, so that a NaN
    # or inf there cannot reach the answer through the sink's score 0 * NaN (see drop_masked).
    alive = allowed.any(axis=-1, keepdims=True)                          # (..., L, 1)
    if not alive.all():
        rows = np.broadcast_shapes(alive.shape, q.shape[:-1] + (1,))
        alive = sum_to_shape(np.broadcast_to(alive, rows).astype(np.intp), q.shape[:-1] + (1,)) > 0
        q = np.where(alive, q, q.dtype.type(0))
    ones = np.ones(allowed.shape[:-1] + (1,), bool)
    mask_ext = np.concatenate([allowed, ones], axis=-1)                   # (..., L, S + 1)
    # The bias of the real keys (0 without one), then the sink logit of each head as a column.
    base = np.zeros((L, S), q.dtype) if bias is None else as_bias(bias).astype(q.dtype)
    check_broadcasts_to(base, "bias", (q.shape[-3], L, S), "scores (..., h, L, S)")
    heads = np.broadcast_shapes(base.shape[:-2], (q.shape[-3],))
    sink_col = np.broadcast_to(sinks.astype(q.dtype)[:, None, None], heads + (L, 1))
    bias_ext = np.concatenate([np.broadcast_to(base, heads + (L, S)), sink_col], axis=-1)
    # The sink key: a zero key (its score is its bias, the sink logit) with a zero value.
    k_ext = np.concatenate([k, np.zeros(k.shape[:-2] + (1, k.shape[-1]), k.dtype)], axis=-2)
    v_ext = np.concatenate([v, np.zeros(v.shape[:-2] + (1, v.shape[-1]), v.dtype)], axis=-2)
    out, attention = fused.sdpa_plan(q, k_ext, v_ext, Plan(mask=mask_ext, scale=scale, bias=bias_ext,
                                                          softcap=softcap, enable_gqa=enable_gqa))
    return out, SinksCache(attention, S, sinks.shape, None if bias is None else np.shape(bias))


def check_sinks(sinks, q) -> np.ndarray:
    """``sinks`` as a float array, checked to be ``(h,)`` with ``h = q.shape[-3]``."""
    sinks = as_float_array(sinks, "sinks")
    if q.ndim < 3 or sinks.shape != (q.shape[-3],):
        raise ValueError(f"sinks must be (h,) with h = q.shape[-3], one logit per query head; "
                         f"got sinks {sinks.shape} for q {q.shape}")
    return sinks


def sdpa_sinks_backward(dout, cache: SinksCache, *, return_dbias: bool = False):
    """Backward of :func:`sdpa_sinks_forward`.

    Returns
    -------
    dq, dk, dv : each with the shape of its input
    dsinks : (h,) the gradient w.r.t. the sink logits
    dbias : the shape of ``bias`` (None without one); only with ``return_dbias=True``
    """
    check_cache(cache, SinksCache, SinksCache.made_by)
    S = cache.S
    dq, dk_ext, dv_ext, dbias_ext = fused.sdpa_backward(dout, cache.attention, return_dbias=True)
    # forward: scores[..., S] = sinks (the appended column)  ->  dsinks = its dscores, summed
    dsinks = sum_to_shape(dbias_ext[..., S].sum(axis=-1), cache.sinks_shape)     # (h,)
    grads = dq, dk_ext[..., :S, :], dv_ext[..., :S, :], dsinks
    if not return_dbias:
        return grads
    dbias = None if cache.bias_shape is None else sum_to_shape(dbias_ext[..., :S], cache.bias_shape)
    return (*grads, dbias)
