"""Incremental decoding with a KV cache, beyond the paper.

The decoder generates one position at a time, and its masked self-attention (§3.2.3) lets
position ``i`` attend to positions ``j <= i`` only. The keys and values of the earlier positions
therefore never change once computed: keep them in a cache, and for each new position compute
only its own query, key and value, append the key and value, and attend from the one new query
to every cached key. The outputs are those of full causal multi-head attention over the whole
sequence, at a cost per step that grows with the sequence length instead of its square.

Feeding several positions at once (a prompt, "chunked prefill") needs the causal mask
**bottom-right aligned**: the ``T`` new queries are the *last* ``T`` of the ``S`` cached
positions, so new query ``t`` sees keys ``j <= t + S - T``. The top-left ``is_causal`` of
PyTorch and JAX would let the first new query see only the first cached key.

An encoder-decoder's cross-attention caches differently: :mod:`attention_np.efficient.cross_cache`.
"""

from __future__ import annotations

import warnings

import numpy as np

from attention_np.core._checks import (
    as_bias,
    as_bool_mask,
    as_float_array,
    check_broadcasts_to,
    check_int,
    check_min_ndim,
    check_same_dtype,
    check_scale,
)
from attention_np.core.fused import sdpa_forward
from attention_np.core.heads import merge_heads, split_heads
from attention_np.core.linear import linear_forward
from attention_np.core.masks import causal_mask, check_window, sliding_window_mask
from attention_np.core.mha_params import check_mha_inputs
from attention_np.core.qk_layernorm import (
    check_qk_norm_kind,
    check_qk_norm_params,
    qk_norm_forward,
)
from attention_np.core.rope import check_rope, head_positions, rotate_heads
from attention_np.core.scores import check_softcap
from attention_np.core.sinks import check_sinks_param, sdpa_sinks_forward


