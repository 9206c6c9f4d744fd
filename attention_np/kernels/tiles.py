r"""The tiles of the tiled path (:mod:`attention_np.kernels.tiled`): which blocks to visit, and
the scores of one block.

The tiled forward and backward both walk the key blocks ``[j0, j1)`` that :func:`key_blocks`
plans (skipping what the causal mask or the sliding window hides from every query row), and both
form a tile's scores with :func:`tile_scores`: ``(q·scale) @ k_blockᵀ``, soft-capped, plus the
bias's block, ``-inf`` where masked. Nothing here is ever ``(L, S)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_int
from attention_np.kernels.guard import mask_and_bias, tile
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


def tile_scores(qs, k, t: Tiling, block: tuple, *, post=None, softcap=None, work=None):
    """Scores of query rows ``[i0, i1)`` against keys ``[j0, j1)``, ``-inf`` where masked.

    ``block`` is ``(j0, j1, i0, i1)``; ``t`` gives the mask, bias, causal flag, window and batch
    shape. ``qs`` is ``q * scale`` (or ``q``, with the scale as ``post`` when ``q * scale``
    overflows); ``work``, a flat buffer the scores are written into (see :func:`carve`), or
    None. Returns the scores ``(*t.batch, i1 - i0, j1 - j0)`` and, with ``softcap``, the
    ``tanh(QKᵀ·scale / c)`` of the tile (the backward's ``1 - tanh²``), else None.
    """
    j0, j1, i0, i1 = block
    a, b = qs[..., i0:i1, :], np.swapaxes(k[..., j0:j1, :], -1, -2)
    into = carve(work, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (i1 - i0, j1 - j0))
    s = np.matmul(a, b, out=into)                                        # (..., R, Bk)
    if post is not None:
        s *= post
    capped = None
    if softcap is not None:
        # (beyond the paper) soft-capping, before the bias and the mask as in the dense path
        s, capped = softcap_forward(s, softcap)                           # (..., R, Bk) each
    if s.shape[:-2] != t.batch:               # a mask that adds batch dims: grow the tile
        s = np.broadcast_to(s, t.batch + s.shape[-2:]).copy()
    if t.bias is not None:
        s += tile(t.bias, i0, i1, j0, j1)        # the bias's block, as the dense path adds it
    if t.mask is not None:
        # Slice only the mask dims that are not broadcast (size 1), never a full (L, S) copy.
        np.copyto(s, -np.inf, where=~tile(t.mask, i0, i1, j0, j1))
    if t.is_causal:
        # Only the first rows of the tile straddle the diagonal: row i0 + r blocks keys j > i0 + r.
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


def tile_allowed(q, k, t: Tiling, block: tuple):
    """The attended pairs of a tile, bool (..., R, Bk): where :func:`tile_scores` of zeros is not -inf.

    Needed only when an input is NaN or inf (see :func:`attention_np.kernels.guard.masked_matmul`).
    """
    zq, zk = np.zeros(q.shape[:-1] + (1,), q.dtype), np.zeros(k.shape[:-1] + (1,), k.dtype)
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

