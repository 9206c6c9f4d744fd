r"""The forward of the tiled path (:mod:`attention_np.kernels.tiled` explains the algorithm):
an online softmax over the key blocks, keeping ``out`` and the per-row log-sum-exp only.

An attention sink (gpt-oss, :mod:`attention_np.kernels.sink_logits`) is one more term ``e^{s_n}`` in every
row's softmax denominator, with value 0. The online softmax *starts* from it instead of from
nothing: running max ``m = s_n``, running sum ``l = e^{s_n - m} = 1``, accumulator ``acc = 0``; no
key column is appended. The blocks then update ``m``, ``l``, ``acc`` as usual, and ``lse = m +
log l`` includes the sink.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_np._checks import as_bias, as_bool_mask, check_qkv
from attention_np.kernels.batch_split import map_slices, shared, slices
from attention_np.kernels.guard import all_finite, drop_masked, masked_matmul
from attention_np.kernels.plan import Plan, plan_from
from attention_np.kernels.scratch import append_column, carve, scratch
from attention_np.kernels.sink_logits import check_sinks
from attention_np.kernels.tiles import Tiling, check_tiled, scaled_q, tile_allowed, tile_scores
from attention_np.variants.gqa import group_heads, group_kv, group_queries, kv_groups, ungroup_queries
from attention_np.variants.softcap import check_softcap
from attention_np.variants.spec import refuse_elsewhere
from attention_np.variants.window import check_window


@dataclass(frozen=True, kw_only=True)
class FlashCache:
    """What :func:`~attention_np.kernels.tiled.flash_attention_backward` needs: the inputs,
    ``out`` and the log-sum-exp. Keyword-only, as every field is named.

    Attributes
    ----------
    q, k, v : the inputs
    out : (..., L, d_v) the output
    lse : (..., L) log-sum-exp of each query row's scores (and its sink), ``+inf`` for a fully
        masked row without a sink
    mask : the bool mask as given (broadcastable to (..., L, S); regrouped with ``enable_gqa``), or None
    is_causal, scale, block_size : as passed to the forward
    kv_groups : query heads per key/value head, ``H / H_kv`` (1 without grouped-query attention)
    window : ``(left, right)`` of the sliding window, ``(None, None)`` without one
    bias : the float bias as given (broadcastable to (..., L, S), in the dtype of ``q``), or None
    softcap : the cap ``c`` of ``c·tanh(QKᵀ·scale / c)``, or None (the tanh is recomputed per tile)
    sinks : (h,) the sink logits in the dtype of ``q``, or None
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    out: np.ndarray
    lse: np.ndarray
    mask: np.ndarray | None = None
    is_causal: bool = False
    scale: float
    block_size: int = 128
    kv_groups: int = 1
    bias: np.ndarray | None = None
    window: tuple = (None, None)
    softcap: float | None = None
    sinks: np.ndarray | None = None

    made_by = "attention_np.flash_attention_forward (attention_np.kernels.tiled)"


