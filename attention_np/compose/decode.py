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

An encoder-decoder's cross-attention caches differently: :mod:`attention_np.compose.cross_decode`.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_float_array, check_int, check_min_ndim, check_same_dtype
from attention_np.compose.layer_spec import (
    check_heads_mask,
    layer_of,
    layer_plan,
    layer_spec,
    positions_without_rope,
)
from attention_np.compose.pipeline import attend_heads, drop_unattended, output, project_heads, transform_qk
from attention_np.paper.masks import causal_mask
from attention_np.variants.rope import head_positions
from attention_np.variants.spec import refuse_elsewhere
from attention_np.variants.window import window_mask


class KVCache:
    """Keys and values of every position seen so far, for one attention layer.

    ``max_len`` is a bound, not an allocation: the arrays are allocated on the first
    :meth:`append` (whose keys give their shape and dtype) for the positions appended, at least
    16, and grow by doubling, never past ``max_len``. Appending a position thus copies that
    position, plus, now and then, the cache so far (on average less than one more copy per
    position). A cache made for a model's whole context (``KVCache(131072)``, or more) costs
    only what is appended; an append that needs more memory than there is raises
    ``MemoryError`` naming the bytes, with the cache unchanged.

    Only :meth:`append` (and :meth:`reorder`) change a cache: ``length``, ``max_len`` and
    ``key_norm`` are read-only, and ``k``, ``v`` are read-only views, so that no edit of what a
    caller receives can make the cache inconsistent.

    Parameters
    ----------
    max_len : int
        The most positions the cache will hold.
    key_norm : tuple, optional
        What normalised the cached keys (QK-norm's kind, epsilon, scope, weight and bias, as
        :func:`~attention_np.compose.cross_decode.cross_kv_cache` gives it), or None.
    """

    #: Positions allocated by the first append, at least (fewer when ``max_len`` is smaller).
    FIRST_CAPACITY = 16

    def __init__(self, max_len: int, *, key_norm=None):
        self._max_len = check_int(max_len, "max_len")
        self._length = 0
        self._k = self._v = None        # (..., H_kv, max_len, d_k), (..., H_kv, max_len, d_v)
        if key_norm is not None and not isinstance(key_norm, tuple):
            raise TypeError(f"key_norm must be None or the tuple cross_kv_cache makes, got "
                            f"{type(key_norm).__name__}")
        self._key_norm = None if key_norm is None else tuple(
            _read_only(np.array(x)) if isinstance(x, np.ndarray) else x for x in key_norm)

    @property
    def max_len(self) -> int:
        """The most positions the cache will hold (read-only)."""
        return self._max_len

    @property
    def length(self) -> int:
        """The positions appended so far (read-only: only :meth:`append` adds to it)."""
        return self._length

    @property
    def key_norm(self):
        """What normalised the cached keys (read-only), or None."""
        return self._key_norm

    @property
    def k(self) -> np.ndarray:
        """(..., H_kv, length, d_k): the cached keys, a read-only view."""
        self._check_filled("k")
        return _read_only(self._k[..., :self.length, :])

    @property
    def v(self) -> np.ndarray:
        """(..., H_kv, length, d_v): the cached values, a read-only view."""
        self._check_filled("v")
        return _read_only(self._v[..., :self.length, :])

    def reorder(self, index) -> None:
        """Keep the sequences ``index`` of the first batch axis, in that order (beam search:
        each new beam's parent); the batch size stays.

        Parameters
        ----------
        index : int array (B,)
            Values in ``[0, B)``, ``B`` the first axis of the cached keys.
        """
        self._check_filled("k")
        index = np.asarray(index)
        B = self._k.shape[0] if self._k.ndim > 2 else 0
        if not np.issubdtype(index.dtype, np.integer) or index.shape != (B,) or B == 0:
            raise ValueError(f"index must be an int array of shape ({B},) (one batch row each), "
                             f"got {index.dtype} of shape {index.shape}")
        if index.size and (index.min() < 0 or index.max() >= B):
            raise ValueError(f"index must be in [0, {B}), got values in [{index.min()}, {index.max()}]")
        n = self.length
        self._k[..., :n, :] = self._k[index, ..., :n, :]
        self._v[..., :n, :] = self._v[index, ..., :n, :]

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

    def _reserve(self, needed: int, k_new: np.ndarray, v_new: np.ndarray) -> None:
        """Room for ``needed`` positions: the first arrays, or twice the room (at most
        ``max_len``). Both arrays are made before either replaces the cache's; the first append
        makes them even for ``T = 0`` positions (their shape and dtype are then known)."""
        have = 0 if self._k is None else self._k.shape[-2]
        if needed <= have and self._k is not None:
            return
        room = min(self.max_len, max(needed, 2 * have, self.FIRST_CAPACITY))
        shapes = [x.shape[:-2] + (room, x.shape[-1]) for x in (k_new, v_new)]
        try:
            k, v = (np.empty(s, k_new.dtype) for s in shapes)
        except MemoryError:
            size = sum(int(np.prod(s, dtype=np.int64)) for s in shapes) * k_new.dtype.itemsize
            raise MemoryError(f"KVCache(max_len={self.max_len}): room for {room} positions of "
                              f"k {shapes[0]} and v {shapes[1]} ({k_new.dtype}) needs "
                              f"{size / 2**30:.3g} GiB, which could not be allocated; the cache "
                              f"is unchanged ({self.length} positions)") from None
        if self._k is not None:
            k[..., :self.length, :] = self._k[..., :self.length, :]
            v[..., :self.length, :] = self._v[..., :self.length, :]
        self._k, self._v = k, v

    def append(self, k_new, v_new):
        """Store the keys and values of ``T`` new positions; return all cached ``(k, v)``.

        Parameters
        ----------
        k_new : (..., H_kv, T, d_k)
        v_new : (..., H_kv, T, d_v)

        Returns
        -------
        k : (..., H_kv, length, d_k), v : (..., H_kv, length, d_v), read-only views of the cache
        """
        self._check_new(k_new, v_new)
        k_new, v_new = np.asarray(k_new), np.asarray(v_new)
        T = k_new.shape[-2]
        self._reserve(self.length + T, k_new, v_new)   # every check passed: only now change it
        self._k[..., self.length:self.length + T, :] = k_new
        self._v[..., self.length:self.length + T, :] = v_new
        self._length += T
        return self.k, self.v


