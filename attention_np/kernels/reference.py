r"""Scaled dot-product attention, Eq. (1) of "Attention Is All You Need" (§3.2.1), as the paper
writes it:

.. math:: \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V

The forward is Figure 2 (left), one line per box: MatMul, Scale, Mask (opt.), SoftMax, MatMul.
The backward walks the same lines in reverse, each step quoting the forward line it undoes.

The file to read next to the paper is :mod:`attention_np.paper.attention` (§3.2 alone); this
one is the same lines with the hooks the variants need (``bias``, ``spec.window``) and with masked keys
kept out of every product (a NaN in a masked key or value never reaches the output).
:mod:`attention_np.kernels.fused` computes the same numbers with fewer passes over the (L, S)
arrays (and adds dropout and grouped-query attention); ``attention_np.sdpa_forward`` and
multi-head attention run that one, and the tests hold the two equal to float64 rounding.

Shapes: ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)`` -> ``out (..., L, d_v)``;
leading batch dims broadcast, and each gradient is summed back to its input's shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    check_bool,
    check_cache,
    check_dout,
    check_instance,
    check_qkv,
    sum_to_shape,
)
from attention_np.kernels.guard import (
    drop_masked,
    mask_and_bias,
    masked_matmul,
    transpose_mask,
    zero_masked,
)
from attention_np.kernels.plan import Plan, kernel_spec
from attention_np.paper.softmax import softmax, softmax_backward
from attention_np.variants.spec import AttentionSpec, refuse_elsewhere


@dataclass(frozen=True)
class AttentionCache:
    """What :func:`sdpa_backward` needs from :func:`sdpa_forward`, and nothing else.

    Attributes
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    weights : (..., L, S) ``softmax(scores)``; 0 at masked keys, all 0 on a fully masked row
    scale : the factor applied to ``QKᵀ``
    bias_shape : the shape of ``bias`` (None without one), for ``return_dbias=True``
    mask : bool, broadcastable to (..., L, S), or None
        The attended pairs (causal ANDed in, a -inf bias removed).
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray
    scale: float
    bias_shape: tuple | None = None
    mask: np.ndarray | None = None

    made_by = "attention_np.kernels.reference.sdpa_forward"


def sdpa_forward(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None,
                 spec=None, **elsewhere):
    r"""Scaled dot-product attention, Eq. (1), forward pass.

    .. math:: \text{scores} = QK^\top \cdot \text{scale} + \text{bias},\quad
              \text{weights} = \mathrm{softmax}(\text{scores}),\quad
              \text{out} = \text{weights}\, V

    Parameters
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    mask : bool, broadcastable to (..., L, S), optional
        True = this query may attend to this key.
    bias : float, broadcastable to (..., L, S), optional
        Added to the scaled scores (ALiBi, relative positions).
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (top-left aligned); ANDed with ``mask``.
    scale : float, optional
        Default ``1 / sqrt(d_k)``; ``scale=1.0`` is unscaled dot-product attention.
    spec : AttentionSpec, optional
        Beyond the paper, this kernel takes ``spec.window`` alone: local attention, query ``i``
        sees keys ``i - left <= j <= i + right``. Soft-capping, dropout and grouped-query
        attention are refused by name (the fused kernel, :func:`attention_np.sdpa_forward`,
        does them).

    Returns
    -------
    out : (..., L, d_v)
    cache : AttentionCache
        ``cache.weights`` is the (..., L, S) weight array. A query row with every key masked
        gets weights 0 and output 0 (never NaN).
    """
    window = _window_of(spec, elsewhere)
    q, k, v, scale = check_qkv(q, k, v, scale)
    mask, bias = mask_and_bias(q, k, v, mask, bias, is_causal=is_causal, window=window)  # ANDed in
    q, k, v = drop_masked(q, k, v, mask)    # masked keys, dead rows -> 0: 0 * NaN would be NaN
    return _eq1(q, k, v, mask, bias, scale)


def sdpa_plan(q, k, v, plan: Plan):
    """:func:`sdpa_forward` for a :class:`~attention_np.kernels.plan.Plan` (the kernel registry's
    entry). A prepared plan's mask is the call's whole mask and its inputs are already dropped
    (multi-head attention built both once): they are taken as they are.

    Parameters
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    plan : Plan
        The call's options; this kernel does ``bias`` and ``window`` (the registry refuses the
        rest by name before a call).

    Returns
    -------
    out : (..., L, d_v)
    cache : AttentionCache
    """
    plan = check_instance(plan, Plan, "plan")
    if not plan.prepared:
        return sdpa_forward(q, k, v, plan.mask, bias=plan.bias, is_causal=plan.is_causal,
                            scale=plan.scale, spec=AttentionSpec(window=plan.window))
    q, k, v, scale = check_qkv(q, k, v, plan.scale)
    return _eq1(q, k, v, plan.mask, plan.bias, scale)


