r"""Multi-head attention, §3.2.2 of "Attention Is All You Need":

.. math:: \mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W^O,
          \quad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q, K W_i^K, V W_i^V)

All heads are computed at once: ``W_q`` holds every ``W_i^Q`` side by side as column blocks,
so one matrix product projects all heads and :func:`split_heads` separates them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.core import attention as textbook
from attention_np.core import fused
from attention_np.core._checks import (
    as_bool_mask,
    check_broadcasts_to,
    check_cache,
    check_dout,
    check_dropout_p,
)
from attention_np.core.heads import merge_heads, split_heads
from attention_np.core.linear import linear_backward, linear_forward
from attention_np.core.masks import causal_mask, drop_masked, with_lengths
from attention_np.core.mha_params import (
    check_mha_inputs,
    init_mha_params,  # noqa: F401  (re-exported: core.multihead.init_mha_params stays importable)
)
from attention_np.core.qk_layernorm import (
    check_qk_norm_kind,
    check_qk_norm_params,
    qk_norm_backward,
    qk_norm_forward,
)
from attention_np.core.rope import check_rope, head_positions, rotate_heads, rotate_heads_backward
from attention_np.core.sinks import (
    SinksCache,
    check_sinks_param,
    sdpa_sinks_backward,
    sdpa_sinks_forward,
)

# The two computations of Eq. (1), the same numbers (tested equal to float64 rounding):
# "textbook" reads like the paper, "fused" is faster and adds dropout and grouped-query attention.
PATHS = {"fused": fused, "textbook": textbook}


@dataclass(frozen=True)
class MHACache:
    """What :func:`mha_backward` needs: the inputs, the parameters, the attention cache of
    step 3 and the concatenated heads.

    ``weights`` is the (..., h, L, S) attention weight array of every head, formed from the
    attention cache when asked (a :class:`~attention_np.core.sinks.SinksCache` with
    ``sinks=True``); ``concat`` is the (..., L, h*d_v) input of ``W_o``.
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    params: dict
    num_heads: int
    attention: fused.SDPACache | textbook.AttentionCache | SinksCache
    concat: np.ndarray
    path: str = "fused"
    rope: tuple | None = None        # what rotate_heads_backward needs, None without RoPE
    qk_norm: tuple | None = None     # the caches of the q and k norms, None without QK-norm

    made_by = "attention_np.mha_forward"

    @property
    def weights(self) -> np.ndarray:
        return self.attention.weights


