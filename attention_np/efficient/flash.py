r"""Tiled attention with an online softmax: the FlashAttention-2 algorithm (Dao, 2023), beyond the paper.

Eq. (1) as written materializes the (L, S) matrix of scores. FlashAttention computes the same
``out`` while reading the keys and values one block of ``block_size`` positions at a time, so
that no (L, S) array ever exists. The trick is the **online softmax**: keep, for every query
row, the running maximum ``m`` of the scores seen so far, the running sum ``l`` of their
exponentials (shifted by ``m``), and the running weighted sum ``acc`` of the values. When a
new block raises the maximum from ``m`` to ``m_new``, everything accumulated so far was
exponentiated with the old shift and is corrected by one factor:

.. math:: \alpha = e^{m - m_\text{new}},\qquad l \leftarrow \alpha\, l + \sum_j e^{s_j - m_\text{new}},
          \qquad \text{acc} \leftarrow \alpha\, \text{acc} + e^{s - m_\text{new}} V_\text{block}

After the last block ``out = acc / l``, exactly the softmax-weighted average. Besides q, k, v
and the caller's mask, the forward keeps only ``out`` and the per-row log-sum-exp
``lse = m + log l``. The backward recomputes
each block's weights from it, ``P = exp(scores - lse)``, and replaces
``rowsum(dP * P)`` by ``D = rowsum(dout * out)`` (FlashAttention-2's D), which needs no (L, S) array.

FlashAttention-2 on a GPU gives each block of query rows to its own thread block, and each
walks over the key blocks. Here NumPy's vectorization plays the thread blocks: all query rows
(and all batch and head dims) walk over the key blocks together, so the Python loop runs over
key blocks only, and the extra memory is a few (..., L, block_size) tiles, never (..., L, S).
With ``is_causal``, the query rows that cannot see a key block are not computed at all.
``enable_gqa=True`` groups query heads over shared key/value heads as :mod:`attention_np.core.gqa` explains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.core._checks import (
    as_bias,
    as_bool_mask,
    check_cache,
    check_dout,
    check_int,
    check_qkv,
    sum_to_shape,
)
from attention_np.core.gqa import group_heads, group_kv, group_queries, kv_groups, ungroup_queries
from attention_np.core.masks import (
    all_finite,
    check_window,
    drop_masked,
    mask_and_bias,
    masked_matmul,
    tile,
    transpose_mask,
    with_lengths,
    zero_masked,
)
from attention_np.core.scores import overflowed


@dataclass(frozen=True)
class FlashCache:
    """What :func:`flash_attention_backward` needs: the inputs, ``out`` and the log-sum-exp.

    Attributes
    ----------
    q, k, v : the inputs
    out : (..., L, d_v) the output
    lse : (..., L) log-sum-exp of each query row's scores, ``+inf`` for a fully masked row
    mask : the bool mask as given (broadcastable to (..., L, S); regrouped with ``enable_gqa``), or None
    is_causal, scale, block_size : as passed to the forward
    kv_groups : query heads per key/value head, ``H / H_kv`` (1 without grouped-query attention)
    window : ``(left, right)`` of the sliding window, ``(None, None)`` without one
    bias : the float bias as given (broadcastable to (..., L, S), in the dtype of ``q``), or None
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    out: np.ndarray
    lse: np.ndarray
    mask: np.ndarray | None
    is_causal: bool
    scale: float
    block_size: int
    kv_groups: int = 1
    bias: np.ndarray | None = None
    window: tuple = (None, None)

    made_by = "attention_np.flash_attention_forward (attention_np.efficient.flash)"


def _key_blocks(L: int, S: int, block_size: int, is_causal: bool, window=(None, None)):
    """``(j0, j1, i0, i1)`` for each key block ``[j0, j1)``; query rows ``[i0, i1)`` can see it.

    Causal (top-left): query ``i`` sees key ``j`` iff ``j <= i``, so rows ``i < j0`` see none of
    the block; a block starting at or after row ``L`` is seen by no row and skipped. A sliding
    ``window = (left, right)`` (query ``i`` sees ``i - left <= j <= i + right``) narrows the rows
    to ``[j0 - right, j1 + left)``; a block no row can see is skipped.
    """
    left, right = window
    if is_causal:
        right = 0 if right is None else min(right, 0)
    for j0 in range(0, S, block_size):
        j1 = min(j0 + block_size, S)
        i0 = 0 if right is None else max(0, j0 - right)
        i1 = L if left is None else min(L, j1 + left)
        if i0 < i1:
            yield j0, j1, i0, i1