def flash_attention_forward(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None,
                            block_size: int = 128, sinks=None, spec=None, **elsewhere):
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
    sinks : float (h,), optional
        Attention sinks, as in :func:`attention_np.sdpa_sinks_forward`: the initial state of each
        row's online softmax (``q`` needs a head axis, ``(..., h, L, d_k)``).
    spec : AttentionSpec, optional
        ``spec.window`` (sliding-window attention: applied per tile, and the key blocks and
        query rows outside every window are skipped), ``spec.softcap`` (per tile, before the
        bias and the mask) and ``spec.enable_gqa`` (grouped-query attention: ``k``, ``v`` may
        have ``H_kv`` heads, ``H % H_kv == 0``; query head ``n`` uses key/value head
        ``n // (H / H_kv)``), as in :func:`sdpa_forward`. ``spec.dropout_p`` is refused.
    **elsewhere
        Nothing: an option whose home is the spec is a ``TypeError`` naming it.

    Returns
    -------
    out : (..., L, d_v)
        A fully masked query row gives 0, as in :func:`sdpa_forward`.
    cache : FlashCache
        ``q, k, v, out`` and the per-row log-sum-exp ``lse`` (..., L): nothing of size L·S.
    """
    refuse_elsewhere("flash_attention_forward", elsewhere)
    if spec is not None and getattr(spec, "kernel", "tiled") not in ("fused", "tiled"):
        raise ValueError(f"flash_attention_forward is the tiled kernel: spec.kernel={spec.kernel!r} "
                         f"runs through attention_np.mha_forward")
    plan = plan_from("flash_attention_forward", spec, q, k, mask, bias=bias, is_causal=is_causal,
                     scale=scale, sinks=sinks)
    return tiled_plan(q, k, v, plan, block_size)


def tiled_plan(q, k, v, plan: Plan, block_size: int = 128):
    """:func:`flash_attention_forward` for a :class:`~attention_np.kernels.plan.Plan` (the kernel
    registry's entry).

    Grouped-query attention is the one step around the walk over the tiles (query heads grouped
    ``(..., H_kv, G, L, d)``, ``k`` and ``v`` broadcast over G, as in ``sdpa_forward``); every
    other option is a field of the :class:`~attention_np.kernels.tiles.Tiling` each tile reads.

    Parameters
    ----------
    q : (..., L, d_k)
    k : (..., S, d_k)
    v : (..., S, d_v)
    plan : Plan, the call's options (:class:`~attention_np.kernels.plan.Plan`)
    block_size : int, keys per tile
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a attention_np.kernels.plan.Plan, got {type(plan).__name__}")
    if plan.dropout_p:
        raise ValueError("the tiled kernel has no attention dropout: use the fused kernel")
    q, k, v, scale = check_qkv(q, k, v, plan.scale)
    sink = None if plan.sinks is None else check_sinks(plan.sinks, q).astype(q.dtype)
    given = None if plan.bias is None else as_bias(plan.bias).astype(q.dtype, copy=False)
    tiling = Tiling(is_causal=bool(plan.is_causal), block_size=block_size,
                    window=(None, None) if plan.window is None else check_window(plan.window),
                    softcap=check_softcap(plan.softcap), dropped=plan.prepared)
    mask, bias, sink_rows = plan.mask, given, None if sink is None else sink[:, None, None]
    groups = kv_groups(q, k, v) if plan.enable_gqa else 1
    if groups > 1:
        H = q.shape[-3]
        mask = group_heads(None if mask is None else as_bool_mask(mask), H, groups, "mask")
        bias, sink_rows = group_heads(given, H, groups, "bias"), group_heads(sink_rows, H, groups,
                                                                            "sinks")
        q_, k_, v_ = group_queries(q, groups), group_kv(k), group_kv(v)
    else:
        q_, k_, v_ = q, k, v
    q_, k_, v_, tiling = checked(q_, k_, v_, tiling=tiling, mask=mask, bias=bias)
    out, lse = attend(q_, k_, v_, sink=sink_rows, scale=scale, tiling=tiling)
    if groups > 1:
        out, lse = ungroup_queries(out), ungroup_queries(lse[..., None])[..., 0]   # (..., H, L, .)
        q_ = ungroup_queries(q_)
    # The cache keeps its own copy of out: the backward's D = rowsum(dout * out) needs it unchanged.
    return out, FlashCache(q=q_, k=k_.reshape(k.shape), v=v_.reshape(v.shape), out=out.copy(),
                           lse=lse, mask=tiling.mask, is_causal=tiling.is_causal, scale=scale,
                           block_size=int(block_size), kv_groups=groups, bias=given,
                           window=tiling.window, softcap=tiling.softcap, sinks=sink)


def checked(q, k, v, *, tiling: Tiling, mask, bias) -> tuple:
    """``q, k, v`` with masked positions zeroed and ``tiling`` with the checked mask and bias and
    the batch shape (on checked and, with grouped-query attention, grouped inputs; a prepared
    plan's mask is taken as built and its inputs were zeroed by the caller: ``tiling.dropped``)."""
    mask, bias, batch = check_tiled(q, k, v, mask, tiling.block_size, bias, built=tiling.dropped)
    if not tiling.dropped:                       # masked keys never reach the answer (0 * NaN)
        q, k, v = drop_masked(q, k, v, mask)
    return q, k, v, replace(tiling, mask=mask, bias=bias, batch=batch)


def attend(q, k, v, *, sink, scale, tiling: Tiling):
    """The tiled forward on :func:`checked` inputs: ``out (..., L, d_v)`` and ``lse (..., L)``.

    ``sink`` is None or the sink logits broadcastable to the rows ``(..., L, 1)``; ``tiling``
    holds the mask, bias, causal flag, window, soft-cap, block size and batch shape.
    """
    qs, post = scaled_q(q, scale)                   # (..., L, d_k): scale q, not every tile
    # A NaN or inf in q, k or v: sum over the attended pairs only (0 * NaN = NaN), see masked_matmul.
    garbage = ((tiling.mask is not None or tiling.is_causal or tiling.window != (None, None))
               and not all_finite(q, k, v))
    t = replace(tiling, post=post, garbage=garbage)
    with np.errstate(over="ignore", invalid="ignore"):      # caught below, or NaN in, NaN out
        m, l, acc = tiles_on_threads(t, qs, k, v, sink, normalized=False)
    redo = None if np.isfinite(acc).all() else ~np.isfinite(acc)
    if redo is not None:
        # acc sums up to S values before the division by l: it may overflow where out does not
        # (v ~ 3e38 in float32). Only then, redo it keeping acc divided by l after every tile.
        with np.errstate(over="ignore", invalid="ignore"):
            _, _, avg = tiles_on_threads(t, qs, k, v, sink, normalized=True)

    # A fully masked row (without a sink) has l = 0 and acc = 0: divide by 1 to give out = 0 (the
    # dense path's convention), and give it lse = +inf so that the backward's exp(scores - lse) is 0.
    empty = l == 0                                                       # (..., L, 1)
    l[empty] = 1
    with np.errstate(invalid="ignore"):
        out = np.divide(acc, l, out=acc)                                 # (..., L, d_v)
        if redo is not None:
            np.copyto(out, avg, where=redo)
        lse = m + np.log(l)
    lse[empty] = np.inf
    return out, lse[..., 0]


def tiles_on_threads(t: Tiling, qs, k, v, sink, *, normalized: bool):
    """:func:`forward_tiles`, the batch entries (heads) shared out to the worker threads when
    there are several of both and the mask and bias are the same for every entry (no sinks)."""
    mask1, bias1 = shared(t.mask), shared(t.bias)
    entries = int(np.prod(t.batch, dtype=np.int64)) * qs.shape[-2] * k.shape[-2]
    varies = mask1 is t.mask is not None or bias1 is t.bias is not None   # differs along the batch
    if len(slices(t.batch, entries)) < 2 or sink is not None or varies:
        return forward_tiles(t, qs, k, v, sink, normalized=normalized)
    return map_slices(lambda qs, k, v, sub: forward_tiles(
        replace(t, mask=mask1, bias=bias1, batch=sub), qs, k, v, None, normalized=normalized),
        t.batch, (qs, k, v), entries)


def forward_tiles(t: Tiling, qs, k, v, sink, *, normalized: bool):
    """The online softmax over the key blocks: ``(m, l, acc)``, each (..., L, .).

    ``normalized``: keep ``acc`` divided by the running ``l`` (a weighted average, which cannot
    overflow where ``out`` does not), instead of dividing once at the end.
    """
    *_, L, _ = qs.shape
    S, d_v = v.shape[-2:]
    dtype, batch = qs.dtype, t.batch
    m = np.full(batch + (L, 1), -np.inf, dtype)     # running max of each row's scores
    l = np.zeros(batch + (L, 1), dtype)             # running sum of exp(scores - m)
    acc = np.zeros(batch + (L, d_v), dtype)         # running sum of exp(scores - m) @ v
    if sink is not None:
        # the sink is the first "key" every row has seen: score s_n, exp(s_n - m) = 1, value 0;
        # a sink of -inf is no term at all (l = 0): a row that then sees no key stays empty,
        # as the fast lane, which adds to l as it stands, and rows no block visits rely on
        m[...] = sink
        l[...] = sink > -np.inf
    work = scratch("tile 1", (np.prod(batch + (L, min(t.block_size, S)), dtype=np.int64),), dtype)
    # work: every tile's scores in turn, (..., R, Bk) at most (..., L, block_size)
    lazy = None
    if t.softcap is None and t.post is None and not t.garbage and not normalized:
        lazy = LazyShift(qs, k, v, m, batch, blocks=-(-S // t.block_size))

    for block in t.blocks(L, S):
        j0, j1, i0, i1 = block
        rows = np.s_[..., i0:i1, :]
        if lazy is not None and lazy.add_tile(l, acc, t, block, rows, work):
            continue
        p, _ = tile_scores(qs, k, t, block, post=t.post, softcap=t.softcap, work=work)  # (..., R, Bk)
        allowed = tile_allowed(qs, k, t, block) if t.garbage else None
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
        if lazy is not None:
            lazy.moved(m, rows)
    return m, l, acc


class LazyShift:
    r"""The online softmax's fast lane: a tile shifted by the running max ``m`` as it stands,
    with the shift and the row sums done inside the two matrix products.

    The shift of ``exp(s - m)`` need not be the max: any ``m`` gives the same ``out = acc / l``
    and ``lse = m + log l``, as long as no ``exp`` overflows (and one term of the row is not
    lost to underflow, which the first visit of each row, by the exact update, guarantees). So
    a tile whose scores stay below ``m + log(big)`` is added without its max, without a
    rescale of ``acc`` and ``l``, and with neither the subtraction nor the row sum as a pass of
    its own (FlashAttention-4 likewise rescales only when the max has risen enough to matter, as
    described in Modal's reverse-engineering of it; it still computes each tile's max, which this
    lane leaves out, reading an overflow from the row sums instead):

    .. math:: [q\cdot\text{scale},\ -m]\,[k,\ 1]^\top = s - m

    .. math:: e^{s - m}\,[v,\ 1] = [e^{s - m} v,\ \textstyle\sum_j e^{s_j - m}]

    A tile goes through the exact update instead (which then moves ``m``) when no row of it has
    seen a key yet (every ``m = -inf``), or when some row's ``sum_j e^{s_j - m}`` exceeds ``big``
    (``sqrt`` of the dtype's largest number over the number of key blocks: its scores rose more
    than ``44 - ln(blocks)`` nats above ``m`` in float32, ``354 - ln(blocks)`` in float64) or is
    NaN or inf (a row that meets its first key here, whose ``-m`` is ``+inf``, gives ``+inf``).
    So ``l``, which gains at most ``big`` per tile, stays below ``sqrt`` of the largest number
    whatever the number of blocks (in float16, whose ``sqrt(max)`` is 256, a few hundred tiles
    of ``sqrt(max)`` each overflowed it); if ``acc`` overflows, with huge values, the forward
    redoes it.
    """

    def __init__(self, qs, k, v, m, batch, blocks: int):
        # qs (..., L, d_k), k (..., S, d_k), v (..., S, d_v); m (*batch, L, 1) the running max;
        # blocks: how many key blocks the forward walks at most
        q_all = np.broadcast_to(qs, batch + qs.shape[-2:])
        self.q_m = append_column(q_all, -m, "rows 1")                    # (*batch, L, d_k + 1)
        self.k_1 = append_column(k, k.dtype.type(1), "keys 1")           # (..., S, d_k + 1)
        self.v_1 = append_column(v, v.dtype.type(1), "keys 2")           # (..., S, d_v + 1)
        self.pv_work = scratch("rows 2", (self.q_m[..., 0].size * self.v_1.shape[-1],), qs.dtype)
        self.big = np.sqrt(np.finfo(qs.dtype).max) / max(1, blocks)

    def add_tile(self, l, acc, t: Tiling, block: tuple, rows, work) -> bool:
        """Add a tile's ``exp(s - m)`` into ``l`` and ``acc`` (its scores in ``work``); False
        (nothing changed) when the exact update must do it."""
        if (self.q_m[rows][..., -1:] == np.inf).all():       # -m = +inf: no row has seen a key
            return False
        # inf and NaN are expected here (a row's first keys, -inf bias): they send the tile to the
        # exact update. Silenced here, not by the caller: NumPy's error state is per thread.
        with np.errstate(over="ignore", invalid="ignore"):
            p, _ = tile_scores(self.q_m, self.k_1, t, block, work=work)   # (..., R, Bk) = s - m
            np.exp(p, out=p)
            v_1 = self.v_1[..., block[0]:block[1], :]
            # pv (..., R, d_v + 1) = [p @ v, rowsum p]
            pv = np.matmul(p, v_1, out=carve(self.pv_work, p.shape[:-1] + v_1.shape[-1:]))
        row_sum = pv[..., -1:]                               # (..., R, 1)
        if not (row_sum <= self.big).all():                  # NaN, inf, or a score far above m
            return False
        acc[rows] += pv[..., :-1]
        l[rows] += row_sum
        return True

    def moved(self, m, rows):
        """The exact update moved ``m`` in ``rows``: shift the later tiles by the new max."""
        self.q_m[rows][..., -1:] = -m[rows]