def _read_only(view: np.ndarray) -> np.ndarray:
    """``view`` marked read-only (the storage it views stays writeable for :meth:`KVCache.append`)."""
    view.flags.writeable = False
    return view


def check_inputs_of(x, name: str, layout: str, params, weight: str, d_model: str) -> np.ndarray:
    """``x`` as a float array of at least two axes (``layout``), its last axis the rows of
    ``params[weight]``; every error names ``x`` as ``name`` (the multi-head checks would call it
    ``query`` or ``key``) and says what ``d_model`` is."""
    x = as_float_array(x, name)
    check_min_ndim(x, name, 2, layout)
    W = params.get(weight) if isinstance(params, dict) else None
    if W is not None and np.ndim(W) == 2 and x.shape[-1] != np.shape(W)[0]:
        raise ValueError(f"{name} has {x.shape[-1]} features (shape {x.shape}) but params[{weight!r}] "
                         f"has shape {np.shape(W)}: its rows must match {d_model}")
    return x


def check_new_positions(x, params) -> np.ndarray:
    """A decoding step's new positions ``x (..., T, d_model)`` as a float array, named ``x``."""
    return check_inputs_of(x, "x", "(..., T, d_model)", params, "W_q", "d_model")


def mha_decode_step(x, params: dict, kv_cache: KVCache, *, num_heads: int | None = None,
                    scale=None, spec=None, mask=None, bias=None, positions=None, **elsewhere):
    """Causal multi-head self-attention (§3.2.2, §3.2.3) for the next ``T`` positions only.

    ``T = 1`` is one decoding step; ``T > 1`` is a chunk of a prompt (chunked prefill).
    Called on consecutive chunks of a sequence, the outputs are those of
    ``mha_forward(x, x, x, params, num_heads=..., is_causal=True)`` on the whole sequence, with
    the same ``spec``. The steps are those of :func:`attention_np.mha_forward`
    (:mod:`attention_np.compose.pipeline`), with keys and values appended to the cache between
    the q/k transforms and the kernel.

    Parameters
    ----------
    x : (..., T, d_model)
        The new positions.
    params : dict from :func:`init_mha_params`
        As in :func:`mha_forward`: it decides grouped-query attention, QK-norm and sinks.
    kv_cache : KVCache
        The keys and values of the earlier positions; the new ones are appended. Required.
    num_heads, scale, spec : as in :func:`mha_forward`
        The causal mask is implied (there is no ``is_causal``); ``spec.window`` is
        bottom-right aligned as the causal mask: new query ``t`` (at position ``t + S - T``)
        sees the ``left`` positions before it. ``spec.rope`` with ``"scaling"`` of type
        ``"dynamic"`` or ``"longrope"`` uses, at each step, the frequencies of its length
        ``1 + max(positions)``; cached keys keep the rotation they were appended with, as
        transformers' ``generate()`` does.
    mask : bool, broadcastable to (..., h, T, S), optional
        ``S`` is the cached length after this step; ANDed with the bottom-right causal mask.
        E.g. the key padding mask of a left-padded batch, ``(B, 1, 1, S)``.
    bias : float, broadcastable to (..., h, T, S), optional
        Added to the scores (ALiBi, or T5's bias with ``align="bottom_right"``).
    positions : int (T,) or (..., T), optional
        The positions RoPE rotates the new tokens by; default ``S - T .. S - 1`` (pass them for
        a left-padded batch, where each sequence counts from its first real token).
    **elsewhere
        Nothing: an option whose home is elsewhere is a ``TypeError`` naming it, as in
        :func:`mha_forward`.

    Returns
    -------
    out : (..., T, d_model)
    """
    caller = "mha_decode_step"
    if "is_causal" in elsewhere:
        raise TypeError(f"{caller}() got is_causal=: decoding is causal (each new position sees "
                        f"the cached ones and itself, never later ones); for attention to a fixed "
                        f"memory use mha_cross_decode_step")
    refuse_elsewhere(caller, elsewhere)
    if not isinstance(kv_cache, KVCache):
        raise TypeError(f"kv_cache must be a KVCache, got {type(kv_cache).__name__}")
    spec = layer_spec(caller, spec, num_heads)
    if spec.dropout_p:
        raise ValueError("mha_decode_step generates: it has no attention dropout (spec.dropout_p=0)")
    x = check_new_positions(x, params)
    x, _, _, layer = layer_of(caller, x, x, x, params, spec=spec, num_heads=num_heads, scale=scale)
    h, h_kv = layer.num_heads, layer.num_kv_heads
    T = x.shape[-2]
    _check_cache_fits(kv_cache, x, h_kv)
    S = kv_cache.length + T                                          # positions after appending
    # every check before kv_cache.append changes the cache
    mask, bias = _check_mask_bias(mask, bias, spec.window, x.shape[:-2], (h, T, S))
    if positions is not None and spec.rope is None:
        raise ValueError(positions_without_rope(caller))
    at = head_positions(positions, T, start=S - T)
    # the step's one plan: its whole mask built once (mask, a -inf bias, causal, window)
    plan = layer_plan(layer, params, mask=mask, bias=bias, scores=(T, S), dtype=x.dtype)
    # 1) project only the new positions, 2) split into heads
    q = project_heads(x, params, "q", h)                             # (..., h, T, d_k)
    k = project_heads(x, params, "k", h_kv)                          # (..., h_kv, T, d_k)
    v = project_heads(x, params, "v", h_kv)                          # (..., h_kv, T, d_v)
    # 2') (beyond the paper) QK-norm, RoPE of the new queries and keys, at their positions
    q, k, _ = transform_qk(q, k, params, layer, at, at)
    # 2'') append to the cache: the keys and values of positions 0 .. S-1
    k, v = kv_cache.append(k, v)                                     # (..., h_kv, S, d)
    # 0) positions no new query attends, and new queries that attend nothing, -> 0, once
    q, k, v = drop_unattended(q, k, v, plan.mask, heads=True)
    # 3) attend: the T new queries are the last T of the S positions -> bottom-right causal
    heads, _ = attend_heads(q, k, v, params, layer, plan=plan)       # (..., h, T, d_v)
    # 4) concat, 5) project with W^O
    return output(heads, params)[0]                                  # (..., T, d_model)