def _tile_scores(qs, k, mask, is_causal, j0, j1, i0, i1, shape, bias=None, window=(None, None),
                 post=None):
    """Scores of query rows ``[i0, i1)`` against keys ``[j0, j1)``, ``-inf`` where masked.

    ``qs`` is ``q * scale`` (or ``q``, with the scale as ``post`` when ``q * scale`` overflows);
    ``shape`` is the broadcast batch shape. Returns (*shape, i1 - i0, j1 - j0).
    """
    s = qs[..., i0:i1, :] @ np.swapaxes(k[..., j0:j1, :], -1, -2)        # (..., R, Bk)
    if post is not None:
        s *= post
    if s.shape[:-2] != shape:                 # a mask that adds batch dims: grow the tile
        s = np.broadcast_to(s, shape + s.shape[-2:]).copy()
    if bias is not None:
        s += tile(bias, i0, i1, j0, j1)          # the bias's block, as the dense path adds it
    if mask is not None:
        # Slice only the mask dims that are not broadcast (size 1), never a full (L, S) copy.
        np.copyto(s, -np.inf, where=~tile(mask, i0, i1, j0, j1))
    if is_causal:
        # Only the first rows of the tile straddle the diagonal: row i0 + r blocks keys j > i0 + r.
        r = min(j1, s.shape[-2] + i0) - i0
        blocked = np.arange(j0, j1) > np.arange(i0, i0 + r)[:, None]    # (r, Bk)
        np.copyto(s[..., :r, :], -np.inf, where=blocked)
    if window != (None, None):
        # key minus query position in the tile; outside [-left, right] is blocked
        rel = np.arange(j0, j1) - np.arange(i0, i1)[:, None]                # (R, Bk)
        left, right = window
        outside = np.zeros(rel.shape, bool)
        if left is not None:
            outside |= rel < -left
        if right is not None:
            outside |= rel > right
        np.copyto(s, -np.inf, where=outside)
    return s


def _tile_allowed(q, k, mask, is_causal, j0, j1, i0, i1, shape, bias=None, window=(None, None)):
    """The attended pairs of a tile, bool (..., R, Bk): where :func:`_tile_scores` of zeros is not -inf.

    Needed only when an input is NaN or inf (see :func:`masked_matmul`).
    """
    zq, zk = np.zeros(q.shape[:-1] + (1,), q.dtype), np.zeros(k.shape[:-1] + (1,), k.dtype)
    return _tile_scores(zq, zk, mask, is_causal, j0, j1, i0, i1, shape, bias, window) > -np.inf


def _scaled_q(q, scale):
    """``(q * scale, None)``, or ``(q, scale)`` when ``q * scale`` overflows where ``q`` does not
    (scale 1e30, q ~ 1e10 in float32: the scores ``q @ k.T * scale`` may still be representable)."""
    s = q.dtype.type(scale)
    with np.errstate(over="ignore"):
        qs = q * s
    return (q, s) if overflowed(qs, q) else (qs, None)


def _check_flash(q, k, v, mask, block_size, bias=None):
    """The checked mask and bias (causal is applied per tile, not here) and the broadcast batch shape."""
    if mask is not None and np.ndim(mask) < 2:
        # a 0-d or 1-D mask (valid for sdpa_forward): give it the (L, S) dims the tiles slice
        mask = np.reshape(mask, (1,) * (2 - np.ndim(mask)) + np.shape(mask))
    if bias is not None and np.ndim(bias) < 2:
        bias = np.reshape(bias, (1,) * (2 - np.ndim(bias)) + np.shape(bias))
    mask, bias = mask_and_bias(q, k, v, mask, bias, is_causal=False)
    check_int(block_size, "block_size")
    L, S = q.shape[-2], k.shape[-2]
    shapes = [x.shape[:-2] for x in (q, k, v)]
    for x in (mask, bias):
        if x is not None:
            shapes.append(np.broadcast_shapes(x.shape, (L, S))[:-2])
    return mask, bias, np.broadcast_shapes(*shapes)