def _eq1(q, k, v, mask, bias, scale):
    """Figure 2 (left) on checked inputs: ``mask`` the call's whole mask (None: every pair),
    ``bias`` in the inputs' dtype, the inputs no pair attends already 0."""
    scores = q @ np.swapaxes(k, -1, -2)                     # MatMul     (..., L, S)
    scores = scores * scores.dtype.type(scale)             # Scale      (..., L, S)
    if bias is not None:
        scores = scores + bias                              # (opt.) bias, e.g. ALiBi
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)            # Mask: -inf gets weight exactly 0
    weights = softmax(scores)                               # SoftMax    (..., L, S)
    out = masked_matmul(weights, v, mask)                   # MatMul: weights @ v, a masked pair adds 0
    return out, AttentionCache(q, k, v, weights, scale,
                               bias_shape=None if bias is None else bias.shape, mask=mask)


def sdpa_backward(dout, cache: AttentionCache, *, return_dbias: bool = False):
    """Backward of :func:`sdpa_forward`: gradients of the loss w.r.t. ``q``, ``k`` and ``v``.

    Parameters
    ----------
    dout : (..., L, d_v) gradient w.r.t. ``out``, the output's dtype
    cache : AttentionCache from :func:`sdpa_forward`
    return_dbias : bool
        Also return ``dbias``, the gradient w.r.t. the forward's ``bias``.

    Returns
    -------
    dq, dk, dv : each with the shape of its input (broadcast batch dims summed back)
    dbias : the shape of ``bias`` (None without one); only with ``return_dbias=True``
    """
    check_cache(cache, AttentionCache, AttentionCache.made_by)
    return_dbias = check_bool(return_dbias, "return_dbias")
    q, k, v, weights, scale, mask = (cache.q, cache.k, cache.v, cache.weights, cache.scale,
                                     cache.mask)
    out_shape = np.broadcast_shapes(weights.shape[:-2], v.shape[:-2]) + (weights.shape[-2], v.shape[-1])
    dout = check_dout(dout, out_shape, v.dtype)                       # the shape of weights @ v
    scale = q.dtype.type(scale)
    # Every product below sums over the attended pairs only (masked_matmul, zero_masked): a
    # masked pair's weight is 0, but 0 * NaN = NaN would let a NaN in k or v reach its row.
    mask_T = transpose_mask(mask)                                     # (..., S, L)

    # forward: out = weights @ v      ->  dweights = dout @ v.T,  dv = weights.T @ dout
    dweights = zero_masked(dout @ np.swapaxes(v, -1, -2), mask)       # (..., L, S)
    dv = masked_matmul(np.swapaxes(weights, -1, -2), dout, mask_T)    # (..., S, d_v)
    # forward: weights = softmax(scores)  ->  dscores = weights * (dweights - rowsum(dweights * weights))
    # Masked keys have weight 0, so their dscores are 0: the mask needs no backward of its own.
    # (v may have batch dims that the weights lack: dweights has them too.)
    dscores = softmax_backward(dweights, np.broadcast_to(weights, dweights.shape))   # (..., L, S)
    # forward: scores = (q @ k.T) * scale  ->  dq = dscores @ k * scale,  dk = dscores.T @ q * scale
    dq = masked_matmul(dscores, k, mask) * scale                      # (..., L, d_k)
    dk = masked_matmul(np.swapaxes(dscores, -1, -2), q, mask_T) * scale  # (..., S, d_k)

    # Broadcast batch dims are summed back to each input's shape.
    grads = sum_to_shape(dq, q.shape), sum_to_shape(dk, k.shape), sum_to_shape(dv, v.shape)
    if not return_dbias:
        return grads
    # forward: scores = scores + bias  ->  dbias = dscores (summed to the bias's shape)
    dbias = None if cache.bias_shape is None else sum_to_shape(dscores, cache.bias_shape)
    return (*grads, dbias)


def _window_of(spec, elsewhere: dict):
    """``spec.window``, the one option beyond the paper this kernel has a hook for; any other
    option of the spec is refused by name, and a misplaced keyword names its home."""
    caller = "attention_np.kernels.reference.sdpa_forward"
    refuse_elsewhere(caller, elsewhere)
    spec = kernel_spec(caller, spec)
    for name, used in (("softcap", spec.softcap is not None), ("dropout_p", spec.dropout_p > 0),
                       ("enable_gqa", spec.enable_gqa)):
        if used:
            raise ValueError(f"{caller} cannot do spec.{name}: the fused kernel "
                             f"(attention_np.sdpa_forward) does")
    return spec.window


def scaled_dot_product_attention(q, k, v, mask=None, *, bias=None, is_causal: bool = False,
                                 scale=None):
    """Eq. (1), returning the weights instead of the backward's cache: ``(out, weights)``.

    Same arguments and conventions as :func:`sdpa_forward`; ``weights`` is (..., L, S).
    """
    out, cache = sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)
    return out, cache.weights