def mha_forward(query, key, value, params: dict, mask=None, *, num_heads: int, bias=None,
                is_causal: bool = False, scale=None, dropout_p: float = 0.0, rng=None,
                num_kv_heads: int | None = None, path: str = "fused", window=None, rope=None,
                positions=None, kv_positions=None, q_lengths=None, kv_lengths=None, softcap=None,
                qk_norm: bool | str = False, qk_norm_eps: float = 1e-6, sinks: bool = False):
    """Multi-head attention, §3.2.2, forward pass.

    Parameters
    ----------
    query : (..., L, d_model)
    key : (..., S, kdim)
    value : (..., S, vdim)
    params : dict from :func:`init_mha_params`
    mask : bool, broadcastable to (..., h, L, S), optional
        True = may attend; e.g. ``(L, S)``, or ``(B, 1, 1, S)`` for key padding. Positional or
        keyword, as in every forward; the options after it are keyword-only.
    num_heads : int
    bias : float, broadcastable to (..., h, L, S), optional
        Added to the scaled scores of every head.
    is_causal : bool
        Top-left causal mask, ANDed with ``mask``.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.
    dropout_p, rng : attention dropout, as in :func:`sdpa_forward`.
    num_kv_heads : int, optional
        Grouped-query attention: ``params`` made by ``init_mha_params(..., num_kv_heads=...)``,
        query head ``n`` attending with key/value head ``n // (num_heads / num_kv_heads)``.
    path : {"fused", "textbook"}
        Which computation of Eq. (1) step 3 runs: :mod:`attention_np.core.fused` (the default,
        faster) or :mod:`attention_np.core.attention` (the paper's lines; no dropout and no
        grouped-query attention). The same numbers to float64 rounding.
    window : (left, right), optional
        Sliding-window attention on every head, as in :func:`sdpa_forward` (top-left aligned).
    rope : dict or True, optional
        Rotary position embeddings on every query and key head after step 2 (Llama, Mistral,
        Qwen2): the options of :func:`attention_np.apply_rope` (``theta``, ``layout``,
        ``rotary_dim``); ``True`` or ``{}`` for the defaults.
    positions, kv_positions : int (L,) / (..., L) and (S,) / (..., S), optional
        The positions RoPE rotates by (per sequence with batch dims, e.g. left padding).
        Default ``0 .. L-1``; ``kv_positions`` defaults to ``positions`` when ``S == L``, else
        ``0 .. S-1``.
    q_lengths, kv_lengths : int (B,), optional
        Per-sequence lengths along the first axis of ``query``, ``key``: the padding mask is
        built here (ANDed with ``mask``), as in :func:`sdpa_forward`.
    softcap : float, optional
        Logit soft-capping ``c·tanh(scores / c)`` on every head (fused path only).
    qk_norm, qk_norm_eps : bool or {"rms", "layernorm"}, float
        QK-norm (Qwen3, Gemma 3): RMSNorm (``True`` or ``"rms"``) on every query and key head
        after the split, before RoPE, with the ``(d_k,)`` weights ``params["q_norm"]``,
        ``params["k_norm"]`` (see :mod:`attention_np.core.qk_norm`); ``"layernorm"``: a
        mean-centred LayerNorm instead (Cohere, Phi, StableLM, Flax ``normalize_qk``), with
        optional ``params["q_norm_bias"]``, ``params["k_norm_bias"]`` (see
        :mod:`attention_np.core.qk_layernorm`). Weights ``(d_k,)`` or one per head ``(h, d_k)``
        (``(h_kv, d_k)`` for ``k_norm``).
    sinks : bool
        Attention sinks (gpt-oss): a learned logit per head in every softmax denominator, the
        ``(h,)`` array ``params["sinks"]`` (see :mod:`attention_np.core.sinks`; fused path, no
        dropout).

    Returns
    -------
    out : (..., L, d_model)
    cache : MHACache, with ``cache.weights`` of shape (..., h, L, S)
    """
    query, key, value, h_kv = check_mha_inputs(query, key, value, params, num_heads, num_kv_heads)
    if q_lengths is not None or kv_lengths is not None:
        # the padding mask of the heads' scores (B, 1, L, S), from the lengths
        mask = with_lengths(mask, q_lengths, kv_lengths, query.shape[:-2] + (1,) + query.shape[-2:],
                            key.shape[:-2] + (1,) + key.shape[-2:])
    sdpa = _attention_path(path, dropout_p=dropout_p, grouped=h_kv != num_heads)
    if check_sinks_param(sinks, params, num_heads) and (sdpa is textbook or dropout_p):
        raise ValueError("sinks=True runs the fused path without dropout: pass path='fused' "
                         "and dropout_p=0")
    h = num_heads
    # 0) key/value positions no query may attend, and queries that attend nothing, -> 0 before
    #    the projections: else a NaN there reaches the weight gradients through 0 * NaN
    query, key, value = _drop_masked_inputs(query, key, value, mask, is_causal)
    rope = check_rope(rope)
    # 1) project: every head's W_i^Q, W_i^K, W_i^V at once
    q = linear_forward(query, params["W_q"], params.get("b_q"))   # (..., L, h*d_k)
    k = linear_forward(key, params["W_k"], params.get("b_k"))     # (..., S, h*d_k)
    v = linear_forward(value, params["W_v"], params.get("b_v"))   # (..., S, h*d_v)
    # 2) split into heads
    q = split_heads(q, h)                                          # (..., h, L, d_k)
    k, v = split_heads(k, h_kv), split_heads(v, h_kv)              # (..., h_kv, S, d)
    normed = None
    kind = check_qk_norm_kind(qk_norm)
    if kind is not None:
        # 2a) (beyond the paper) QK-norm: RMSNorm or LayerNorm on every query and key head
        check_qk_norm_params(params, h, h_kv, q.shape[-1])
        q, q_norm_cache = qk_norm_forward(kind, q, params, "q_norm", qk_norm_eps)
        k, k_norm_cache = qk_norm_forward(kind, k, params, "k_norm", qk_norm_eps)
        normed = (q_norm_cache, k_norm_cache)
    rotated = None
    if rope is not None:
        # 2b) (beyond the paper) rotate queries and keys by their positions: RoPE
        L, S = q.shape[-2], k.shape[-2]
        if kv_positions is None and L == S:
            kv_positions = positions
        q, k, rotated = rotate_heads(q, k, head_positions(positions, L),
                                     head_positions(kv_positions, S), rope)
    # 3) attend, every head in parallel: Eq. (1)
    extra = {} if sdpa is textbook else dict(dropout_p=dropout_p, rng=rng, enable_gqa=h_kv != h,
                                             softcap=softcap)
    if sdpa is textbook and softcap is not None:
        raise ValueError("path='textbook' is Eq. (1) alone: softcap needs path='fused'")
    if sinks:
        # 3') (beyond the paper) with a learned sink logit per head in every softmax denominator
        heads, attention = sdpa_sinks_forward(q, k, v, params["sinks"], mask, bias=bias,
                                              is_causal=is_causal, scale=scale, window=window,
                                              enable_gqa=h_kv != h, softcap=softcap)
    else:
        heads, attention = sdpa.sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal,
                                             scale=scale, window=window, **extra)  # (..., h, L, d_v)
    # 4) concat
    concat = merge_heads(heads)                                    # (..., L, h*d_v)
    # 5) project back to d_model with W^O
    out = linear_forward(concat, params["W_o"], params.get("b_o"))  # (..., L, d_model)
    return out, MHACache(query, key, value, params, h, attention, concat, path, rotated, normed)


