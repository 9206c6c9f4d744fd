"""Boolean attention masks. Convention: **True = this query may attend to this key.**

That is the polarity of PyTorch's ``scaled_dot_product_attention`` bool ``attn_mask`` and of
JAX's ``mask``. PyTorch's ``nn.MultiheadAttention`` uses the opposite ("True = blocked");
:func:`mask_from_blocked` converts from it.
"""

from __future__ import annotations

import numpy as np

from attention_np.core._checks import as_bias, as_bool_mask, broadcast_batch, check_broadcasts_to, check_int

ALIGNMENTS = ("top_left", "bottom_right")


def causal_mask(L: int, S: int | None = None, *, align: str = "top_left") -> np.ndarray:
    """The causal mask of §3.2.3: a query may not attend to later keys.

    Parameters
    ----------
    L : int
        Number of queries.
    S : int, optional
        Number of keys (default ``L``).
    align : {"top_left", "bottom_right"}
        Where the diagonal sits when ``L != S``:

        - ``"top_left"``: query ``i`` sees keys ``j <= i``. PyTorch's and JAX's ``is_causal``.
        - ``"bottom_right"``: query ``i`` sees keys ``j <= i + S - L``: the ``L`` queries are
          the *last* ``L`` positions of the sequence, as when decoding with a KV cache
          (FlashAttention >= 2.1, ``torch.nn.attention.bias.causal_lower_right``).

    Returns
    -------
    mask : bool array (L, S)

    Examples
    --------
    >>> causal_mask(2, 3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0]])
    >>> causal_mask(2, 3, align="bottom_right").astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    L = check_int(L, "L", minimum=0)
    S = L if S is None else check_int(S, "S", minimum=0)
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top_left" else S - L
    return np.tri(L, S, k=offset, dtype=bool)


def check_window(window) -> tuple:
    """``window = (left, right)``: two non-negative ints or None (unbounded on that side)."""
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise ValueError(f"window must be a pair (left, right) of non-negative ints or None, "
                         f"got {window!r}")
    return tuple(None if w is None else check_int(w, f"window {side}", minimum=0)
                 for w, side in zip(window, ("left", "right"), strict=True))


def sliding_window_mask(L: int, S: int | None = None, left=None, right=None, *,
                        align: str = "top_left") -> np.ndarray:
    """Sliding-window (local) attention: query ``i`` sees keys ``i - left <= j <= i + right``.

    Beyond the paper (Longformer, Mistral, Gemma 2). ``left=None`` or ``right=None`` leaves that
    side unbounded, so ``right=0`` is causal with a window and ``(None, 0)`` is :func:`causal_mask`.
    The window counts the query itself: Mistral's ``sliding_window=W`` is ``left=W - 1, right=0``;
    JAX's ``local_window_size=(left, right)`` is the same pair.

    Parameters
    ----------
    L : int
        Number of queries.
    S : int, optional
        Number of keys (default ``L``).
    left, right : int >= 0 or None
        How many keys before and after the query's own position it may see.
    align : {"top_left", "bottom_right"}
        Where query ``i`` sits among the keys when ``L != S``, as in :func:`causal_mask`:
        position ``i`` (top left), or ``i + S - L`` (bottom right: the queries are the last ``L``
        positions, as when decoding with a KV cache).

    Returns
    -------
    mask : bool array (L, S)

    Examples
    --------
    >>> sliding_window_mask(4, left=1, right=0).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    L = check_int(L, "L", minimum=0)
    S = L if S is None else check_int(S, "S", minimum=0)
    left, right = check_window((left, right))
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top_left" else S - L
    rel = np.arange(S) - (np.arange(L)[:, None] + offset)      # (L, S): key minus query position
    mask = np.ones((L, S), dtype=bool)
    if left is not None:
        mask &= rel >= -left
    if right is not None:
        mask &= rel <= right
    return mask