def flash_attention_forward(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None,
                            block_size: int = 128, enable_gqa: bool = False, window=None,
                            q_lengths=None, kv_lengths=None):
    r"""Eq. (1) computed block by block with an online softmax (FlashAttention-2's forward).

    The same numbers as :func:`sdpa_forward` (to rounding), without an (L, S) array.

    Parameters
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    mask : bool, broadcastable to (..., L, S), optional
        True = this query may attend to this key. Sliced per block, never expanded.
    bias : float, broadcastable to (..., L, S), optional
        Added to the scaled scores, as in :func:`sdpa_forward`; sliced per block.
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (top-left), ANDed with ``mask``; blocks above the
        diagonal are skipped.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.
    block_size : int
        Keys and values per block; need not divide ``S``.
    enable_gqa : bool
        Grouped-query attention, as in :func:`sdpa_forward`: ``k``, ``v`` may have ``H_kv``
        heads, ``H % H_kv == 0``; query head ``n`` uses key/value head ``n // (H / H_kv)``.
    window : (left, right), optional
        Sliding-window attention, as in :func:`sdpa_forward`: applied per tile, and the key
        blocks (and query rows) outside every window are skipped.
    q_lengths, kv_lengths : int (B,), optional
        Per-sequence lengths, as in :func:`sdpa_forward`.

    Returns
    -------
    out : (..., L, d_v)
        A fully masked query row gives 0, as in :func:`sdpa_forward`.
    cache : FlashCache
        ``q, k, v, out`` and the per-row log-sum-exp ``lse`` (..., L): nothing of size L·S.
    """
    q, k, v, scale = check_qkv(q, k, v, scale)
    mask = with_lengths(mask, q_lengths, kv_lengths, q.shape, k.shape)    # padding from lengths
    groups = kv_groups(q, k, v) if enable_gqa else 1
    if groups > 1:
        # As in sdpa_forward: query heads grouped (..., H_kv, G, L, d), k and v broadcast over G.
        if mask is not None:
            mask = group_heads(as_bool_mask(mask), q.shape[-3], groups, "mask")
        if bias is not None:
            bias = as_bias(bias).astype(q.dtype, copy=False)
        out, cache = flash_attention_forward(group_queries(q, groups), group_kv(k), group_kv(v),
                                             mask, bias=group_heads(bias, q.shape[-3], groups, "bias"),
                                             is_causal=is_causal, scale=scale,
                                             block_size=block_size, window=window)
        out = ungroup_queries(out)                                       # (..., H, L, d_v)
        lse = ungroup_queries(cache.lse[..., None])[..., 0]              # (..., H, L)
        q, k, v = ungroup_queries(cache.q), cache.k.reshape(k.shape), cache.v.reshape(v.shape)
        return out, FlashCache(q, k, v, out.copy(), lse, cache.mask, cache.is_causal, cache.scale,
                               cache.block_size, groups, bias, cache.window)
    given_shape = None if bias is None else np.shape(bias)
    window = (None, None) if window is None else check_window(window)
    mask, bias, batch = _check_flash(q, k, v, mask, block_size, bias)
    q, k, v = drop_masked(q, k, v, mask)         # masked keys never reach the answer (0 * NaN)
    qs, post = _scaled_q(q, scale)                  # (..., L, d_k): scale q, not every tile
    # A NaN or inf in q, k or v: sum over the attended pairs only (0 * NaN = NaN), see masked_matmul.
    garbage = (mask is not None or is_causal or window != (None, None)) and not all_finite(q, k, v)
    args = (qs, k, v, mask, is_causal, block_size, batch, post, garbage, bias, window)
    with np.errstate(over="ignore", invalid="ignore"):      # caught below, or NaN in, NaN out
        m, l, acc = _forward_tiles(*args, normalized=False)
    redo = None if np.isfinite(acc).all() else ~np.isfinite(acc)
    if redo is not None:
        # acc sums up to S values before the division by l: it may overflow where out does not
        # (v ~ 3e38 in float32). Only then, redo it keeping acc divided by l after every tile.
        with np.errstate(over="ignore", invalid="ignore"):
            _, _, avg = _forward_tiles(*args, normalized=True)

    # A fully masked row has l = 0 and acc = 0: divide by 1 to give out = 0 (the dense path's
    # convention), and give it lse = +inf so that the backward's exp(scores - lse) is 0 there.
    empty = l == 0                                                       # (..., L, 1)
    l[empty] = 1
    with np.errstate(invalid="ignore"):
        out = np.divide(acc, l, out=acc)                                 # (..., L, d_v)
        if redo is not None:
            np.copyto(out, avg, where=redo)
        lse = m + np.log(l)
    lse[empty] = np.inf
    # The cache keeps its own copy of out: the backward's D = rowsum(dout * out) needs it unchanged.
    return out, FlashCache(q, k, v, out.copy(), lse[..., 0], mask, bool(is_causal), scale,
                           int(block_size), 1, None if bias is None else bias.reshape(given_shape),
                           window)


