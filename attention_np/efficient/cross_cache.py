"""Cross-attention decoding (§3.2.3), beyond the paper: the encoder's keys and values projected once.

In an encoder-decoder, the decoder's cross-attention takes its keys and values from the encoder
output ``memory``, projected by ``W_k`` and ``W_v``. Unlike self-attention's (see
:mod:`attention_np.efficient.kv_cache`), they do not grow while decoding: they are the same at every
step. Project them once into a full cache (:func:`cross_kv_cache`); every step projects only its
new queries, attends them to all of the cached keys (no causal mask) and appends nothing
(:func:`mha_cross_decode_step`).
"""

from __future__ import annotations

import numpy as np

from attention_np.core._checks import (
    as_bias,
    as_bool_mask,
    as_float_array,
    check_broadcasts_to,
    check_min_ndim,
    check_scale,
)
from attention_np.core.fused import sdpa_forward
from attention_np.core.heads import merge_heads, split_heads
from attention_np.core.linear import linear_forward
from attention_np.core.mha_params import check_mha_inputs
from attention_np.efficient.kv_cache import KVCache


def cross_kv_cache(memory, params: dict, *, num_heads: int,
                   num_kv_heads: int | None = None) -> KVCache:
    """Cross-attention's keys and values, projected from the encoder output once.

    Parameters
    ----------
    memory : (..., S, d_model)
        The encoder output the decoder attends to (as wide as the decoder's ``x``).
    params : dict from :func:`init_mha_params`
        The cross-attention's weights (only ``W_k``, ``b_k``, ``W_v``, ``b_v`` are used here).
    num_heads, num_kv_heads : as in :func:`mha_forward`

    Returns
    -------
    KVCache
        ``max_len = length = S``: full, so that appending to it raises. ``.k (..., H_kv, S, d_k)``,
        ``.v (..., H_kv, S, d_v)``; pass it to :func:`mha_cross_decode_step` at every step.
    """
    memory = as_float_array(memory, "memory")
    check_min_ndim(memory, "memory", 2, "(..., S, d_model)")
    W_k = params.get("W_k") if isinstance(params, dict) else None
    if W_k is not None and np.ndim(W_k) == 2 and memory.shape[-1] != np.shape(W_k)[0]:
        raise ValueError(f"memory has {memory.shape[-1]} features but params['W_k'] has shape "
                         f"{np.shape(W_k)}: its rows must match the encoder output's d_model")
    memory, _, _, h_kv = check_mha_inputs(memory, memory, memory, params, num_heads,
                                          num_kv_heads)
    _check_no_qk_norm(params)
    k = linear_forward(memory, params["W_k"], params.get("b_k"))     # (..., S, h_kv*d_k)
    v = linear_forward(memory, params["W_v"], params.get("b_v"))     # (..., S, h_kv*d_v)
    kv_cache = KVCache(memory.shape[-2])
    kv_cache.append(split_heads(k, h_kv), split_heads(v, h_kv))      # (..., h_kv, S, d)
    return kv_cache


def mha_cross_decode_step(x, params: dict, kv_cache: KVCache, *, num_heads: int,
                          num_kv_heads: int | None = None, scale=None, mask=None, bias=None):
    """Multi-head cross-attention (§3.2.3) of ``T`` new decoder positions to a fixed memory.

    The keys and values come from ``kv_cache`` (:func:`cross_kv_cache`, projected once); nothing
    is appended, and there is no causal mask: every new query sees every source position. Called
    on consecutive chunks of the decoder's input, the outputs are those of
    ``mha_forward(y, memory, memory, params, mask, ...)`` on the whole target sequence ``y``.

    Parameters
    ----------
    x : (..., T, d_model)
        The decoder's new positions (the queries).
    params : dict from :func:`init_mha_params`
        The cross-attention's weights (``W_q``, ``b_q``, ``W_o``, ``b_o`` are used here).
    kv_cache : KVCache
        From :func:`cross_kv_cache`; left unchanged.
    num_heads, num_kv_heads, scale : as in :func:`mha_forward`
    mask : bool, broadcastable to (..., h, T, S), optional
        E.g. the source padding mask ``(B, 1, 1, S)``.
    bias : float, broadcastable to (..., h, T, S), optional
        Added to the scores.

    Returns
    -------
    out : (..., T, d_model)
    """
    if not isinstance(kv_cache, KVCache):
        raise TypeError(f"kv_cache must be a KVCache (from cross_kv_cache), got "
                        f"{type(kv_cache).__name__}")
    x, _, _, h_kv = check_mha_inputs(x, x, x, params, num_heads, num_kv_heads)
    _check_no_qk_norm(params)
    check_scale(scale, 1)
    k, v = kv_cache.k, kv_cache.v                                    # (..., h_kv, S, d)
    d_k = params["W_q"].shape[1] // num_heads
    if k.shape[-3] != h_kv or k.shape[-1] != d_k:
        raise ValueError(f"kv_cache holds keys of shape {k.shape} (..., H_kv, S, d_k) but "
                         f"num_kv_heads={h_kv} heads of d_k={d_k} are expected")
    if k.dtype != x.dtype:
        raise TypeError(f"x is {x.dtype} but kv_cache holds {k.dtype} keys and values: project "
                        f"the memory with cross_kv_cache in the dtype of x")
    if x.shape[:-2] != k.shape[:-3]:
        raise ValueError(f"x {x.shape} (..., T, d_model) and the cached keys {k.shape} "
                         f"(..., H_kv, S, d_k) must have the same batch dims")
    T, S = x.shape[-2], k.shape[-2]
    scores = x.shape[:-2] + (num_heads, T, S)
    if mask is not None:
        mask = as_bool_mask(mask)
        check_broadcasts_to(mask, "mask", scores, "scores (..., h, T, S)")
    if bias is not None:
        bias = as_bias(bias)
        check_broadcasts_to(bias, "bias", scores, "scores (..., h, T, S)")
    # 1) project only the new queries; the keys and values were projected once
    q = split_heads(linear_forward(x, params["W_q"], params.get("b_q")), num_heads)  # (..., h, T, d_k)
    # 2) attend to every source position: no causal mask, nothing appended
    heads, _ = sdpa_forward(q, k, v, mask, bias=bias, scale=scale,
                            enable_gqa=h_kv != num_heads)            # (..., h, T, d_v)
    # 3) concat and project with W^O
    return linear_forward(merge_heads(heads), params["W_o"], params.get("b_o"))  # (..., T, d_model)


def _check_no_qk_norm(params: dict) -> None:
    norms = sorted(n for n in ("q_norm", "k_norm") if n in params)
    if norms:
        raise ValueError(f"params has {norms}: cross-attention decoding has no QK-norm; "
                         f"use mha_forward(..., qk_norm=True)")