def padding_mask(lengths, S: int | None = None) -> np.ndarray:
    """Key padding mask from sequence lengths: key ``j`` of sequence ``b`` is real iff ``j < lengths[b]``.

    Parameters
    ----------
    lengths : int array (B,)
        The true length of each sequence in the batch.
    S : int, optional
        The padded length (default ``max(lengths)``).

    Returns
    -------
    mask : bool array (B, 1, S)
        Broadcasts against scores ``(B, L, S)``. For multi-head scores ``(B, h, L, S)`` add a
        head axis, ``mask[:, None]``, so that ``B`` is not aligned with the heads.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D int array (B,), got shape {lengths.shape} "
                         f"and dtype {lengths.dtype}")
    if lengths.size and lengths.min() < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.min()}")
    longest = int(lengths.max()) if lengths.size else 0
    S = longest if S is None else check_int(S, "S", minimum=0)
    if longest > S:
        raise ValueError(f"lengths has a sequence of length {longest} but S={S}")
    return (np.arange(S) < lengths[:, None])[:, None, :]


def with_lengths(mask, q_lengths, kv_lengths, q_shape: tuple, k_shape: tuple):
    """``mask`` ANDed with the padding of per-sequence lengths (JAX's ``query_seq_lengths``,
    ``key_value_seq_lengths``): query ``i`` of sequence ``b`` is real iff ``i < q_lengths[b]``,
    key ``j`` iff ``j < kv_lengths[b]``; ``b`` is the first axis of ``q (B, ..., L, d)``.

    Returns the mask ``(B, 1, ..., L, S)`` (or ``mask`` itself when both lengths are None).
    A padded query row is fully masked: output 0 and gradients 0, as every fully masked row.
    """
    if q_lengths is None and kv_lengths is None:
        return mask
    L, S = q_shape[-2], k_shape[-2]
    if len(q_shape) < 3:
        raise ValueError(f"q_lengths/kv_lengths need a batch axis: q must be (B, ..., L, d_k), "
                         f"got shape {q_shape}")
    B = q_shape[0]
    allowed = np.ones((B, L, S), dtype=bool)
    for name, lengths, n, axis in (("q_lengths", q_lengths, L, 1), ("kv_lengths", kv_lengths, S, 2)):
        if lengths is None:
            continue
        lengths = np.asarray(lengths)
        if lengths.shape != (B,) or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"{name} must be an int array (B,) = ({B},) for q {q_shape}, got "
                             f"shape {lengths.shape} and dtype {lengths.dtype}")
        if lengths.size and (lengths.min() < 0 or lengths.max() > n):
            raise ValueError(f"{name} must be in [0, {n}], got values in "
                             f"[{lengths.min()}, {lengths.max()}]")
        real = np.arange(n) < lengths[:, None]                           # (B, n)
        allowed &= real[:, :, None] if axis == 1 else real[:, None, :]
    allowed = allowed.reshape((B,) + (1,) * (len(q_shape) - 3) + (L, S))
    return allowed if mask is None else as_bool_mask(mask) & allowed


def mask_from_blocked(blocked) -> np.ndarray:
    """Convert a "True = blocked" mask (PyTorch ``nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask``) to this project's "True = may attend"."""
    return ~as_bool_mask(blocked, "blocked")


def mask_and_bias(q, k, v, mask, bias, is_causal: bool, window=None):
    """The mask and bias of one attention call, checked against the scores ``(..., L, S)``.

    Shared by every attention forward. Returns ``(mask, bias)``: ``mask`` bool with the causal
    mask and the sliding ``window = (left, right)`` (top-left aligned) ANDed in (None when nothing
    is masked), ``bias`` in the dtype of ``q`` (or None).
    Raises when either does not broadcast to the scores, or when the batch dims of ``q``, ``k``,
    ``v``, ``mask`` and ``bias`` do not broadcast together.
    """
    L, S = q.shape[-2], k.shape[-2]
    batch = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}
    if mask is not None:
        mask = as_bool_mask(mask)
        batch["mask"] = check_broadcasts_to(mask, "mask", (L, S), "scores (..., L, S)")[:-2]
    if bias is not None:
        bias = as_bias(bias).astype(q.dtype, copy=False)
        batch["bias"] = check_broadcasts_to(bias, "bias", (L, S), "scores (..., L, S)")[:-2]
    try:
        broadcast_batch(**batch)
    except ValueError as e:
        hq, hk = (q.shape[-3], k.shape[-3]) if min(q.ndim, k.ndim) >= 3 else (0, 0)
        if hk and hq > hk and hq % hk == 0 and v.ndim >= 3 and v.shape[-3] == hk:
            raise ValueError(f"{e}; q has {hq} heads and k, v {hk}: for grouped-query attention "
                             f"pass enable_gqa=True") from None
        raise
    if is_causal:
        causal = causal_mask(L, S)
        mask = causal if mask is None else mask & causal
    if window is not None:
        local = sliding_window_mask(L, S, *check_window(window))
        mask = local if mask is None else mask & local
    return mask, bias


def _alive_in(alive: np.ndarray, batch: tuple) -> np.ndarray:
    """``alive (..., n)`` reduced with "any" to an input's own batch dims: ``(*batch, n, 1)``."""
    full = np.broadcast_shapes(alive.shape[:-1], batch)
    a = np.broadcast_to(alive, full + alive.shape[-1:])
    lead = len(full) - len(batch)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(batch)
                                      if n == 1 and full[lead + i] != 1)
    return a.any(axis=axes, keepdims=True).reshape(batch + alive.shape[-1:])[..., None]


