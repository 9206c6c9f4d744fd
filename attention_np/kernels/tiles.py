r"""The tiles of the tiled path (:mod:`attention_np.kernels.tiled`): which blocks to visit, and
the scores of one tile.

The tiled forward and backward both walk the key blocks ``[j0, j1)`` that :func:`key_blocks`
plans (skipping what the causal mask or the sliding window hides from every query row), each
block's query rows cut into tiles of :func:`tile_rows` rows (:meth:`Tiling.tiles`), and both
form a tile's scores with :func:`tile_scores`: ``(q·scale) @ k_blockᵀ``, soft-capped, plus the
bias's block, ``-inf`` where masked. Nothing here is ever ``(L, S)``.

Why tiles of a few rows, not every row of the block at once: a tile of ``(..., 64, 128)``
float32 over 8 heads is 256 KiB, which can stay in a core's cache (1 MiB of L2 on the 2-core
machine of ``docs/performance.md``) from the product that writes it through the subtraction,
the ``exp`` and the products that read it; a ``(..., 1024, 128)`` tile is 4 MiB. Measured on
that machine, one thread, (1, 8, 1024, 64) float32, in a prototype of the backward with the
keys transposed as below: 64-row tiles took about 0.8x the time of 1024-row tiles (median of 21
interleaved rounds). With one head a tile gets 512 rows instead: fewer, larger products, fewer
Python calls.

The keys arrive transposed, ``k_T (..., d_k, S)``, copied once per call
(:func:`~attention_np.kernels.scratch.transposed`): OpenBLAS multiplied a ``(64, 64)`` tile of
queries by a C-contiguous ``(64, 128)`` block of ``k_T`` in 9.9 ms over the 128 tiles of that
call (8 heads each), by the transposed view ``k_blockᵀ`` in 15.6 ms (with 1024-row tiles the
two took the same time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_int
from attention_np.kernels.guard import mask_and_bias, tile
from attention_np.kernels.row_sums import ROWS
from attention_np.kernels.scores import overflowed
from attention_np.kernels.scratch import carve, scratch
from attention_np.variants.softcap import softcap_forward


def key_blocks(L: int, S: int, block_size: int, is_causal: bool, window=(None, None)):
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


#: About how many scores one tile holds, over all its batch entries: 2**16 float32 are 256 KiB.
TILE_ENTRIES = 1 << 16


def tile_rows(entries: int, block_size: int) -> int:
    """Query rows per tile for ``entries`` batch entries (heads) and ``block_size`` keys: a
    multiple of :data:`~attention_np.kernels.row_sums.ROWS` (64), about :data:`TILE_ENTRIES`
    scores in all (fewer rows, more tiles, more Python calls per product: one head gets 512
    rows of 128 keys, 8 heads 64 rows)."""
    return ROWS * max(1, TILE_ENTRIES // max(1, entries * block_size * ROWS))


@dataclass(frozen=True, kw_only=True)
class Tiling:
    """What every tile of one call of the tiled path shares, the forward's and the backward's.

    Attributes
    ----------
    mask : bool, broadcastable to (..., L, S) (>= 2-D), or None
    bias : float, broadcastable to (..., L, S) (>= 2-D), or None
    is_causal : bool, top-left aligned (applied per tile)
    window : ``(left, right)`` of the sliding window, ``(None, None)`` without one
    softcap : the cap ``c`` of ``c·tanh(scores / c)``, or None
    block_size : keys per block
    batch : the scores' broadcast batch shape
    post : the scale, when ``q * scale`` overflowed and the scores are scaled after the product;
        else None (``q`` arrives scaled)
    garbage : an input is NaN or inf under a mask: sum over the attended pairs only
    dropped : the caller zeroed the inputs no pair attends (a prepared
        :class:`~attention_np.kernels.plan.Plan`): not dropped again
    """

    mask: np.ndarray | None = None
    bias: np.ndarray | None = None
    is_causal: bool = False
    window: tuple = (None, None)
    softcap: float | None = None
    block_size: int = 128
    batch: tuple = ()
    post: object = None
    garbage: bool = False
    dropped: bool = False

    def blocks(self, L: int, S: int):
        """:func:`key_blocks` of this tiling: ``(j0, j1, i0, i1)`` for each key block."""
        return key_blocks(L, S, self.block_size, self.is_causal, self.window)

    def rows(self) -> int:
        """Query rows per tile (:func:`tile_rows` of the batch shape and block size)."""
        return tile_rows(int(np.prod(self.batch, dtype=np.int64)), self.block_size)

    def tiles(self, L: int, S: int):
        """``(j0, j1, i0, i1)`` for each tile: each key block of :meth:`blocks`, its query rows
        ``[i0, i1)`` cut into runs of at most :meth:`rows` rows, key block after key block, and
        the block's keys narrowed to those the run's rows may see (causal: ``j < i1``; a window
        ``(left, right)``: ``i0 - left <= j < i1 + right``)."""
        rows = self.rows()
        left, right = self.window
        if self.is_causal:
            right = 0 if right is None else min(right, 0)
        for j0, j1, first, last in self.blocks(L, S):
            for i0 in range(first, last, rows):
                i1 = min(i0 + rows, last)
                lo = j0 if left is None else max(j0, i0 - left)
                hi = j1 if right is None else min(j1, i1 + right)
                if lo < hi:
                    yield lo, hi, i0, i1


def tile_scores(qs, k_T, t: Tiling, block: tuple, *, post=None, softcap=None, shift=None, work=None):
    """Scores of query rows ``[i0, i1)`` against keys ``[j0, j1)``, ``-inf`` where masked.

    ``block`` is ``(j0, j1, i0, i1)``; ``t`` gives the mask, bias, causal flag, window and batch
    shape. ``qs`` is ``q * scale`` (or ``q``, with the scale as ``post`` when ``q * scale``
    overflows), ``k_T (..., d_k, S)`` the keys transposed; ``work``, a flat buffer the scores
    are written into (see :func:`carve`), or None; ``shift`` ``(*t.batch, i1 - i0, 1)``, or
    None: subtracted before the bias and the mask (the fast lane's running max, so that a
    masked score stays ``-inf`` whatever the shift). Returns the scores ``(*t.batch, i1 - i0,
    j1 - j0)`` and, with ``softcap``, the ``tanh(QKᵀ·scale / c)`` of the tile (the backward's
    ``1 - tanh²``), else None.
    """
    j0, j1, i0, i1 = block
    a, b = qs[..., i0:i1, :], k_T[..., j0:j1]
    batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    into = carve(work, batch + (i1 - i0, j1 - j0))
    s = np.matmul(a, b, out=into)                                        # (..., R, Bk)
    if post is not None:
        s *= post
    capped = None
    if softcap is not None:
        # (beyond the paper) soft-capping, before the bias and the mask as in the dense path
        s, capped = softcap_forward(s, softcap)                           # (..., R, Bk) each
    if s.shape[:-2] != t.batch:               # a mask that adds batch dims: grow the tile
        s = np.broadcast_to(s, t.batch + s.shape[-2:]).copy()
    if shift is not None:
        s -= shift
    if t.bias is not None:
        s += tile(t.bias, i0, i1, j0, j1)        # the bias's block, as the dense path adds it
    if t.mask is not None:
        # Slice only the mask dims that are not broadcast (size 1), never a full (L, S) copy.
        np.copyto(s, -np.inf, where=~tile(t.mask, i0, i1, j0, j1))
    if t.is_causal and j1 - 1 > i0:
        # Only the first rows of the tile straddle the diagonal: row i0 + r blocks keys j > i0 + r
        # (none when the tile's first row sees its last key).
        r = min(j1, s.shape[-2] + i0) - i0
        blocked = np.arange(j0, j1) > np.arange(i0, i0 + r)[:, None]    # (r, Bk)
        np.copyto(s[..., :r, :], -np.inf, where=blocked)
    if t.window != (None, None):
        np.copyto(s, -np.inf, where=outside_window(t.window, block))
    return s, capped


def outside_window(window: tuple, block: tuple):
    """The pairs of a tile outside the sliding window, bool (R, Bk): key minus query position
    outside ``[-left, right]``."""
    j0, j1, i0, i1 = block
    rel = np.arange(j0, j1) - np.arange(i0, i1)[:, None]                    # (R, Bk)
    left, right = window
    outside = np.zeros(rel.shape, bool)
    if left is not None:
        outside |= rel < -left
    if right is not None:
        outside |= rel > right
    return outside


def tile_allowed(q, k_T, t: Tiling, block: tuple):
    """The attended pairs of a tile, bool (..., R, Bk): where :func:`tile_scores` of zeros is not
    -inf (``k_T (..., d_k, S)``, the keys transposed).

    Needed only when an input is NaN or inf (see :func:`attention_np.kernels.guard.masked_matmul`).
    """
    zq = np.zeros(q.shape[:-1] + (1,), q.dtype)
    zk = np.zeros(k_T.shape[:-2] + (1,) + k_T.shape[-1:], k_T.dtype)
    return tile_scores(zq, zk, t, block)[0] > -np.inf


def scaled_q(q, scale):
    """``(q * scale, None)``, or ``(q, scale)`` when ``q * scale`` overflows where ``q`` does not
    (scale 1e30, q ~ 1e10 in float32: the scores ``q @ k.T * scale`` may still be representable).

    ``q * scale`` is scratch (:mod:`attention_np.kernels.scratch`): valid during the call only."""
    s = q.dtype.type(scale)
    with np.errstate(over="ignore"):
        qs = np.multiply(q, s, out=scratch("q * scale", q.shape, q.dtype))
    return (q, s) if overflowed(qs, q) else (qs, None)


def check_tiled(q, k, v, mask, block_size, bias=None, *, built: bool = False):
    """The checked mask and bias (causal is applied per tile, not here) and the broadcast batch shape;
    ``built``: the mask and bias of a prepared plan, checked and built by the caller."""
    if mask is not None and np.ndim(mask) < 2:
        # a 0-d or 1-D mask (valid for sdpa_forward): give it the (L, S) dims the tiles slice
        mask = np.reshape(mask, (1,) * (2 - np.ndim(mask)) + np.shape(mask))
    if bias is not None and np.ndim(bias) < 2:
        bias = np.reshape(bias, (1,) * (2 - np.ndim(bias)) + np.shape(bias))
    if not built:
        mask, bias = mask_and_bias(q, k, v, mask, bias, is_causal=False)
    check_int(block_size, "block_size")
    L, S = q.shape[-2], k.shape[-2]
    shapes = [x.shape[:-2] for x in (q, k, v)]
    for x in (mask, bias):
        if x is not None:
            shapes.append(np.broadcast_shapes(x.shape, (L, S))[:-2])
    return mask, bias, np.broadcast_shapes(*shapes)

