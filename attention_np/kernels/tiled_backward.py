r"""The backward of the tiled path (:mod:`attention_np.kernels.tiled` explains the algorithm):
each key block's weights recomputed from the saved log-sum-exp, used at once, never stored.

With soft-capping, a tile's ``tanh`` is recomputed with its scores (the tiled path keeps no
``(L, S)`` array). With a sink, its weight in row ``i`` is ``p_sink_i = exp(s_n - lse_i)`` and its
value is 0, so ``dP_sink_i = 0`` and the softmax backward gives
``dsinks_n = sum_i p_sink_i (0 - D_i) = -sum_i p_sink_i D_i``, with ``D_i = rowsum(dout_i * out_i)``:
an ``(L, 1)`` computation, no block visits it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_np._checks import check_bool, check_cache, check_dout, sum_to_shape
from attention_np.kernels.batch_split import flat, shared, slices
from attention_np.kernels.grads import Grads
from attention_np.kernels.guard import all_finite, masked_matmul, tile, zero_masked
from attention_np.kernels.row_sums import rows_product
from attention_np.kernels.scratch import append_column, carve, scratch
from attention_np.kernels.threads import parallel_map
from attention_np.kernels.tiled_forward import FlashCache
from attention_np.kernels.tiles import Tiling, check_tiled, scaled_q, tile_allowed, tile_scores
from attention_np.variants.gqa import group_heads, group_kv, group_queries
from attention_np.variants.softcap import softcap_backward


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
    dsinks : (h,) the gradient w.r.t. the sink logits; only when the forward had ``sinks``
    dbias : the shape of ``bias`` (None without one); only with ``return_dbias=True``
    """
    return_dbias = check_bool(return_dbias, "return_dbias")
    grads = backward(dout, cache)
    sinks = () if grads.dsinks is None else (grads.dsinks,)
    return (*grads.qkv, *sinks) + ((grads.dbias,) if return_dbias else ())


def backward(dout, cache: FlashCache) -> Grads:
    """:func:`flash_attention_backward` as one :class:`~attention_np.kernels.grads.Grads`:
    ``dbias`` (accumulated block by block) None without a bias, ``dsinks`` None without sinks."""
    check_cache(cache, FlashCache, FlashCache.made_by)
    c = cache
    dout = check_dout(dout, c.out.shape, c.out.dtype)
    q, k, v, out, lse, bias = c.q, c.k, c.v, c.out, c.lse, c.bias
    sink = None if c.sinks is None else c.sinks[:, None, None]          # (h, 1, 1)
    if c.kv_groups > 1:
        # Regroup (views); the sum over broadcast dims then adds the G query heads of a group
        # into their shared key/value head.
        G, H = c.kv_groups, c.q.shape[-3]
        q, out, dout = group_queries(q, G), group_queries(out, G), group_queries(dout, G)
        k, v, lse = group_kv(k), group_kv(v), group_queries(lse[..., None], G)[..., 0]
        bias, sink = group_heads(bias, H, G, "bias"), group_heads(sink, H, G, "sinks")
    g = backward_tiles(c, dout=dout, q=q, k=k, v=v, out=out, lse=lse, bias=bias, sink=sink)
    return Grads(dq=g.dq.reshape(c.q.shape), dk=g.dk.reshape(c.k.shape), dv=g.dv.reshape(c.v.shape),
                 dbias=None if g.dbias is None else g.dbias.reshape(c.bias.shape),
                 dsinks=None if g.dsinks is None else g.dsinks.reshape(c.sinks.shape))


def backward_tiles(c: FlashCache, *, dout, q, k, v, out, lse, bias, sink) -> Grads:
    """The backward on (grouped) arrays, ``c.mask`` the forward's (grouped) mask: ``dq, dk, dv``
    summed to the shapes of ``q, k, v``, ``dbias`` (>= 2-D, or None) and ``dsinks`` with the
    shape of ``sink`` (or None)."""
    batch = out.shape[:-2]
    qs, post = scaled_q(q, c.scale)                                      # (..., L, d_k)
    lse = lse[..., None]                                                 # (..., L, 1)
    t = tiling_of(c, q=q, k=k, v=v, dout=dout, bias=bias, batch=batch, post=post)
    # rowsum(dP * P) = rowsum(dout * out), because out = P @ v: FlashAttention-2's D.
    with np.errstate(invalid="ignore" if t.garbage else None, over="ignore" if t.garbage else None):
        D = (dout * out).sum(axis=-1, keepdims=True)                     # (..., L, 1)
    grads = {"dq": np.zeros(batch + q.shape[-2:], q.dtype), "dk": np.zeros(batch + k.shape[-2:], k.dtype),
             "dv": np.zeros(batch + v.shape[-2:], v.dtype)}
    dbias = None if t.bias is None else np.zeros(t.bias.shape, q.dtype)
    walk_blocks(t, dict(dout=dout, qs=qs, k=k, v=v, lse=lse, D=D, **grads), dbias=dbias)
    dq, dk, dv = grads.values()
    if post is not None:
        dk *= post                           # q * scale overflowed: dk was dscores.T @ q
    dq *= q.dtype.type(c.scale)
    dsink = None
    if sink is not None:
        # forward: the sink's weight p_sink = exp(s_n - lse), its value 0  ->  dP_sink = 0,
        # dsinks = p_sink * (0 - D), summed over every row that shares the head's sink
        dsink = sum_to_shape(-np.exp(sink - lse) * D, sink.shape)        # (h, 1, 1)
    return Grads(dq=sum_to_shape(dq, q.shape), dk=sum_to_shape(dk, k.shape), dv=sum_to_shape(dv, v.shape),
                 dbias=dbias, dsinks=dsink)


