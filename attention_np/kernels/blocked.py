r"""Eq. (1), blocked: the fused path walking blocks of query rows, on every core.

Read :mod:`attention_np.kernels.reference` (the reference kernel) and :mod:`attention_np.kernels.fused` first.
This file changes only the *order* in which the fused path's numbers are computed, and where it
may, the constant each row's exponentials are shifted by (:func:`small_scores`): never the
weights' formulas, and the tests hold it equal to the reference kernel to float64 rounding.

Why. Every elementwise pass of NumPy runs on one core, while its ufuncs and matrix products
release the GIL. Here the query rows are cut into blocks (``BLOCK_ELEMENTS`` score entries, at
most ``MAX_ROWS`` rows): each block goes through ``q @ k.T``, the mask, the exp and ``@ v``, and
the blocks are shared out to a pool of threads, with BLAS on one thread per worker so that the
two levels of threads do not fight over the cores. (Blocks that fit a core's cache were measured
slower than whole heads on one thread: their products are smaller.)

More savings fall out of blocking:

- a block reads only the **span of keys** that some row of it may attend: under a causal mask the
  block of rows ``i:j`` needs keys ``0:j`` only (about half the work), under a sliding window a
  band, under padding the unpadded keys;
- a block whose scores are provably small (``|q_i| |k_j| |scale|`` below half the log of the
  dtype's largest number) takes ``exp`` of its scores as they are: the row max and the
  subtraction, two passes over the block, are not needed for the weights ``e / l``;
- the backward walks the same blocks. Each worker sums its own ``dk`` and ``dv`` (rows of
  different blocks share keys), and the few partial sums are added at the end.

The cache is the fused path's :class:`~attention_np.kernels.fused.SDPACache`. Its ``e`` holds each
block's span of keys alone, the blocks one after another, each C-contiguous (:func:`packed`): a
causal forward keeps about half of the ``(L, S)`` numbers, and each block's exp runs over
contiguous memory (a strided one took 1.4x as long per entry). ``cache.weights`` and
``cache.exp_scores`` unpack it to ``(..., L, S)``, 0 outside the spans (the fused path's
``exp(-inf)``, :func:`spans`), so that every caller sees the same thing. Used by
:func:`attention_np.sdpa_forward` when there is no dropout and the scores are big enough
(``MIN_ELEMENTS``) to gain from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_np.kernels import recycled
from attention_np.kernels.batch_split import flat, slices
from attention_np.kernels.guard import all_finite, masked_matmul, tile
from attention_np.kernels.row_sums import rows_product
from attention_np.kernels.scores import overflowed, scaled_scores
from attention_np.kernels.scratch import append_column, scratch
from attention_np.kernels.softmax_inplace import softmax_numerator_, softmax_numerator_with_sink_
from attention_np.kernels.threads import deal, num_threads, parallel_map

#: Score entries per block (all of a worker's heads): 2**23, 32 MiB in float32, a whole
#: (8, 1024, 1024) head group at once. Far past any core's cache, yet faster than cache-sized
#: blocks, whose products are smaller (measured at (1, 8, 1024, 64) float32, one thread, CPU time,
#: on a loaded machine, with e packed per block, two runs each against 2**21: dense forward 1.34x,
#: 1.12x, 1.00x, 0.95x the time at 2**19, 2**20, 2**21, 2**23 entries; forward+backward 1.18x,
#: 1.07x, 1.00x, 0.93x; 2026-12-01).
BLOCK_ELEMENTS = 1 << 23
#: At most this many query rows per block. The backward's ``dk`` and ``dv`` sum over the query
#: rows in 64-row chunks whatever the block (:mod:`attention_np.kernels.row_sums`: one 256-row
#: product gave 2.13x PyTorch's float32 dv error in benchmarks/float32_accuracy.py, the chunks
#: 1.05x); bigger blocks mean fewer, bigger products.
MAX_ROWS = 1024
#: At most this many query rows per block under a mask. A causal block of rows ``i:j`` reads keys
#: ``0:j``: the square on the diagonal is half wasted, ``1 / blocks`` of the work. Measured at
#: (1, 8, 1024, 64) float32, one thread, CPU time on a loaded machine, causal forward over torch's:
#: 1.35x at 64 rows, 1.20x at 128, 1.24x at 256 (forward+backward 91, 88, 85 ms: a wash).
MASKED_ROWS = 128
#: Below this many score entries (all batch dims), one block on the calling thread.
MIN_ELEMENTS = 1 << 17


def wanted(q, k, mask, *, bias, softcap, dropout_p, dropout_mask) -> bool:
    """Whether :func:`attention_np.sdpa_forward` takes this path: at least ``MIN_ELEMENTS`` score
    entries, and no dropout, bias or soft-capping (plain Eq. (1) with a mask, and attention sinks)."""
    if dropout_p > 0 or dropout_mask is not None or bias is not None or softcap is not None:
        return False
    n = int(np.prod(_batch(q, k, mask), dtype=np.int64)) * q.shape[-2] * k.shape[-2]
    return n >= MIN_ELEMENTS


def blocks_for(q, k, mask) -> tuple:
    """``mask, blocks``: the mask (bool or None) with at least two dims, as the backward reads it,
    and :func:`plan`'s blocks for these inputs on :func:`num_threads` workers."""
    if mask is not None and mask.ndim < 2:
        mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)        # (..., L or 1, S or 1)
    n = int(np.prod(_batch(q, k, mask), dtype=np.int64))
    workers = num_threads()
    parts = max(1, min(n, workers))                         # batch slices (kernels/batch_split.py)
    per_worker = -(-n // parts)                             # batch entries in one unit of work
    # fewer batch slices than workers (one head, say): at least enough row blocks to give every
    # worker one, so that the products run on every core (each on one BLAS thread) rather than
    # on the calling thread alone
    return mask, plan((per_worker,), q.shape[-2], k.shape[-2], mask, min_blocks=-(-workers // parts))


def _batch(q, k, mask) -> tuple:
    """The scores' batch shape."""
    return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], () if mask is None else mask.shape[:-2])


def plan(batch: tuple, L: int, S: int, mask, min_blocks: int = 1) -> list[tuple[int, int, int, int]]:
    """Cut the query rows into blocks: ``[(i, j, j0, j1), ...]``, rows ``i:j`` read keys ``j0:j1``.

    ``batch`` is the scores' batch shape; ``mask`` is bool broadcastable to ``(*batch, L, S)``
    (True = may attend) or None. A block whose rows may attend no key gets ``j0 = j1``. At least
    ``min_blocks`` blocks when there are that many rows.
    """
    n = int(np.prod(batch, dtype=np.int64))
    cap = MAX_ROWS if mask is None else min(MAX_ROWS, MASKED_ROWS)
    rows = max(1, min(L, cap, BLOCK_ELEMENTS // max(1, n * S), -(-L // max(1, min_blocks))))
    blocks = []
    for i in range(0, L, rows):
        j = min(L, i + rows)
        if mask is None or S == 0:
            blocks.append((i, j, 0, S))
            continue
        m = tile(mask, i, j, 0, S)
        seen = np.broadcast_to(m, m.shape[:-1] + (S,)).reshape(-1, S).any(axis=0)   # (S,)
        hit = np.flatnonzero(seen)
        blocks.append((i, j, int(hit[0]), int(hit[-1]) + 1) if hit.size else (i, j, 0, 0))
    return blocks


@dataclass(frozen=True, kw_only=True)
class Walk:
    """The arrays of one blocked call, each seen with one batch axis, ``(N, ., .)`` (views; None
    when absent), and what every unit of work shares: what :func:`forward_block` and
    :func:`backward_block` read and write."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    e: dict                                 # each block's span of e, (N, rows, keys), by block
    l: np.ndarray
    out: np.ndarray
    mask: np.ndarray | None = None
    sink: np.ndarray | None = None          # (N, 1, 1) the sink logits
    p_sink: np.ndarray | None = None        # (N, L, 1) the sink's weights (forward)
    dout: np.ndarray | None = None          # (backward)
    dq: np.ndarray | None = None            # (backward)
    v1: np.ndarray | None = None            # (N, S, d_v + 1) v with a column of ones (backward)
    q_norm: np.ndarray | None = None        # (N, L) |q_i| * |scale|, or None: always shift
    k_norm: np.ndarray | None = None        # (N, S) |k_j|
    bound: float = 0.0                      # scores below this need no shift by the row max
    scale: object = 1.0
    garbage: bool = False                   # an input is NaN or inf under a mask


def walk(batch: tuple, *, e: dict, scale, garbage: bool, **arrays) -> Walk:
    """A :class:`Walk` of ``arrays`` (each broadcastable to ``(*batch, ., .)``, or None) and of
    the blocks' spans of ``e`` (:func:`packed`)."""
    return Walk(e=e, scale=scale, garbage=garbage,
                **{name: None if x is None else flat(x, batch) for name, x in arrays.items()})


def packed_size(batch: tuple, blocks) -> int:
    """Entries of ``e`` as the blocked path keeps it: each block's span of keys alone."""
    n = int(np.prod(batch, dtype=np.int64))
    return sum(n * (j - i) * (j1 - j0) for i, j, j0, j1 in blocks)


def packed(e, blocks, batch: tuple, full: tuple | None = None) -> dict:
    """Each block's span of ``e`` (a flat buffer holding the blocks one after another, each a
    C-contiguous ``(*batch, rows, keys)``), by block, seen as ``(N, rows, keys)`` over the batch
    ``full`` (``batch`` broadcast to it; ``batch`` itself by default)."""
    n = int(np.prod(batch, dtype=np.int64))
    views, at = {}, 0
    for block in blocks:
        i, j, j0, j1 = block
        size = n * (j - i) * (j1 - j0)
        views[block] = flat(e[at:at + size].reshape(batch + (j - i, j1 - j0)), full or batch)
        at += size
    return views


def forward(q, k, v, *, mask, scale, blocks, sink=None):
    """The blocked forward: ``out, e, l, p_sink`` as :func:`attention_np.kernels.fused.sdpa_plan`
    makes them.

    ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)``, ``mask`` bool broadcastable to
    the scores or None; ``scale`` the factor of ``QKᵀ`` (applied by
    :func:`~attention_np.kernels.scores.scaled_scores`, with its overflow fallback). Returns
    ``out (..., L, d_v)``, ``e`` (``exp(scores - c)`` on each block's span of keys, packed by
    :func:`packed`; 0 on masked keys; ``c`` the row max, or 0 where :func:`small_scores`) and
    ``l (..., L, 1)`` (its row sums, 1 on rows that attend nothing). ``sink``, the
    attention sinks' logits broadcastable to ``(..., 1, 1)``, or None, joins each row's max and
    sum (:func:`~attention_np.kernels.softmax_inplace.softmax_numerator_with_sink_`); its weight
    per row is ``p_sink (..., L, 1)`` (None without a sink).
    """
    L = q.shape[-2]
    batch = _batch(q, k, mask)
    # e keeps each block's span of keys alone (packed): the cache's readers see 0 elsewhere
    # (spans). Its memory is the last call's e when no one holds that any more (kernels/recycled.py).
    e = recycled.empty((packed_size(batch, blocks),), q.dtype)            # the spans (packed)
    l = np.ones(batch + (L, 1), q.dtype)                                   # (..., L, 1)
    out = np.empty(np.broadcast_shapes(batch, v.shape[:-2]) + (L, v.shape[-1]), q.dtype)
    p_sink = None if sink is None else np.empty(batch + (L, 1), q.dtype)  # (..., L, 1)
    # A NaN or inf under a mask: sum over the attended pairs only (masks.masked_matmul), as the
    # fused path does; a masked pair's 0 * NaN would otherwise reach rows that never see it.
    w = walk(batch, e=packed(e, blocks, batch), scale=scale,
             garbage=mask is not None and not all_finite(q, k, v), q=q, k=k, v=v, mask=mask, l=l,
             out=out, p_sink=p_sink,
             sink=None if sink is None else np.broadcast_to(sink, batch + (1, 1)))
    if sink is None and not w.garbage:
        w = replace(w, **norms(w.q, w.k, scale))
    parallel_map(lambda my_units: [forward_block(w, b, block) for b, block in my_units],
                 deal(units(batch, blocks), num_threads()))
    return out, e, l, p_sink


def norms(q, k, scale) -> dict:
    """The rows' and keys' norms a block needs to tell whether its scores are small (see
    :func:`small_scores`): ``q_norm`` (N, L) ``|q_i|·|scale|``, ``k_norm`` (N, S) ``|k_j|``, and
    ``bound``, half the log of the dtype's largest number (44 in float32, 354 in float64): below
    it, ``exp`` of a score neither overflows (nor does a row's sum of S of them) nor, for a row's
    largest term, comes near the subnormal numbers."""
    with np.errstate(over="ignore", invalid="ignore"):   # huge inputs: inf norms, always shift
        q_norm = np.sqrt(np.einsum("nid,nid->ni", q, q)) * abs(float(scale))
        k_norm = np.sqrt(np.einsum("njd,njd->nj", k, k))
    return {"q_norm": q_norm, "k_norm": k_norm, "bound": 0.5 * float(np.log(np.finfo(q.dtype).max))}


def forward_block(w: Walk, b: slice, block: tuple) -> None:
    """One unit of the forward: rows ``i:j`` of the batch entries ``b`` against keys ``j0:j1``,
    written into ``w.e``, ``w.l``, ``w.out`` (and ``w.p_sink``)."""
    i, j, j0, j1 = block
    rows, keys = slice(i, j), slice(j0, j1)
    out = w.out[b]
    if j0 == j1:                         # rows that attend nothing: e = 0, l = 1, out = 0
        out[..., rows, :] = 0
        if w.sink is not None:           # all the weight on the sink (0 if it is -inf)
            _, lb, es = softmax_numerator_with_sink_(w.e[block][b], w.sink[b])
            w.p_sink[b][..., rows, :] = es / lb
        return
    m = None if w.mask is None else tile(w.mask[b], i, j, j0, j1)
    s = w.e[block][b]                    # the block's scores, written where e keeps them
    with np.errstate(invalid="ignore" if w.garbage else None):          # inf - inf: NaN, as IEEE
        scaled_scores(w.q[b][..., rows, :], w.k[b][..., keys, :], w.scale, out=s)   # (..., rows, keys)
        mask_block(s, m)
        if w.sink is not None:
            eb, lb, es = softmax_numerator_with_sink_(s, w.sink[b])
            w.p_sink[b][..., rows, :] = es / lb
        elif small_scores(w, b, rows, keys):
            eb, lb = exp_unshifted_(s)
        else:
            eb, lb = softmax_numerator_(s)                                 # in place: eb is s
    block_values(eb, lb, w.v[b][..., keys, :], out[..., rows, :], m if w.garbage else None)
    w.l[b][..., rows, :] = lb


def mask_block(s, m) -> None:
    """``-inf`` in the block's scores ``s`` where its mask ``m`` is False (None: nothing masked),
    written over the span of keys that some row of the block masks only (under a causal mask, the
    square on the diagonal)."""
    if m is None:
        return
    # one entry of each axis the mask is broadcast along (stride 0): the same for all of them
    m = m[tuple(slice(0, 1) if st == 0 else slice(None) for st in m.strides)]
    partial = np.flatnonzero(~m.all(axis=tuple(range(m.ndim - 1))))     # keys some row masks
    if partial.size == 0:
        return
    cols = slice(partial[0], partial[-1] + 1) if m.shape[-1] > 1 else slice(None)
    np.copyto(s[..., cols], -np.inf, where=~m[..., cols])


def small_scores(w: Walk, b: slice, rows: slice, keys: slice) -> bool:
    """Whether every score of the block is known to lie within ``w.bound`` of 0, by
    Cauchy-Schwarz: ``|q_i·k_j·scale| <= |scale|·|q_i|·|k_j|``, from the rows' and keys' norms."""
    if w.q_norm is None:
        return False
    return float(w.q_norm[b, rows].max()) * float(w.k_norm[b, keys].max()) <= w.bound   # inf * 0: NaN, False


def exp_unshifted_(s) -> tuple:
    """``exp(s)`` in place and its row sums (1 for a row of ``-inf``): the softmax's numerator
    with no shift by the row max, for scores small enough that no ``exp`` can overflow, nor the
    largest of a row underflow (:func:`small_scores`). The weights ``e / l`` are the same; the
    max and the subtraction, two passes over the block, are saved."""
    np.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    total[total == 0] = 1
    return s, total


def block_values(eb, lb, vb, ob, g) -> None:
    """``ob = (eb @ vb) / lb``, ``(..., rows, d_v)``, summed over the attended pairs ``g`` alone
    when given; redone as ``(eb / lb) @ vb`` where ``eb @ vb`` overflowed before its division."""
    with np.errstate(over="ignore", invalid="ignore"):   # caught and redone below
        np.matmul(eb, vb, out=ob) if g is None else np.copyto(ob, masked_matmul(eb, vb, g))
        ob /= lb
    if not np.isfinite(ob).all():
        with np.errstate(invalid="ignore"):   # e @ v overflowed before the division
            np.copyto(ob, masked_matmul(eb / lb, vb, g), where=~np.isfinite(ob))


def backward(q, k, v, *, e, l, out, dout, scale, blocks, mask=None):
    """The blocked backward (no dropout): full-batch ``dq, dk, dv`` before summing to the inputs.

    Same formulas as :func:`attention_np.sdpa_backward`, block by block; the caller sums each
    gradient back to its input's shape. ``scale`` is in the inputs' dtype; ``mask`` is the
    forward's (used only when an input is NaN or inf, as in the fused path).
    """
    full = np.broadcast_shapes(l.shape[:-2], dout.shape[:-2])
    garbage = mask is not None and not all_finite(q, k, v, dout)
    dq = np.zeros(full + q.shape[-2:], q.dtype)
    # v with a column of ones, (N, S, d_v + 1): [dout_l, -D_l] @ [v, 1].T = dout_l @ v.T - D_l,
    # the softmax backward's subtraction done inside the product instead of one more (L, S) pass.
    w = walk(full, e=packed(e, blocks, l.shape[:-2], full), scale=scale, garbage=garbage, q=q, k=k,
             v=v, l=l, out=out, dout=dout, dq=dq,
             mask=mask if garbage else None)
    w = replace(w, v1=append_column(w.v, w.v.dtype.type(1), "keys 2"))          # (N, S, d_v + 1)

    def work(my_units):
        dk_all = np.zeros(full + k.shape[-2:], k.dtype)                    # this worker's sums
        dv_all = np.zeros(full + v.shape[-2:], v.dtype)
        sums = flat(dk_all, full), flat(dv_all, full)
        # One (rows, keys) buffer for every unit's dP_l, reused from call to call
        # (kernels/scratch.py): no new pages for each block.
        buf = scratch("blocked dP_l", (max(block_entries(b, blk) for b, blk in my_units),), e.dtype)
        for b, block in my_units:
            backward_block(w, b, block, sums=sums, buf=buf)
        return dk_all, dv_all

    (dk, dv), *others = parallel_map(work, deal(units(full, blocks), num_threads()))
    for dk_w, dv_w in others:                 # add up the workers' partial sums
        dk += dk_w
        dv += dv_w
    return dq, dk, dv


def backward_block(w: Walk, b: slice, block: tuple, *, sums: tuple, buf) -> None:
    """One unit of the backward: adds the terms of rows ``i:j`` of the batch entries ``b`` into
    ``w.dq`` and into this worker's ``dk, dv = sums``; ``buf`` the flat scratch of ``dP_l``."""
    i, j, j0, j1 = block
    if j0 == j1:
        return                                # e = 0 on these rows: every gradient term is 0
    rows, keys = slice(i, j), slice(j0, j1)
    dk, dv = (x[b] for x in sums)
    m = tile(w.mask[b], i, j, j0, j1) if w.garbage else None          # None: plain products
    eb = w.e[block][b]                                                 # (..., rows, keys)
    qb, k = w.q[b][..., rows, :], w.k[b][..., keys, :]
    ignore = "ignore" if w.garbage else None                 # NaN, inf expected: no warnings
    with np.errstate(invalid=ignore, over=ignore):
        dout_l = w.dout[b][..., rows, :] / w.l[b][..., rows, :]        # (..., rows, d_v)
        # forward: out = (e / l) @ v  ->  dv = e.T @ (dout / l)
        rows_product(eb, dout_l, m, out=dv[..., keys, :], add=True)   # (..., keys, d_v)
        # forward: weights = softmax(scores)  ->  dscores = e * (dout_l @ v.T - D_l)
        D_l = (dout_l * w.out[b][..., rows, :]).sum(axis=-1, keepdims=True)   # (..., rows, 1)
        dP_l = buf[:eb.size].reshape(eb.shape)                         # (..., rows, keys)
        np.matmul(append_column(dout_l, -D_l, "rows 1"), np.swapaxes(w.v1[b][..., keys, :], -1, -2),
                  out=dP_l)
        if m is not None:
            np.copyto(dP_l, 0, where=~m)             # as zero_masked: no NaN from masked keys
        dP_l *= eb
        # forward: scores = (q * scale) @ k.T  ->  dq = dscores @ k * scale,
        #                                          dk = dscores.T @ (q * scale)
        dq_b = masked_matmul(dP_l, k, m, out=w.dq[b][..., rows, :])
        dq_b *= w.scale
    with np.errstate(over="ignore", invalid="ignore"):
        qs = qb * w.scale
    with np.errstate(invalid=ignore, over=ignore):
        if overflowed(qs, qb):                                       # q * scale overflowed
            dk[..., keys, :] += rows_product(dP_l, qb, m) * w.scale
        else:
            rows_product(dP_l, qs, m, out=dk[..., keys, :], add=True)   # (..., keys, d_k)


def spans(e, blocks, l, S: int, divide: bool = False) -> np.ndarray:
    """``e`` as the blocked forward packed it (:func:`packed`) made a new ``(..., L, S)`` array:
    each block's span of keys where it lies (divided by the row sums ``l (..., L, 1)`` with
    ``divide``: the weights), 0 everywhere else (keys a block's rows cannot attend)."""
    batch = l.shape[:-2]
    full = np.zeros(batch + (l.shape[-2], S), e.dtype)
    for (i, j, j0, j1), span in packed(e, blocks, batch).items():
        span = span.reshape(batch + span.shape[-2:])
        full[..., i:j, j0:j1] = span / l[..., i:j, :] if divide else span
    return full


def block_entries(b: slice, block: tuple) -> int:
    """Entries of the (batch slice, rows, keys) block of a unit of work (at least 1)."""
    i, j, j0, j1 = block
    return max(1, (b.stop - b.start) * (j - i) * (j1 - j0))


def units(batch: tuple, blocks: list) -> list:
    """The work: ``(batch slice, block)`` pairs, the batch entries cut into one slice per worker
    thread (heads run in parallel, each on big products), each slice walking the row blocks.
    Dealt like cards to the workers, worker ``w`` gets slice ``w``."""
    return [(sl, block) for block in blocks for sl in slices(batch)]
