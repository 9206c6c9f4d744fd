"""The spec of one multi-head call: the :class:`~attention_np.AttentionSpec`, the paper's keywords
and the 0.1 keywords merged and checked once, before any work, with what ``params`` says.

What ``params`` holds decides grouped-query attention (the width of ``W_k``), QK-norm (the weights
``q_norm``/``k_norm``) and sinks (``sinks``); it is not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import as_bias, as_bool_mask, check_broadcasts_to, warn_deprecated
from attention_np.compose.mha_params import check_mha_inputs
from attention_np.kernels.plan import Plan, merged
from attention_np.kernels.registry import check_supports, get_kernel
from attention_np.variants.qk_norm import NORMS
from attention_np.variants.spec import AttentionSpec

# 0.1 keywords of mha_forward / mha_decode_step -> the AttentionSpec field they became
MOVED_TO_SPEC = {"window": "window", "rope": "rope", "softcap": "softcap", "dropout_p": "dropout_p",
                 "qk_norm_eps": "qk_norm_eps", "path": "kernel"}
# 0.1 keywords that params now answers
ANSWERED_BY_PARAMS = {"num_kv_heads": "the width of params['W_k']",
                      "qk_norm": "params['q_norm'] and params['k_norm'] being there",
                      "sinks": "params['sinks'] being there"}


@dataclass(frozen=True)
class Layer:
    """One multi-head call, checked: the spec, the heads, and what ``params`` switches on."""

    spec: AttentionSpec
    num_heads: int
    num_kv_heads: int
    qk_norm: bool
    sinks: bool


def layer_spec(caller: str, spec, deprecated: dict, *, num_heads=None, is_causal=None,
               scale=None, also: tuple = ()) -> AttentionSpec:
    """``spec`` with the paper's keywords and the 0.1 keywords ``deprecated`` merged in;
    ``also`` names the caller's own 0.1 keywords that it maps itself (any other is a TypeError)."""
    spec = AttentionSpec() if spec is None else spec
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"{caller}: spec must be an attention_np.AttentionSpec, got {type(spec).__name__}")
    known = set(MOVED_TO_SPEC) | set(ANSWERED_BY_PARAMS) | set(also)
    unknown = sorted(set(deprecated) - known)
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {unknown}")
    # the paper's options as keywords or in the spec (one of them, or the same value twice);
    # dropout_p has no keyword here: the spec's, or 0
    changes = {name: merged(caller, spec, name, value)
               for name, value in (("num_heads", num_heads), ("is_causal", is_causal),
                                   ("scale", scale), ("dropout_p", None))}
    for old, new in MOVED_TO_SPEC.items():
        if old in deprecated:
            value = deprecated[old]
            if old == "path":
                if not isinstance(value, str) or value not in ("fused", "textbook"):
                    raise ValueError(f"path must be one of ['fused', 'textbook'] (deprecated: "
                                     f"spec.kernel), got {value!r}")
                value = {"textbook": "reference"}.get(value, value)
            warn_deprecated(f"{caller}({old}=...) is deprecated since 0.2.0: pass "
                            f"spec=AttentionSpec({new}=...)")
            changes[new] = value
    spec = spec.replace(**changes) if changes else spec
    if spec.num_heads is None:
        raise TypeError(f"{caller} needs num_heads (or spec.num_heads)")
    return spec


def check_layer(caller: str, query, key, value, params, spec: AttentionSpec, deprecated: dict):
    """Check a multi-head call's inputs; returns ``query, key, value`` as arrays and the
    :class:`Layer`. Every check runs before any work (and before a KV cache changes)."""
    h = spec.num_heads
    h_kv = _kv_heads(caller, params, h, deprecated)
    query, key, value, h_kv = check_mha_inputs(query, key, value, params, h,
                                               None if h_kv == h else h_kv)
    qk_norm = _switched_on(caller, "qk_norm", all(n in params for n in NORMS), deprecated)
    _check_qk_norm(params, spec, qk_norm, h, h_kv)
    sinks = _switched_on(caller, "sinks", "sinks" in params, deprecated)
    if sinks and np.shape(params["sinks"]) != (h,):
        raise ValueError(f"params['sinks'] has shape {np.shape(params['sinks'])}, expected "
                         f"(num_heads,) = ({h},)")
    layer = Layer(spec, h, h_kv, qk_norm, sinks)
    # the kernel can do what the spec and params ask, checked now (before a KV cache changes);
    # the decode step applies the window as a mask, which every kernel takes
    check_supports(get_kernel(spec.kernel), Plan(
        window=spec.window, softcap=spec.softcap, enable_gqa=h_kv != h, dropout_p=spec.dropout_p,
        sinks=params["sinks"] if sinks else None))
    return query, key, value, layer