def tiling_of(c: FlashCache, *, q, k, v, dout, bias, batch, post) -> Tiling:
    """The :class:`Tiling` of the backward: the forward's options, the bias (>= 2-D) and, as in
    the forward, whether an input is NaN or inf under a mask (then sum over the attended pairs)."""
    garbage = ((c.mask is not None or c.is_causal or c.window != (None, None))
               and not all_finite(q, k, v, dout))
    bias = None if bias is None else check_tiled(q, k, v, None, 1, bias)[1]   # >= 2-D
    return Tiling(mask=c.mask, bias=bias, is_causal=c.is_causal, window=c.window, softcap=c.softcap,
                  block_size=c.block_size, batch=batch, post=post, garbage=garbage)


def walk_blocks(t: Tiling, arrays: dict, *, dbias) -> None:
    """:func:`backward_loop` over ``arrays`` (its keywords), the heads shared out to the worker
    threads (batch_split.py) when there are several and the mask is the same for every head (and
    no ``dbias`` is summed)."""
    mask1 = shared(t.mask)
    entries = int(np.prod(t.batch, dtype=np.int64)) * arrays["qs"].shape[-2] * arrays["k"].shape[-2]
    if len(slices(t.batch, entries)) < 2 or dbias is not None or mask1 is t.mask is not None:
        backward_loop(t, **arrays, dbias=dbias)
        return
    # Heads in parallel: each worker walks the key blocks of its heads.
    flats = {name: flat(x, t.batch) for name, x in arrays.items()}
    parallel_map(lambda sl: backward_loop(
        replace(t, mask=mask1, bias=None, batch=(sl.stop - sl.start,)),
        **{name: x[sl] for name, x in flats.items()}), slices(t.batch, entries))


def backward_loop(t: Tiling, *, dout, qs, k, v, lse, D, dq, dk, dv, dbias=None):
    """The walk over the key blocks of ``t``: adds each block's terms into ``dq``, writes its
    ``dk``, ``dv`` (and adds into ``dbias``); ``dq`` and ``dk`` still lack the scale (and
    ``t.post``)."""
    L, S = qs.shape[-2], k.shape[-2]
    ignore = "ignore" if t.garbage else None
    dout_D = append_column(dout, -D, "rows 1")                       # (..., L, d_v + 1)
    v_1 = append_column(v, v.dtype.type(1), "keys 2")                    # (..., S, d_v + 1)
    # flat buffers, each tile carved from them: P and dP (..., R, Bk), dscores @ k (..., R, d_k)
    largest = (np.prod(t.batch + (L, min(t.block_size, S)), dtype=np.int64),)
    work_P, work_dP = scratch("tile 1", largest, qs.dtype), scratch("tile 2", largest, qs.dtype)
    work_dq = scratch("rows 2", (dq.size,), dq.dtype)
    for block in t.blocks(L, S):
        j0, j1, i0, i1 = block
        rows, cols = np.s_[..., i0:i1, :], np.s_[..., j0:j1, :]
        a = tile_allowed(qs, k, t, block) if t.garbage else None
        with np.errstate(invalid=ignore, over=ignore):
            # forward: P = softmax(scores) = exp(scores - lse)   (recomputed, never stored)
            P, capped = tile_scores(qs, k, t, block, post=t.post, softcap=t.softcap,
                                    work=work_P)                         # (..., R, Bk)
            P -= lse[rows]
            np.exp(P, out=P)
            # forward: out = P @ v  ->  dv = P.T @ dout,  dP = dout @ v.T
            rows_product(P, dout[rows], a, out=dv[cols])                  # (..., Bk, d_v)
            # forward: P = softmax(scores)  ->  dscores = P * (dP - D), the subtraction done
            # inside the product: [dout, -D] @ [v, 1].T = dout @ v.T - D = dP - D
            dP = np.matmul(dout_D[rows], np.swapaxes(v_1[cols], -1, -2),
                           out=carve(work_dP, P.shape))                  # (..., R, Bk)
            dP = zero_masked(dP, a)
            dP *= P
            if dbias is not None:
                # forward: scores = ... + bias  ->  dbias = dscores, summed where bias broadcast
                block = tile(dbias, i0, i1, j0, j1)                     # a view into dbias
                block += sum_to_shape(dP, block.shape)
            if capped is not None:
                # forward: scores = c tanh(raw / c) + bias  ->  draw = dscores * (1 - tanh^2)
                dP = softcap_backward(dP, capped)
            # forward: scores = (q * scale) @ k.T  ->  dq = dscores @ k * scale,
            #                                          dk = dscores.T @ (q * scale)
            dq[rows] += masked_matmul(dP, k[cols], a, out=carve(work_dq, dq[rows].shape))  # (..., R, d_k)
            rows_product(dP, qs[rows], a, out=dk[cols])                   # (..., Bk, d_k)