def _forward_tiles(qs, k, v, mask, is_causal, block_size, batch, post, garbage, bias, window,
                   normalized):
    """The online softmax over the key blocks: ``(m, l, acc)``, each (..., L, .).

    ``normalized``: keep ``acc`` divided by the running ``l`` (a weighted average, which cannot
    overflow where ``out`` does not), instead of dividing once at the end.
    """
    *_, L, _ = qs.shape
    S, d_v = v.shape[-2:]
    dtype = qs.dtype
    m = np.full(batch + (L, 1), -np.inf, dtype)     # running max of each row's scores
    l = np.zeros(batch + (L, 1), dtype)             # running sum of exp(scores - m)
    acc = np.zeros(batch + (L, d_v), dtype)         # running sum of exp(scores - m) @ v

    for j0, j1, i0, i1 in _key_blocks(L, S, block_size, is_causal, window):
        rows = np.s_[..., i0:i1, :]
        tile_args = (mask, is_causal, j0, j1, i0, i1, batch, bias, window)
        p = _tile_scores(qs, k, *tile_args, post=post)                   # (..., R, Bk) scores
        allowed = _tile_allowed(qs, k, *tile_args) if garbage else None
        m_new = np.maximum(m[rows], p.max(axis=-1, keepdims=True))      # (..., R, 1)
        # A row that has seen only masked keys has max -inf; shift it by 0 instead, so that
        # exp(-inf - 0) = 0 rather than exp(-inf - (-inf)) = NaN.
        shift = np.where(m_new == -np.inf, dtype.type(0), m_new)        # (..., R, 1)
        p -= shift
        np.exp(p, out=p)                                                 # (..., R, Bk) = exp(s - m_new)
        alpha = np.exp(m[rows] - shift)      # (..., R, 1): corrects what used the old max; 0 at first
        l_old = l[rows] * alpha
        l[rows] = l_old + p.sum(axis=-1, keepdims=True)
        if normalized:                       # acc = (l_old acc + p @ v) / l, a weighted average
            l_safe = np.where(l[rows] == 0, dtype.type(1), l[rows])
            acc[rows] *= l_old / l_safe
            acc[rows] += masked_matmul(p / l_safe, v[..., j0:j1, :], allowed)
        else:
            acc[rows] *= alpha
            acc[rows] += masked_matmul(p, v[..., j0:j1, :], allowed)     # (..., R, d_v)
        m[rows] = m_new
    return m, l, acc