def drop_masked(q, k, v, mask):
    """Zero the keys no query may attend and the queries that may attend no key.

    Their weights are exactly 0, but ``0 * NaN = NaN`` in ``weights @ v`` and in every
    gradient's product: a NaN or inf in a padding slot of ``k``/``v``, or in the ``q`` of a fully
    masked row, would reach the answer. Zeroing them keeps it out (see docs/api.md, conventions).
    A key masked for some queries but not others is used, and is not zeroed: there
    :func:`masked_matmul` keeps it out of the rows that do not see it.

    ``mask`` is bool, broadcastable to the scores ``(..., L, S)``, or None (nothing to do).
    Returns ``(q, k, v)`` with their own shapes; an input with nothing to zero is returned as is.
    """
    if mask is None:
        return q, k, v
    mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)            # a 0-d or 1-D mask too
    rows = _alive_in(mask.any(axis=-1), q.shape[:-2])                    # (..., L, 1)
    keys = _alive_in(mask.any(axis=-2), np.broadcast_shapes(k.shape[:-2], v.shape[:-2]))

    def zero(x, alive):
        if alive.all():
            return x
        alive = _alive_in(alive[..., 0], x.shape[:-2]) if alive.shape[:-2] != x.shape[:-2] else alive
        return np.where(alive, x, x.dtype.type(0))

    return zero(q, rows), zero(k, keys), zero(v, keys)


def tile(x, i0: int, i1: int, j0: int, j1: int):
    """The block ``x[..., i0:i1, j0:j1]`` of a mask or bias broadcastable to the scores
    ``(..., L, S)``: a view; a size-1 (broadcast) query or key dim stays whole."""
    rows = slice(i0, i1) if x.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if x.shape[-1] > 1 else slice(None)
    return x[..., rows, cols]


def all_finite(*arrays) -> bool:
    """True when every entry of every array is finite: one O(size) pass each, no (L, S) copy."""
    return all(bool(np.isfinite(x).all()) for x in arrays)


def masked_matmul(a, b, mask):
    """``a @ b`` where a pair that ``mask`` forbids adds exactly 0, even when ``b`` is NaN or inf.

    ``a (..., L, S)`` is weights or gradients of scores; ``mask`` is bool, broadcastable to
    ``a``, True = the pair ``(i, j)`` is attended (None: the plain product). The sum over ``j``
    runs over the attended pairs only. ``weights @ v`` alone would give ``0 * NaN = NaN`` at a
    key masked for row ``i`` but attended by another row (causal masks, sliding windows), so a
    NaN or inf there would reach row ``i``. The attended pairs follow IEEE arithmetic, as a
    plain product does: a NaN there gives NaN, an inf gives ±inf (NaN when its factor is 0).

    When ``b`` is finite this is ``where(mask, a, 0) @ b``. Otherwise the non-finite entries of
    ``b`` are zeroed and their attended contributions counted with indicator products, then
    added back as NaN, +inf or -inf.

    Returns ``(..., L, d)``, the broadcast batch shape of ``a``, ``b`` and ``mask``.
    """
    if mask is None:
        return a @ b
    mask = np.reshape(mask, (1,) * (2 - np.ndim(mask)) + np.shape(mask))
    a = np.where(mask, a, a.dtype.type(0))                              # (..., L, S)
    if all_finite(b):
        return a @ b
    finite = np.isfinite(b)
    out = a @ np.where(finite, b, b.dtype.type(0))                      # the finite part
    f = a.dtype.type

    def count(pairs, entries):     # how many attended pairs meet such an entry, (..., L, d)
        return pairs.astype(a.dtype) @ entries.astype(a.dtype)

    pos, neg, other = mask & (a > 0), mask & (a < 0), mask & ~(a > 0) & ~(a < 0)  # a = 0 or NaN
    pinf, ninf = np.isposinf(b), np.isneginf(b)
    nan = count(mask, np.isnan(b)) + count(other, pinf | ninf)          # NaN, or 0 * inf
    up = count(pos, pinf) + count(neg, ninf)                             # +inf terms
    down = count(pos, ninf) + count(neg, pinf)                           # -inf terms
    with np.errstate(invalid="ignore"):                                  # inf - inf = NaN, as IEEE
        out = out + np.where(up > 0, f(np.inf), f(0)) + np.where(down > 0, f(-np.inf), f(0))
    return np.where(nan > 0, f(np.nan), out)


def zero_masked(x, mask):
    """``x (..., L, S)`` with 0 at the pairs ``mask`` forbids (``x`` itself when ``mask`` is None)."""
    return x if mask is None else np.where(mask, x, x.dtype.type(0))


def transpose_mask(mask):
    """A mask for ``(..., L, S)`` turned into one for ``(..., S, L)`` (None stays None)."""
    if mask is None:
        return None
    return np.swapaxes(np.reshape(mask, (1,) * (2 - np.ndim(mask)) + np.shape(mask)), -1, -2)


def attended(mask, bias):
    """The attended (query, key) pairs: ``mask`` and a ``bias`` that is not -inf (a -inf bias
    removes its key exactly like a False in ``mask``). None when neither removes anything."""
    if bias is None:
        return mask
    kept = np.reshape(bias, (1,) * (2 - np.ndim(bias)) + np.shape(bias)) != -np.inf
    if kept.all():
        return mask
    return kept if mask is None else mask & kept