def _check_cache_fits(kv_cache: KVCache, x: np.ndarray, h_kv: int) -> None:
    """The ``T`` new positions of ``x`` fit ``kv_cache``: room for them, and (once it holds keys)
    the same batch dims, key/value heads and dtype; every error names ``x`` and ``kv_cache``
    (not the keys the step would append)."""
    T = x.shape[-2]
    if kv_cache.length + T > kv_cache.max_len:
        full = (" (full: a cache from cross_kv_cache is full by design; pass it to "
                "mha_cross_decode_step)") if kv_cache.length == kv_cache.max_len else ""
        raise ValueError(f"kv_cache holds {kv_cache.length} of max_len={kv_cache.max_len} positions; "
                         f"x adds T={T} more, which do not fit{full}")
    if kv_cache._k is None:
        return
    held = kv_cache._k.shape[:-2]                                    # (..., H_kv)
    if x.shape[:-2] + (h_kv,) != held:
        raise ValueError(f"x has batch dims {x.shape[:-2]} and params {h_kv} key/value heads, but "
                         f"kv_cache holds keys of batch dims {held[:-1]} and {held[-1]} heads "
                         f"(x {x.shape}, kv_cache.k {kv_cache.k.shape})")
    if x.dtype != kv_cache._k.dtype:
        raise TypeError(f"x is {x.dtype} but kv_cache holds {kv_cache._k.dtype} keys and values")


def _check_mask_bias(mask, bias, window, batch: tuple, heads: tuple):
    """The decode step's mask (bottom-right causal, the window and ``mask`` ANDed) and bias,
    checked against the scores ``(*batch, h, T, S)`` before the cache changes."""
    T, S = heads[-2:]
    scores, layout = batch + heads, "scores (..., h, T, S) after appending"
    allowed = causal_mask(T, S, align="bottom_right")                 # (T, S)
    local = None if window is None else window_mask(T, S, window, align="bottom_right")
    if local is not None:
        allowed = allowed & local
    mask = check_heads_mask(mask, "mask", batch, scores, layout)
    bias = check_heads_mask(bias, "bias", batch, scores, layout)
    return allowed if mask is None else mask & allowed, bias