def flash_attention_backward(dout, cache: FlashCache, *, return_dbias: bool = False):
    """Backward of :func:`flash_attention_forward`, block by block (FlashAttention-2's backward).

    Each key block's weights are recomputed from the saved log-sum-exp, ``P = exp(scores - lse)``,
    and used at once; ``dk`` and ``dv`` of a block are complete after its one visit.

    Parameters
    ----------
    dout : (..., L, d_v) gradient w.r.t. ``out``
    cache : FlashCache from the forward pass
    return_dbias : bool
        Also return ``dbias``, the gradient w.r.t. the forward's ``bias``, accumulated block by block.

    Returns
    -------
    dq, dk, dv : each with the shape of its input (broadcast batch dims summed back); the same
        numbers as :func:`sdpa_backward`.
    dbias : the shape of ``bias`` (None without one); only with ``return_dbias=True``
    """
    check_cache(cache, FlashCache, FlashCache.made_by)
    c = cache
    dout = check_dout(dout, c.out.shape, c.out.dtype)
    if c.kv_groups > 1:
        # Regroup (views), run the plain backward; its sum over broadcast dims adds the G query
        # heads of a group into their shared key/value head.
        G = c.kv_groups
        grouped = FlashCache(group_queries(c.q, G), group_kv(c.k), group_kv(c.v),
                             group_queries(c.out, G), group_queries(c.lse[..., None], G)[..., 0],
                             c.mask, c.is_causal, c.scale, c.block_size, 1,
                             group_heads(c.bias, c.q.shape[-3], G, "bias"), c.window)
        dq, dk, dv, dbias = flash_attention_backward(group_queries(dout, G), grouped,
                                                     return_dbias=True)
        grads = dq.reshape(c.q.shape), dk.reshape(c.k.shape), dv.reshape(c.v.shape)
        if not return_dbias:
            return grads
        return (*grads, None if dbias is None else dbias.reshape(c.bias.shape))
    L, S = c.q.shape[-2], c.k.shape[-2]
    batch = c.out.shape[:-2]
    scale = c.q.dtype.type(c.scale)
    qs, post = _scaled_q(c.q, c.scale)                                   # (..., L, d_k)
    lse = c.lse[..., None]                                               # (..., L, 1)
    # As in the forward: with a NaN or inf in an input, sum over the attended pairs only.
    garbage = ((c.mask is not None or c.is_causal or c.window != (None, None))
               and not all_finite(c.q, c.k, c.v, dout))
    ignore = "ignore" if garbage else None
    # rowsum(dP * P) = rowsum(dout * out), because out = P @ v: FlashAttention-2's D.
    D = (dout * c.out).sum(axis=-1, keepdims=True)                       # (..., L, 1)
    dq = np.zeros(batch + c.q.shape[-2:], c.q.dtype)
    dk = np.zeros(batch + c.k.shape[-2:], c.k.dtype)
    dv = np.zeros(batch + c.v.shape[-2:], c.v.dtype)
    bias = None if c.bias is None else _check_flash(c.q, c.k, c.v, None, 1, c.bias)[1]  # >= 2-D
    dbias = None if bias is None else np.zeros(bias.shape, c.q.dtype)

    for j0, j1, i0, i1 in _key_blocks(L, S, c.block_size, c.is_causal, c.window):
        rows, cols = np.s_[..., i0:i1, :], np.s_[..., j0:j1, :]
        tile_args = (c.mask, c.is_causal, j0, j1, i0, i1, batch, bias, c.window)
        a = _tile_allowed(c.q, c.k, *tile_args) if garbage else None
        a_T = transpose_mask(a)
        with np.errstate(invalid=ignore, over=ignore):
            # forward: P = softmax(scores) = exp(scores - lse)   (recomputed, never stored)
            P = _tile_scores(qs, c.k, *tile_args, post=post)             # (..., R, Bk)
            P -= lse[rows]
            np.exp(P, out=P)
            # forward: out = P @ v  ->  dv = P.T @ dout,  dP = dout @ v.T
            dv[cols] = masked_matmul(np.swapaxes(P, -1, -2), dout[rows], a_T)  # (..., Bk, d_v)
            dP = zero_masked(dout[rows] @ np.swapaxes(c.v[cols], -1, -2), a)  # (..., R, Bk)
            # forward: P = softmax(scores)  ->  dscores = P * (dP - D)
            dP -= D[rows]
            dP *= P
            if dbias is not None:
                # forward: scores = ... + bias  ->  dbias = dscores, summed where bias broadcast
                block = tile(dbias, i0, i1, j0, j1)                     # a view into dbias
                block += sum_to_shape(dP, block.shape)
            # forward: scores = (q * scale) @ k.T  ->  dq = dscores @ k * scale,
            #                                          dk = dscores.T @ (q * scale)
            dq[rows] += masked_matmul(dP, c.k[cols], a)                  # (..., R, d_k)
            dk[cols] = masked_matmul(np.swapaxes(dP, -1, -2), qs[rows], a_T)  # (..., Bk, d_k)

    if post is not None:
        dk *= post                           # q * scale overflowed: dk was dscores.T @ q
    dq *= scale
    grads = sum_to_shape(dq, c.q.shape), sum_to_shape(dk, c.k.shape), sum_to_shape(dv, c.v.shape)
    if not return_dbias:
        return grads
    return (*grads, None if dbias is None else dbias.reshape(c.bias.shape))