class KVCache:
    """Keys and values of every position seen so far, for one attention layer.

    The arrays are allocated once, for ``max_len`` positions, on the first :meth:`append`
    (as inference engines do), so that appending a position copies only that position.

    Parameters
    ----------
    max_len : int
        The most positions the cache will hold.
    """

    def __init__(self, max_len: int):
        self.max_len = check_int(max_len, "max_len")
        self.length = 0
        self._k = self._v = None        # (..., H_kv, max_len, d_k), (..., H_kv, max_len, d_v)

    @property
    def k(self) -> np.ndarray:
        """(..., H_kv, length, d_k): the cached keys, a view."""
        self._check_filled("k")
        return self._k[..., :self.length, :]

    @property
    def v(self) -> np.ndarray:
        """(..., H_kv, length, d_v): the cached values, a view."""
        self._check_filled("v")
        return self._v[..., :self.length, :]

    def _check_filled(self, name: str) -> None:
        if self._k is None:
            raise ValueError(f"KVCache.{name}: the cache is empty (its shape and dtype come from "
                             f"the first append(k_new, v_new)); append before reading it")

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (what grouped-query attention shrinks)."""
        return 0 if self._k is None else self._k.nbytes + self._v.nbytes

    def _check_new(self, k_new, v_new) -> None:
        """Every check of :meth:`append`, without changing the cache."""
        k_new, v_new = as_float_array(k_new, "k_new"), as_float_array(v_new, "v_new")
        check_min_ndim(k_new, "k_new", 2, "(..., H_kv, T, d_k)")
        check_min_ndim(v_new, "v_new", 2, "(..., H_kv, T, d_v)")
        if k_new.shape[:-1] != v_new.shape[:-1]:
            raise ValueError(f"k_new {k_new.shape} and v_new {v_new.shape} must agree in all "
                             f"but the last dim")
        check_same_dtype(k_new=k_new, v_new=v_new)
        if self._k is not None:
            for name, new, old in (("k_new", k_new, self._k), ("v_new", v_new, self._v)):
                if new.shape[:-2] != old.shape[:-2] or new.shape[-1] != old.shape[-1]:
                    raise ValueError(f"{name} has shape {new.shape} but the cache holds "
                                     f"{old.shape[:-2]} + (positions, {old.shape[-1]})")
            if k_new.dtype != self._k.dtype:
                raise TypeError(f"k_new is {k_new.dtype} and v_new {v_new.dtype} but the cache "
                                f"holds {self._k.dtype}")
        T = k_new.shape[-2]
        if self.length + T > self.max_len:
            raise ValueError(f"the cache holds {self.length} of max_len={self.max_len} positions; "
                             f"{T} more do not fit")

    def append(self, k_new, v_new):
        """Store the keys and values of ``T`` new positions; return all cached ``(k, v)``.

        Parameters
        ----------
        k_new : (..., H_kv, T, d_k)
        v_new : (..., H_kv, T, d_v)

        Returns
        -------
        k : (..., H_kv, length, d_k), v : (..., H_kv, length, d_v), views of the cache
        """
        self._check_new(k_new, v_new)
        k_new, v_new = np.asarray(k_new), np.asarray(v_new)
        T = k_new.shape[-2]
        if self._k is None:              # every check passed: only now change the cache
            self._k = np.empty(k_new.shape[:-2] + (self.max_len, k_new.shape[-1]), k_new.dtype)
            self._v = np.empty(v_new.shape[:-2] + (self.max_len, v_new.shape[-1]), v_new.dtype)
        self._k[..., self.length:self.length + T, :] = k_new
        self._v[..., self.length:self.length + T, :] = v_new
        self.length += T
        return self.k, self.v


def mha_decode_step(x, params: dict, kv_cache: KVCache | None = None, *, num_heads: int,
                    num_kv_heads: int | None = None, scale=None, cache: KVCache | None = None,
                    mask=None, bias=None, window=None, rope=None, positions=None,
                    softcap=None, qk_norm: bool | str = False, qk_norm_eps: float = 1e-6,
                    sinks: bool = False):
    """Causal multi-head self-attention (§3.2.2, §3.2.3) for the next ``T`` positions only.

    ``T = 1`` is one decoding step; ``T > 1`` is a chunk of a prompt (chunked prefill).
    Called on consecutive chunks of a sequence, the outputs are those of
    ``mha_forward(x, x, x, params, num_heads=..., is_causal=True)`` on the whole sequence.

    Parameters
    ----------
    x : (..., T, d_model)
        The new positions.
    params : dict from :func:`init_mha_params`
    kv_cache : KVCache
        The keys and values of the earlier positions; the new ones are appended. Required
        (the default ``None`` exists only so that the old keyword can stand in for it).
    num_heads, num_kv_heads, scale : as in :func:`mha_forward`
    cache : KVCache, optional
        Deprecated (0.2.0) keyword for ``kv_cache``, with a ``DeprecationWarning``: in the rest
        of the package ``cache`` is what a forward returns for its backward (``MHACache``).
    mask : bool, broadcastable to (..., h, T, S), optional
        ``S`` is the cached length after this step; ANDed with the bottom-right causal mask.
        E.g. the key padding mask of a left-padded batch, ``(B, 1, 1, S)``.
    bias : float, broadcastable to (..., h, T, S), optional
        Added to the scores (ALiBi, or T5's bias with ``align="bottom_right"``).
    window : (left, right), optional
        Sliding window, bottom-right aligned as the causal mask: new query ``t`` (at position
        ``t + S - T``) sees the ``left`` positions before it.
    rope : dict or True, optional
        Rotary embeddings of the new queries and keys, as in :func:`mha_forward`; the cache
        keeps rotated keys. With ``"scaling"`` of type ``"dynamic"`` or ``"longrope"`` each step
        uses the frequencies of its length ``1 + max(positions)`` and cached keys keep the
        rotation they were appended with, as transformers' ``generate()`` does.
    positions : int (T,) or (..., T), optional
        The positions RoPE rotates the new tokens by; default ``S - T .. S - 1`` (pass them for
        a left-padded batch, where each sequence counts from its first real token).
    softcap, qk_norm, qk_norm_eps, sinks : as in :func:`mha_forward` (``sinks=True``: the
        logits ``params["sinks"]``)

    Returns
    -------
    out : (..., T, d_model)
    """
    if cache is not None:
        if kv_cache is not None:
            raise TypeError("mha_decode_step got both kv_cache and its deprecated spelling "
                            "cache; pass kv_cache only")
        warnings.warn("mha_decode_step(cache=...) is deprecated: the keyword is kv_cache",
                      DeprecationWarning, stacklevel=2)
        kv_cache = cache
    if not isinstance(kv_cache, KVCache):
        raise TypeError(f"kv_cache must be a KVCache, got {type(kv_cache).__name__}")
    x, _, _, h_kv = check_mha_inputs(x, x, x, params, num_heads, num_kv_heads)
    check_scale(scale, 1)          # every check before cache.append changes the cache
    rope = check_rope(rope)
    check_softcap(softcap)
    check_sinks_param(sinks, params, num_heads)
    qk_norm = check_qk_norm_kind(qk_norm)
    if qk_norm:
        check_qk_norm_params(params, num_heads, h_kv, params["W_q"].shape[1] // num_heads)
    T = x.shape[-2]
    S = kv_cache.length + T                                          # positions after appending
    mask, bias = _check_mask_bias(mask, bias, window, x.shape[:-2] + (num_heads, T, S))
    h = num_heads
    # 1) project only the new positions
    q = linear_forward(x, params["W_q"], params.get("b_q"))          # (..., T, h*d_k)
    k = linear_forward(x, params["W_k"], params.get("b_k"))          # (..., T, h_kv*d_k)
    v = linear_forward(x, params["W_v"], params.get("b_v"))          # (..., T, h_kv*d_v)
    # 2) split into heads, 3) append to the cache: keys and values of positions 0 .. S-1
    q, k = split_heads(q, h), split_heads(k, h_kv)                   # (..., h | h_kv, T, d_k)
    if qk_norm:
        # (beyond the paper) QK-norm: RMSNorm or LayerNorm on every new query and key head
        q = qk_norm_forward(qk_norm, q, params, "q_norm", qk_norm_eps)[0]
        k = qk_norm_forward(qk_norm, k, params, "k_norm", qk_norm_eps)[0]
    if rope is not None:
        # (beyond the paper) rotate the new queries and keys by their positions: RoPE
        at = head_positions(positions, T, start=S - T)
        q, k, _ = rotate_heads(q, k, at, at, rope)
    k, v = kv_cache.append(k, split_heads(v, h_kv))                  # (..., h_kv, S, d)
    # 4) attend: the T new queries are the last T of the S positions -> bottom-right causal
    if sinks:
        # (beyond the paper) a learned sink logit per head in every softmax denominator
        heads, _ = sdpa_sinks_forward(q, k, v, params["sinks"], mask, bias=bias, scale=scale,
                                      softcap=softcap, enable_gqa=h_kv != h)
    else:
        heads, _ = sdpa_forward(q, k, v, mask, bias=bias, scale=scale, softcap=softcap,
                                enable_gqa=h_kv != h)                # (..., h, T, d_v)
    # 5) concat and project with W^O
    return linear_forward(merge_heads(heads), params["W_o"], params.get("b_o"))  # (..., T, d_model)


def _check_mask_bias(mask, bias, window, scores: tuple):
    """The decode step's mask (bottom-right causal, the window and ``mask`` ANDed) and bias,
    checked against the scores ``(..., h, T, S)`` before the cache changes."""
    T, S = scores[-2:]
    allowed = causal_mask(T, S, align="bottom_right")                 # (T, S)
    if window is not None:
        allowed = allowed & sliding_window_mask(T, S, *check_window(window), align="bottom_right")
    if mask is not None:
        mask = as_bool_mask(mask)
        check_broadcasts_to(mask, "mask", scores, "scores (..., h, T, S) after appending")
        allowed = mask & allowed
    if bias is not None:
        bias = as_bias(bias)
        check_broadcasts_to(bias, "bias", scores, "scores (..., h, T, S) after appending")
    return allowed, bias