def _kv_heads(caller: str, params, h: int, deprecated: dict):
    """The key/value heads ``params['W_k']``'s width says (grouped-query attention), checked
    against a 0.1 ``num_kv_heads``; that claim when the width says nothing clear; else None."""
    W_q, W_k = (params.get(w) if isinstance(params, dict) else None for w in ("W_q", "W_k"))
    h_kv = _kv_heads_of(W_q, W_k, h)
    if "num_kv_heads" in deprecated:
        _answered(caller, "num_kv_heads")
        given = deprecated["num_kv_heads"]
        if given is not None and h_kv is not None and given != h_kv:
            raise ValueError(f"{caller} got num_kv_heads={given} but params['W_k'] has "
                             f"{np.shape(W_k)[1]} columns: {h_kv} key heads of d_k={np.shape(W_q)[1] // h}")
    if h_kv is None and deprecated.get("num_kv_heads") is not None:
        h_kv = deprecated["num_kv_heads"]       # W_k's width says nothing clear: check the claim
    return h_kv


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
            if entry not in params:
                continue
            shape = np.shape(params[entry])
            if spec.qk_norm_scope == "all":          # one norm over the heads' h*d_k features
                if shape != (heads * d_k,):
                    raise ValueError(f"params[{entry!r}] has shape {shape}, expected "
                                     f"({heads * d_k},) = {heads} heads x d_k={d_k}: "
                                     f"spec.qk_norm_scope='all' normalises all heads at once")
            elif shape not in ((d_k,), (heads, d_k)):
                more = (" (all heads' features: pass spec=AttentionSpec(..., "
                        "qk_norm_scope='all'))" if shape == (heads * d_k,) else "")
                raise ValueError(f"params[{entry!r}] has shape {shape}, "
                                 f"expected ({d_k},) or ({heads}, {d_k}){more}")
    if spec.qk_norm == "rms" and any(f"{n}_bias" in params for n in NORMS):
        raise ValueError("params has a QK-norm bias (q_norm_bias/k_norm_bias), which only "
                         "a LayerNorm has: pass spec=AttentionSpec(..., qk_norm='layer')")


def _answered(caller: str, name: str) -> None:
    warn_deprecated(f"{caller}({name}=...) is deprecated since 0.2.0: {ANSWERED_BY_PARAMS[name]} "
                    f"decides it")


def _switched_on(caller: str, name: str, in_params: bool, deprecated: dict) -> bool:
    """QK-norm or sinks: on when ``params`` has the weights; a 0.1 flag must agree with that."""
    if name not in deprecated:
        return in_params
    _answered(caller, name)
    flag = deprecated[name]
    if not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {flag!r}")
    if flag and not in_params:
        what = "params['sinks'], the (num_heads,) sink logits" if name == "sinks" else \
            "params['q_norm'] and params['k_norm'], the (d_k,) norm weights"
        raise ValueError(f"{name}=True needs {what} (init_mha_params(..., {name}=True) makes them)")
    if not flag and in_params:
        raise ValueError(f"{name}=False but params holds its weights, which 0.2 applies whenever they "
                         f"are there: leave them out of params to run without {name}")
    return in_params


def check_heads_mask(mask, name: str, batch: tuple, scores: tuple, layout: str, *,
                     stretch_batch: bool = False):
    """A mask or bias for the heads' scores ``(*batch, h, L, S)``, checked to broadcast without
    lining a batch axis up with the heads, nor changing ``h``, ``L`` or ``S``. It may add batch
    dims; with ``stretch_batch`` (a full forward, not a decode step with its cache) it may also
    stretch an inputs' batch dim of 1, as NumPy broadcasts.

    A 3-D ``(n, L', S')`` array with batched queries lines ``n`` up with the heads. That is
    right for a per-head array (ALiBi's or T5's ``(h, L, S)`` bias) when ``n == h``, and
    refused, with the fix named, when ``n`` could be the batch instead (``n != h``, or
    ``n == h == B``): e.g. ``padding_mask``'s ``(B, 1, S)``, which NumPy would broadcast onto the
    heads without an error.
    """
    if mask is None:
        return None
    m = as_bool_mask(mask, name) if name == "mask" else as_bias(mask, name)
    h = scores[-3]
    # a per-head bias (h, L, S) is ALiBi's and T5's convention: only a mask is ambiguous at B == h
    lead = m.shape[0] if m.ndim == 3 and len(batch) >= 1 else 1
    ambiguous = lead > 1 and (lead != h or (name == "mask" and batch[0] == h))
    if ambiguous:
        raise ValueError(_ambiguous(m, name, batch, scores, layout))
    if stretch_batch and m.ndim > 3:
        try:
            scores = np.broadcast_shapes(batch, m.shape[:-3]) + scores[-3:]
        except ValueError:
            pass                                       # named against the inputs' scores below
    check_broadcasts_to(m, name, scores, layout)
    return m


def _ambiguous(m, name: str, batch: tuple, scores: tuple, layout: str) -> str:
    """The message for a 3-D mask or bias whose first axis could be the batch or the heads."""
    h = scores[-3]
    why = (f"it could mean one per sequence (batch {batch[0]}) or one per head ({h} heads)"
           if m.shape[0] == h else f"its first axis would line up with the {h} heads")
    return (f"{name} of shape {m.shape} is ambiguous for the multi-head scores {layout} = {scores}: "
            f"{why}. For one {name} per sequence (e.g. padding_mask's (B, 1, S)) pass "
            f"{name}[:, None], shape (B, 1, L|1, S); for one per head pass {name}[None], shape "
            f"(1, h, L, S)" + ("; or build it from lengths: attention_np.lengths_mask(...)[:, None]"
                                if name == "mask" else ""))


def positions_without_rope(caller: str) -> str:
    """The message for ``positions=`` given to a layer that has no RoPE to rotate by them."""
    return (f"{caller} got positions= but spec.rope is None: positions only rotate q and k (RoPE); "
            f"pass spec=AttentionSpec(..., rope=RoPE(...)) or leave positions out")