def _drop_masked_inputs(query, key, value, mask, is_causal):
    """:func:`drop_masked` for the inputs of multi-head attention (mask (..., h, L, S))."""
    if mask is None and not is_causal:
        return query, key, value
    L, S = query.shape[-2], key.shape[-2]
    m = causal_mask(L, S) if mask is None else as_bool_mask(mask)
    check_broadcasts_to(m, "mask", (L, S), "scores (..., h, L, S)")
    if mask is not None and is_causal:
        m = m & causal_mask(L, S)
    if m.ndim >= 3:
        m = m.any(axis=-3)                          # alive for any head: (..., L, S)
    return drop_masked(query, key, value, m)


def _attention_path(path, *, dropout_p, grouped):
    """The module of :data:`PATHS` named ``path``; the textbook one refuses what it lacks."""
    check_dropout_p(dropout_p)
    if not isinstance(path, str) or path not in PATHS:
        raise ValueError(f"path must be one of {sorted(PATHS)}, got {path!r}")
    if path == "textbook" and (dropout_p or grouped):
        raise ValueError("path='textbook' is Eq. (1) alone: attention dropout and grouped-query "
                         "attention (num_kv_heads) need path='fused'")
    return PATHS[path]


def mha_backward(dout, cache: MHACache, *, return_dbias: bool = False):
    """Backward of :func:`mha_forward`.

    With ``return_dbias=True`` a fifth value follows ``grads``: ``dbias``, the gradient w.r.t.
    the forward's ``bias`` with its shape (None without a bias), e.g. for a learned relative
    position bias (T5) or ALiBi slopes.

    Returns
    -------
    dquery, dkey, dvalue : gradients with the shapes of ``query``, ``key``, ``value``.
        One per argument even when they were the same array: for self-attention the
        caller adds the three.
    grads : dict with the keys of ``params``
    """
    check_cache(cache, MHACache, MHACache.made_by)
    c = cache
    p, h, grads = c.params, c.num_heads, {}
    concat = c.concat                                              # (..., L, h*d_v)
    dout = check_dout(dout, concat.shape[:-1] + (p["W_o"].shape[1],), concat.dtype)

    # 5) forward: out = concat @ W_o + b_o
    dconcat, grads["W_o"], db_o = linear_backward(dout, concat, p["W_o"], "b_o" in p)
    # 4) forward: concat = merge_heads(heads)  ->  its backward is split_heads
    dheads = split_heads(dconcat, h)                               # (..., h, L, d_v)
    # 3) forward: heads = Attention(q, k, v)
    if isinstance(c.attention, SinksCache):
        dq, dk, dv, grads["sinks"], *dbias = sdpa_sinks_backward(dheads, c.attention,
                                                                 return_dbias=return_dbias)
    else:
        dq, dk, dv, *dbias = PATHS[c.path].sdpa_backward(dheads, c.attention,
                                                         return_dbias=return_dbias)  # (..., h | h_kv, L|S, d)
    if c.rope is not None:
        # 2b) forward: q, k = RoPE(q), RoPE(k)  ->  rotate the gradients back
        dq, dk = rotate_heads_backward(dq, dk, c.rope)
    if c.qk_norm is not None:
        # 2a) forward: q, k = Norm(q), Norm(k)  (RMSNorm or LayerNorm)
        for name, i in (("q_norm", 0), ("k_norm", 1)):
            dx, g = qk_norm_backward(dq if i == 0 else dk, c.qk_norm[i])
            dq, dk = (dx, dk) if i == 0 else (dq, dx)
            grads[name] = g["w"]
            if "b" in g:
                grads[f"{name}_bias"] = g["b"]
    # 2) forward: q = split_heads(q_proj)  ->  its backward is merge_heads
    dq, dk, dv = merge_heads(dq), merge_heads(dk), merge_heads(dv)
    # 1) forward: q_proj = query @ W_q + b_q (and the same for k, v)
    dquery, grads["W_q"], db_q = linear_backward(dq, c.query, p["W_q"], "b_q" in p)
    dkey, grads["W_k"], db_k = linear_backward(dk, c.key, p["W_k"], "b_k" in p)
    dvalue, grads["W_v"], db_v = linear_backward(dv, c.value, p["W_v"], "b_v" in p)
    for name, g in (("b_q", db_q), ("b_k", db_k), ("b_v", db_v), ("b_o", db_o)):
        if name in p:
            grads[name] = g
    # params unused by this forward (QK-norm weights with qk_norm=False, sinks with sinks=False)
    # get gradient 0
    grads = {name: grads[name] if name in grads else np.zeros_like(p[name]) for name in p}
    return (dquery, dkey, dvalue, grads, *dbias)
