"""The spec of one multi-head call: the :class:`~attention_np.AttentionSpec` and the paper's keywords
(``num_heads``, ``scale``) checked once, before any work, with what ``params`` says.

What ``params`` holds decides grouped-query attention (the width of ``W_k``), QK-norm (the weights
``q_norm``/``k_norm``) and sinks (``sinks``); it is not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import as_bias, check_broadcasts_to, check_int, check_scale
from attention_np.compose.mha_params import check_mha_inputs
from attention_np.kernels.guard import whole_mask
from attention_np.kernels.plan import Plan, plan_from
from attention_np.kernels.registry import check_supports, get_kernel
from attention_np.paper._validate import check_heads_mask as check_mask_of_heads
from attention_np.variants.qk_norm import NORMS
from attention_np.variants.spec import AttentionSpec, where_it_lives


@dataclass(frozen=True)
class Layer:
    """One multi-head call, checked: the spec, the paper's options of the call (``h`` and the
    scale), and what ``params`` switches on."""

    spec: AttentionSpec
    num_heads: int
    num_kv_heads: int
    qk_norm: bool
    sinks: bool
    scale: float | None = None


def layer_spec(caller: str, spec, num_heads) -> AttentionSpec:
    """``spec`` (or the default) checked for multi-head attention, with ``num_heads`` given:
    ``h`` is the paper's, a keyword of the call; grouped-query attention is what
    ``params['W_k']``'s width says, so ``spec.enable_gqa`` is refused here."""
    spec = AttentionSpec() if spec is None else spec
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"{caller}: spec must be an attention_np.AttentionSpec, got {type(spec).__name__}")
    if num_heads is None:
        raise TypeError(f"{caller} needs num_heads=, the number of heads h of §3.2.2 (a keyword of "
                        f"the call)")
    if spec.enable_gqa:
        raise TypeError(f"{caller} got spec.enable_gqa=True: {where_it_lives('num_kv_heads')}; "
                        f"spec.enable_gqa is for the kernel functions (sdpa_forward, ...) on heads "
                        f"already split")
    return spec


def check_layer(caller: str, query, key, value, params, spec: AttentionSpec, num_heads, scale=None):
    """:func:`layer_of`, and the spec's kernel checked to do what the spec and ``params`` ask
    (:func:`layer_plan`), for a caller that attends through
    :func:`~attention_np.compose.pipeline.attend_heads` without a plan of its own."""
    query, key, value, layer = layer_of(caller, query, key, value, params, spec=spec,
                                        num_heads=num_heads, scale=scale)
    layer_plan(layer, params)
    return query, key, value, layer


def layer_of(caller: str, query, key, value, params, *, spec: AttentionSpec, num_heads, scale=None):
    """Check a multi-head call's inputs; returns ``query, key, value`` as arrays and the
    :class:`Layer`. Every check runs before any work (and before a KV cache changes); the
    kernel's, which needs the call's arrays too, is :func:`layer_plan`'s."""
    h = check_int(num_heads, "num_heads")
    W_q, W_k = (params.get(w) if isinstance(params, dict) else None for w in ("W_q", "W_k"))
    h_kv = _kv_heads_of(W_q, W_k, h)
    query, key, value, h_kv = check_mha_inputs(query, key, value, params, h,
                                               None if h_kv == h else h_kv)
    scale = None if scale is None else check_scale(scale, 1)
    qk_norm = all(n in params for n in NORMS)
    _check_qk_norm(params, spec, qk_norm, h, h_kv)
    sinks = "sinks" in params
    if sinks and np.shape(params["sinks"]) != (h,):
        raise ValueError(f"params['sinks'] has shape {np.shape(params['sinks'])}, expected "
                         f"(num_heads,) = ({h},)")
    return query, key, value, Layer(spec, h, h_kv, qk_norm, sinks, scale)


def layer_plan(layer: Layer, params: dict, *, mask=None, bias=None, is_causal: bool = False,
               window=None, rng=None, scores: tuple | None = None, dtype=None) -> Plan:
    """The one :class:`~attention_np.kernels.plan.Plan` of a multi-head call, built once from the
    checked layer and the call's checked arrays, with the kernel's support checked once, before
    any work (and before a KV cache changes).

    With ``scores = (L, S)`` the plan is prepared: its mask is the call's whole mask, built here
    (:func:`~attention_np.kernels.guard.whole_mask`: ``mask``, a -inf ``bias``, ``is_causal``,
    ``window``), its bias in ``dtype``, and the kernel takes both as they are; the caller drops
    the inputs no pair attends once (:func:`~attention_np.compose.pipeline.drop_unattended`: the
    full forward before its projections, a decode step on the heads, after appending). A decode
    step passes its bottom-right causal mask and window ANDed into ``mask``. Without ``scores``
    (a plan to check a kernel's support, or a caller attending raw heads) the kernel builds and
    drops itself.
    """
    prepared = scores is not None
    if prepared:
        mask = whole_mask(mask, bias, *scores, is_causal=is_causal, window=window)
        bias = None if bias is None else bias.astype(dtype, copy=False)
    plan = plan_from("", layer.spec, mask=mask, is_causal=is_causal, layer=True, scale=layer.scale,
                     bias=bias, window=window, enable_gqa=layer.num_kv_heads != layer.num_heads,
                     rng=rng, sinks=params["sinks"] if layer.sinks else None, prepared=prepared)
    check_supports(get_kernel(layer.spec.kernel), plan)
    return plan


