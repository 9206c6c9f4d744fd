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


def mask_from_blocked(blocked) -> np.ndarray:
    """Convert a "True = blocked" mask (PyTorch ``nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask``) to this project's "True = may attend"."""
    return ~as_bool_mask(blocked, "blocked")


def mask_and_bias(q, k, v, mask, bias, is_causal: bool):
    """The mask and bias of one attention call, checked against the scores ``(..., L, S)``.

    Shared by every attention forward. Returns ``(mask, bias)``: ``mask`` bool with the causal
    mask ANDed in (None when nothing is masked), ``bias`` in the dtype of ``q`` (or None).
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
    broadcast_batch(**batch)
    if is_causal:
        causal = causal_mask(L, S)
        mask = causal if mask is None else mask & causal
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
