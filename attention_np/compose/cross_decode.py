"""Cross-attention decoding (§3.2.3), beyond the paper: the encoder's keys and values projected once.

In an encoder-decoder, the decoder's cross-attention takes its keys and values from the encoder
output ``memory``, projected by ``W_k`` and ``W_v``. Unlike self-attention's (see
:mod:`attention_np.compose.decode`), they do not grow while decoding: they are the same at every
step. Project them once into a full cache (:func:`cross_kv_cache`); every step projects only its
new queries, attends them to all of the cached keys (no causal mask) and appends nothing
(:func:`mha_cross_decode_step`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attention_np.compose.decode import KVCache, check_inputs_of, check_new_positions
from attention_np.compose.layer_spec import check_heads_mask, layer_of, layer_plan, layer_spec
from attention_np.compose.pipeline import attend_heads, drop_unattended, output, project_heads, transform_qk
from attention_np.variants.qk_layernorm import qk_norm_forward
from attention_np.variants.spec import refuse_elsewhere


def cross_kv_cache(memory, params: dict, *, num_heads: int | None = None, spec=None,
                   **elsewhere) -> KVCache:
    """Cross-attention's keys and values, projected from the encoder output once.

    Parameters
    ----------
    memory : (..., S, d_model)
        The encoder output the decoder attends to (as wide as the decoder's ``x``).
    params : dict from :func:`init_mha_params`
        The cross-attention's weights (only ``W_k``, ``b_k``, ``W_v``, ``b_v`` and, with QK-norm,
        ``k_norm`` are used here).
    num_heads, spec : as in :func:`mha_forward`
        RoPE is refused: cross-attention has no relative position between a query and the
        encoder's keys. QK-norm (``params["k_norm"]``) normalises the cached keys.
    **elsewhere
        Nothing: an option whose home is elsewhere is a ``TypeError`` naming it.

    Returns
    -------
    KVCache
        ``max_len = length = S``: full, so that appending to it raises. ``.k (..., H_kv, S, d_k)``,
        ``.v (..., H_kv, S, d_v)``; pass it to :func:`mha_cross_decode_step` at every step.
    """
    memory = check_inputs_of(memory, "memory", "(..., S, d_model)", params, "W_k",
                             "the encoder output's d_model")
    if memory.shape[-2] < 1:
        raise ValueError(f"memory must hold at least one position (S >= 1) for the decoder to "
                         f"attend to, got shape {memory.shape}")
    refuse_elsewhere("cross_kv_cache", elsewhere)
    layer, memory = _cross_layer("cross_kv_cache", memory, params, num_heads, spec)
    layer_plan(layer, params)                  # the kernel a step will run can do what is asked
    # 1) project the keys and values once, 2) split into heads
    k = project_heads(memory, params, "k", layer.num_kv_heads)       # (..., h_kv, S, d_k)
    v = project_heads(memory, params, "v", layer.num_kv_heads)       # (..., h_kv, S, d_v)
    # 2') (beyond the paper) QK-norm of the keys, once
    if layer.qk_norm:
        k = qk_norm_forward(layer.spec.qk_norm, k, params, "k_norm", layer.spec.qk_norm_eps,
                            layer.spec.qk_norm_scope)[0]
    kv_cache = KVCache(memory.shape[-2], key_norm=_key_norm(params, layer) if layer.qk_norm else None)
    kv_cache.append(k, v)
    return kv_cache


def mha_cross_decode_step(x, params: dict, kv_cache: KVCache, *, num_heads: int | None = None,
                          scale=None, spec=None, mask=None, bias=None, **elsewhere):
    """Multi-head cross-attention (§3.2.3) of ``T`` new decoder positions to a fixed memory.

    The keys and values come from ``kv_cache`` (:func:`cross_kv_cache`, projected once); nothing
    is appended, and there is no causal mask: every new query sees every source position. Called
    on consecutive chunks of the decoder's input, the outputs are those of
    ``mha_forward(y, memory, memory, params, mask, ...)`` on the whole target sequence ``y``,
    through the same steps (:mod:`attention_np.compose.pipeline`).

    Parameters
    ----------
    x : (..., T, d_model)
        The decoder's new positions (the queries).
    params : dict from :func:`init_mha_params`
        The cross-attention's weights (``W_q``, ``b_q``, ``W_o``, ``b_o`` and, with QK-norm,
        ``q_norm`` are used here).
    kv_cache : KVCache
        From :func:`cross_kv_cache` with the same params and spec; left unchanged.
    num_heads, scale, spec : as in :func:`mha_forward` (no RoPE, no window, no causal mask)
    mask : bool, broadcastable to (..., h, T, S), optional
        E.g. the source padding mask ``(B, 1, 1, S)``.
    bias : float, broadcastable to (..., h, T, S), optional
        Added to the scores.
    **elsewhere
        Nothing: an option whose home is elsewhere is a ``TypeError`` naming it (``is_causal=``:
        cross-attention has no causal mask).

    Returns
    -------
    out : (..., T, d_model)
    """
    if not isinstance(kv_cache, KVCache):
        raise TypeError(f"kv_cache must be a KVCache (from cross_kv_cache), got "
                        f"{type(kv_cache).__name__}")
    caller = "mha_cross_decode_step"
    if "is_causal" in elsewhere:
        raise TypeError(f"{caller}() got is_causal=: cross-attention has no causal mask (every new "
                        f"query sees every source position)")
    refuse_elsewhere(caller, elsewhere)
    x = check_new_positions(x, params)
    layer, x = _cross_layer(caller, x, params, num_heads, spec, scale=scale)
    if layer.spec.dropout_p:
        raise ValueError(f"{caller} generates: it has no attention dropout (spec.dropout_p=0)")
    h = layer.num_heads
    _check_memory(caller, kv_cache, x, params, layer)
    k, v = kv_cache.k, kv_cache.v                                    # (..., h_kv, S, d)
    T, S = x.shape[-2], k.shape[-2]
    batch = x.shape[:-2]
    mask = check_heads_mask(mask, "mask", batch, batch + (h, T, S), "scores (..., h, T, S)")
    bias = check_heads_mask(bias, "bias", batch, batch + (h, T, S), "scores (..., h, T, S)")
    plan = layer_plan(layer, params, mask=mask, bias=bias, scores=(T, S), dtype=x.dtype)  # once
    # 1) project only the new queries; the keys and values were projected once, 2) split
    q = project_heads(x, params, "q", h)                             # (..., h, T, d_k)
    # 2') (beyond the paper) QK-norm of the new queries
    q, _, _ = transform_qk(q, None, params, layer, None, None)
    # 0) source positions no new query attends, and queries that attend nothing, -> 0, once
    q, k, v = drop_unattended(q, k, v, plan.mask, heads=True)
    # 3) attend to every source position: no causal mask, nothing appended
    heads, _ = attend_heads(q, k, v, params, layer, plan=plan)      # (..., h, T, d_v)
    # 4) concat, 5) project with W^O
    return output(heads, params)[0]                                  # (..., T, d_model)


def _check_memory(caller: str, kv_cache: KVCache, x, params: dict, layer) -> None:
    """``kv_cache`` holds a memory ``x`` can attend with ``params``: not empty, its heads, width,
    dtype, batch dims and key norm those of the step."""
    if kv_cache.length == 0:
        raise ValueError(f"{caller}: kv_cache is empty; cross-attention decoding attends to a fixed "
                         f"memory: build the cache with cross_kv_cache(memory, params, ...)")
    k, h_kv = kv_cache.k, layer.num_kv_heads                         # (..., h_kv, S, d_k)
    d_k = params["W_q"].shape[1] // layer.num_heads
    if k.shape[-3] != h_kv or k.shape[-1] != d_k:
        raise ValueError(f"kv_cache holds keys of shape {k.shape} (..., H_kv, S, d_k) but "
                         f"{h_kv} key/value heads of d_k={d_k} are expected")
    if k.dtype != x.dtype:
        raise TypeError(f"x is {x.dtype} but kv_cache holds {k.dtype} keys and values: project "
                        f"the memory with cross_kv_cache in the dtype of x")
    if x.shape[:-2] != k.shape[:-3]:
        raise ValueError(f"x {x.shape} (..., T, d_model) and kv_cache.k {k.shape} "
                         f"(..., H_kv, S, d_k) must have the same batch dims")
    if layer.qk_norm != (kv_cache.key_norm is not None) or (layer.qk_norm and not _same_norm(
            kv_cache.key_norm, _key_norm(params, layer))):
        raise ValueError(f"params has {sorted(n for n in ('q_norm', 'k_norm') if n in params)} but "
                         f"kv_cache's keys were normalised with "
                         f"{'no' if kv_cache.key_norm is None else 'another'} k_norm: build the "
                         f"cache with cross_kv_cache from the same params and spec")


def _cross_layer(caller, x, params, num_heads, spec, scale=None):
    """The checked :class:`Layer` of a cross-attention decoding call, and ``x`` as an array."""
    spec = layer_spec(caller, spec, num_heads)
    if spec.rope is not None or spec.window is not None:
        raise ValueError(f"{caller}: cross-attention decoding has no "
                         f"{'RoPE (spec.rope)' if spec.rope is not None else 'window (spec.window)'}: "
                         f"a query and the encoder's keys have no relative position")
    x, _, _, layer = layer_of(caller, x, x, x, params, spec=spec, num_heads=num_heads, scale=scale)
    return layer, x


class KeyNorm(NamedTuple):
    """What normalised a cross-attention cache's keys: the QK-norm's kind, epsilon and scope (the
    spec's), and its weight and bias (None without one), copied from ``params``."""

    kind: str
    eps: float
    scope: str
    weight: np.ndarray
    bias: np.ndarray | None


def _key_norm(params: dict, layer) -> KeyNorm:
    """What normalises the keys with ``params`` and ``layer``'s spec."""
    bias = params.get("k_norm_bias")
    return KeyNorm(kind=layer.spec.qk_norm, eps=layer.spec.qk_norm_eps, scope=layer.spec.qk_norm_scope,
                   weight=np.array(params["k_norm"]), bias=None if bias is None else np.array(bias))


def _same_norm(a: KeyNorm, b: KeyNorm) -> bool:
    return a[:3] == b[:3] and all(
        (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
        for x, y in zip(a[3:], b[3:], strict=True))