def _kv_heads_of(W_q, W_k, h: int):
    """The key/value heads of ``W_k``'s width in heads of ``W_q``'s ``d_k``, or None when the
    widths say nothing clear (checked later, by :func:`check_mha_inputs`)."""
    if W_q is None or W_k is None or np.ndim(W_q) != 2 or np.ndim(W_k) != 2:
        return None
    d_k = np.shape(W_q)[1] // h if np.shape(W_q)[1] % h == 0 else 0
    if d_k and np.shape(W_k)[1] % d_k == 0 and np.shape(W_k)[1] // d_k:
        return np.shape(W_k)[1] // d_k           # grouped-query attention: what W_k's width says
    return None


def _check_qk_norm(params: dict, spec: AttentionSpec, qk_norm: bool, h: int, h_kv: int) -> None:
    """QK-norm's weights (and biases): both or neither, each ``(d_k,)`` shared or one per head,
    ``(h, d_k)`` for q and ``(h_kv, d_k)`` for k, or with ``spec.qk_norm_scope="all"``
    ``(h*d_k,)`` and ``(h_kv*d_k,)``; a bias only with a LayerNorm."""
    if not qk_norm:
        if any(n in params for n in NORMS):
            raise ValueError(f"params has {[n for n in NORMS if n in params]} but not both of "
                             f"{NORMS}: QK-norm needs both")
        return
    d_k = params["W_q"].shape[1] // h
    for name, heads in (("q_norm", h), ("k_norm", h_kv)):
        for entry in (name, f"{name}_bias"):
            if entry in params:
                _check_norm_shape(entry, np.shape(params[entry]), spec.qk_norm_scope, heads, d_k)
    if spec.qk_norm == "rms" and any(f"{n}_bias" in params for n in NORMS):
        raise ValueError("params has a QK-norm bias (q_norm_bias/k_norm_bias), which only "
                         "a LayerNorm has: pass spec=AttentionSpec(..., qk_norm='layer')")


def _check_norm_shape(entry: str, shape: tuple, scope: str, heads: int, d_k: int) -> None:
    """``params[entry]``, a QK-norm weight or bias, has a shape of ``scope``: ``(d_k,)`` or
    ``(heads, d_k)`` per head, ``(heads * d_k,)`` over all heads."""
    if scope == "all":                           # one norm over the heads' h*d_k features
        if shape != (heads * d_k,):
            raise ValueError(f"params[{entry!r}] has shape {shape}, expected "
                             f"({heads * d_k},) = {heads} heads x d_k={d_k}: "
                             f"spec.qk_norm_scope='all' normalises all heads at once")
    elif shape not in ((d_k,), (heads, d_k)):
        more = (" (all heads' features: pass spec=AttentionSpec(..., "
                "qk_norm_scope='all'))" if shape == (heads * d_k,) else "")
        raise ValueError(f"params[{entry!r}] has shape {shape}, "
                         f"expected ({d_k},) or ({heads}, {d_k}){more}")


def check_heads_mask(mask, name: str, batch: tuple, scores: tuple, layout: str, *,
                     stretch_batch: bool = False):
    """A mask or bias for the heads' scores ``(*batch, h, L, S)``, checked to broadcast without
    lining a batch axis up with the heads, nor changing ``h``, ``L`` or ``S``.

    A mask follows the paper's one rule (:func:`attention_np.paper._validate.check_heads_mask`):
    it adds or stretches no batch dim, and with batched inputs a 3-D ``(n, L, S)`` mask is one
    per head when ``n == h != B``, refused naming the fix when ``n`` could be the batch
    (``n == h == B``) or cannot be the heads (``padding_mask``'s ``(B, 1, S)``).

    A bias may add batch dims, and with ``stretch_batch`` (a full forward, not
    a decode step with its cache) stretch an inputs' batch dim of 1, as NumPy broadcasts; its 3-D
    ``(n, L, S)`` form lines ``n`` up with the heads, ALiBi's and T5's per-head ``(h, L, S)``,
    and is refused when ``n != h``.
    """
    if mask is None:
        return None
    if name == "mask":
        return check_mask_of_heads(mask, batch, scores[-3:], layout)
    m = as_bias(mask, name)
    h = scores[-3]
    if m.ndim == 3 and len(batch) >= 1 and m.shape[0] not in (1, h):
        raise ValueError(_ambiguous(m, name, batch, scores, layout))
    if stretch_batch and m.ndim > 3:
        try:
            scores = np.broadcast_shapes(batch, m.shape[:-3]) + scores[-3:]
        except ValueError:
            pass                                       # named against the inputs' scores below
    check_broadcasts_to(m, name, scores, layout)
    return m


def _ambiguous(m, name: str, batch: tuple, scores: tuple, layout: str) -> str:
    """The message for a 3-D bias whose first axis is not the heads: it could be the batch."""
    h = scores[-3]
    return (f"{name} of shape {m.shape} is ambiguous for the multi-head scores {layout} = {scores}: "
            f"its first axis would line up with the {h} heads. For one {name} per sequence pass "
            f"{name}[:, None], shape (B, 1, L|1, S); for one per head pass {name}[None], shape "
            f"(1, h, L, S)")


def positions_without_rope(caller: str) -> str:
    """The message for ``positions=`` given to a layer that has no RoPE to rotate by them."""
    return (f"{caller} got positions= but spec.rope is None: positions only rotate q and k (RoPE); "
            f"pass spec=AttentionSpec(..., rope=RoPE(...)) or leave positions out")
