r"""Attention sinks (beyond the paper): a learned logit per head in every softmax denominator.

gpt-oss (and StreamingLLM's "sink" idea) lets a head attend to *nothing*: each head ``n`` has a
learned logit ``s_n`` that joins every row of scores in the softmax and is then dropped,

.. math:: \text{weights}_{ij} = \frac{e^{\text{scores}_{ij}}}{e^{s_n} + \sum_{j'} e^{\text{scores}_{ij'}}},

so a row's weights sum to less than 1. That is exactly Eq. (1) with one extra key whose score is
``s_n`` and whose value is 0; the code never builds that key. The fused kernel
(:func:`attention_np.kernels.fused.sdpa_plan`) adds ``s_n`` as one more term in each row's max
and softmax denominator, and the gradient of the sink logit is that key's score gradient,
``dsinks_n = -sum_i p_i D_i`` (``p_i`` the sink's weight in row ``i``, ``D_i = rowsum(dout_i *
out_i)``; :mod:`attention_np.variants.sinks`), summed over batch and rows.

A row whose every real key is masked puts all its weight on the sink: output 0, as the project's
convention for a fully masked row (and as gpt-oss).

In :func:`attention_np.mha_forward` (when ``params`` holds them) the logits are
``params["sinks"]``, ``(h,)``, as gpt-oss keeps ``self.sinks`` in its attention module;
``mha_backward`` returns their gradient in ``grads["sinks"]``. The tiled path
(:mod:`attention_np.kernels.tiled`) starts its online softmax from the sink.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_np._checks import as_bias, check_bool, check_broadcasts_to, check_cache, check_qkv
from attention_np.kernels import fused
from attention_np.kernels.grads import Grads
from attention_np.kernels.plan import Plan, plan_from
from attention_np.variants.sinks import check_sinks, sinks_backward
from attention_np.variants.spec import refuse_elsewhere

__all__ = ["SinksCache", "check_sinks", "sdpa_sinks_backward", "sdpa_sinks_forward"]


@dataclass(frozen=True, kw_only=True)
class SinksCache:
    """What :func:`sdpa_sinks_backward` needs: the fused kernel's cache and the sinks' shape.

    ``attention`` is the :class:`~attention_np.kernels.fused.SDPACache` of the ``S`` real keys,
    its ``rowsum`` including the sink's term and ``sink_weight`` (..., L, 1) the sink's weight
    in each row; ``weights`` are the ``(..., L, S)`` weights of the real keys (each row sums to
    < 1).
    """

    attention: fused.SDPACache
    sinks_shape: tuple

    made_by = "attention_np.sdpa_sinks_forward (attention_np.kernels.sink_logits)"

    @property
    def weights(self) -> np.ndarray:
        return self.attention.weights


def sdpa_sinks_forward(q, k, v, sinks, mask=None, *, bias=None, is_causal: bool = False,
                       scale=None, spec=None, **elsewhere):
    """Eq. (1) with a learned sink logit per head in the softmax denominator (gpt-oss).

    Parameters
    ----------
    q : (..., h, L, d_k)
    k, v : (..., h | h_kv, S, d_k | d_v)
    sinks : float (h,), one logit per query head
    mask, bias, is_causal, scale : as in :func:`attention_np.sdpa_forward`
    spec : AttentionSpec, optional
        ``spec.window``, ``spec.enable_gqa`` as in :func:`attention_np.sdpa_forward`;
        ``spec.softcap`` caps ``QKᵀ·scale`` as there, the sink logit is not capped. Not with
        ``spec.dropout_p``.

    Returns
    -------
    out : (..., h, L, d_v)
    cache : SinksCache
    """
    refuse_elsewhere("sdpa_sinks_forward", elsewhere)
    if spec is not None and getattr(spec, "kernel", "fused") != "fused":
        raise ValueError(f"sdpa_sinks_forward is the fused kernel: spec.kernel={spec.kernel!r} runs "
                         f"through attention_np.mha_forward")
    plan = plan_from("sdpa_sinks_forward", spec, q, k, mask, bias=bias, is_causal=is_causal,
                     scale=scale, sinks=sinks)
    return sinks_plan(q, k, v, plan)


def sinks_plan(q, k, v, plan: Plan):
    """:func:`sdpa_sinks_forward` for a :class:`~attention_np.kernels.plan.Plan` whose ``sinks``
    are set (the kernel registry's entry)."""
    q, k, v, scale = check_qkv(q, k, v, plan.scale)
    sinks = check_sinks(plan.sinks, q)
    if plan.bias is not None:  # a logit per head: the bias's head axis (if any) must be h's
        check_broadcasts_to(as_bias(plan.bias), "bias", (q.shape[-3], q.shape[-2], k.shape[-2]),
                            "scores (..., h, L, S)")
    out, attention = fused.sdpa_plan(q, k, v, replace(plan, scale=scale, sinks=sinks))
    return out, SinksCache(attention=attention, sinks_shape=sinks.shape)


def sdpa_sinks_backward(dout, cache: SinksCache, *, return_dbias: bool = False):
    """Backward of :func:`sdpa_sinks_forward`.

    Parameters
    ----------
    dout : (..., h, L, d_v) gradient w.r.t. ``out``
    cache : SinksCache from :func:`sdpa_sinks_forward`
    return_dbias : bool
        Also return ``dbias``, the gradient w.r.t. the forward's ``bias``.

    Returns
    -------
    dq, dk, dv : each with the shape of its input
    dsinks : (h,) the gradient w.r.t. the sink logits
    dbias : the shape of ``bias`` (None without one); only with ``return_dbias=True``
    """
    return_dbias = check_bool(return_dbias, "return_dbias")
    grads = backward(dout, cache, dbias=return_dbias)
    return (*grads.qkv, grads.dsinks) + ((grads.dbias,) if return_dbias else ())


def backward(dout, cache: SinksCache, *, dbias: bool = False) -> Grads:
    """:func:`sdpa_sinks_backward` as one :class:`~attention_np.kernels.grads.Grads`, ``dsinks``
    set (``dbias`` only when asked for)."""
    check_cache(cache, SinksCache, SinksCache.made_by)
    c = cache.attention
    # The fused backward holds: the weights e / l (l with the sink's term) are the real keys'.
    grads = fused.backward(dout, c, dbias=dbias)
    # forward: the sink's weight p, its value 0  ->  dsinks = -sum_i p_i rowsum(dout_i * out_i)
    dsinks = sinks_backward(np.asarray(dout), c.out, c.sink_weight, cache.sinks_shape)   # (h,)
    return replace(grads, dsinks=dsinks)
