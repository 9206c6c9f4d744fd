"""The masks and bias of one attention call, checked once, and the NaN guard of the kernels:
garbage (NaN or inf) in a key, value or query that no one may attend never reaches an output or
a gradient (0 * NaN is NaN, so the kernels skip masked pairs instead of multiplying by 0).
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bias, as_bool_mask, broadcast_batch, check_bool, check_broadcasts_to
from attention_np.paper.masks import causal_mask
from attention_np.variants.window import window_mask


def mask_and_bias(q, k, v, mask, bias, is_causal: bool, window=None):
    """The mask and bias of one attention call, checked against the scores ``(..., L, S)``.

    Shared by every attention forward. Returns ``(mask, bias)``: ``mask`` bool with the causal
    mask, the sliding ``window = (left, right)`` (top-left aligned) and the ``-inf`` entries of
    ``bias`` (as False) ANDed in (None when nothing is masked), ``bias`` in the dtype of ``q``
    (or None).
    Raises when either does not broadcast to the scores, or when the batch dims of ``q``, ``k``,
    ``v``, ``mask`` and ``bias`` do not broadcast together.
    """
    is_causal = check_bool(is_causal, "is_causal")
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
        raise ValueError(f"{e}{gqa_hint(q, k, v)}") from None
    return whole_mask(mask, bias, L, S, is_causal=is_causal, window=window), bias


def whole_mask(mask, bias, L: int, S: int, *, is_causal: bool = False, window=None):
    """The pairs one call attends, built once: ``mask`` (checked bool, or None) ANDed with the
    keys a ``-inf`` in ``bias`` removes, the causal mask and the sliding ``window = (left, right)``
    (both top-left aligned, for ``L`` queries and ``S`` keys). None when nothing is masked.

    A -inf bias entry removes that key exactly like a False in mask (docs/api.md): as a mask it
    also keeps a NaN or inf in the removed key's k or v out of every sum.
    """
    mask = attended(mask, bias)
    if is_causal:
        causal = causal_mask(L, S)
        mask = causal if mask is None else mask & causal
    if window is not None:
        local = window_mask(L, S, window)
        mask = local if mask is None else mask & local
    return mask


def gqa_hint(q, k, v) -> str:
    """The hint a batch mismatch gets when ``k`` and ``v`` have fewer heads than ``q``, in a
    ratio grouped-query attention could use (else "")."""
    hq, hk = (q.shape[-3], k.shape[-3]) if min(q.ndim, k.ndim) >= 3 else (0, 0)
    if hk and hq > hk and hq % hk == 0 and v.ndim >= 3 and v.shape[-3] == hk:
        return (f"; q has {hq} heads and k, v {hk}: for grouped-query attention pass "
                f"spec=AttentionSpec(enable_gqa=True)")
    return ""


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


def masked_matmul(a, b, mask, out=None):
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

    Returns ``(..., L, d)``, the broadcast batch shape of ``a``, ``b`` and ``mask``: written
    into ``out`` when given (which must have that shape).
    """
    if mask is None:
        return np.matmul(a, b, out=out)
    if out is not None:
        np.copyto(out, masked_matmul(a, b, mask))
        return out
    mask = np.reshape(mask, (1,) * (2 - np.ndim(mask)) + np.shape(mask))
    a = np.where(mask, a, a.dtype.type(0))                              # (..., L, S)
    if all_finite(b):
        return a @ b
    finite = np.isfinite(b)
    out = a @ np.where(finite, b, b.dtype.type(0))                      # the finite part
    f = a.dtype.type

    def count(pairs, entries):     # how many attended pairs meet such an entry, (..., L, d)
        return pairs.astype(a.dtype) @ entries.astype(a.dtype)

    mask = np.broadcast_to(mask, mask.shape[:-2] + a.shape[-2:])      # a broadcast row or key axis
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
