"""Masked keys never reach the answer (docs/api.md, conventions).

A NaN or inf in ``k`` or ``v`` at a key no query may attend (a padding slot), or in the ``q``
of a fully masked row, must leave ``out`` and every gradient exactly as with finite numbers
there; the masked slots get gradient 0. Also: no intermediate overflows where the result is
representable (float32 ``v ~ 3e38``; ``q * scale`` beyond float32 with representable scores),
in the dense and the tiled paths. A key masked for some rows only (causal, windows, per-query
masks) reaches exactly the rows that attend it: every other row, and the gradients of the keys
only they attend, are bit for bit those with finite numbers there.
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import blocked, reference
from attention_np.kernels.tiled import flash_attention_backward, flash_attention_forward
from attention_np.studies.additive import (
    additive_attention_backward,
    additive_attention_forward,
    init_additive_params,
)
from tests import torch_ref
from tests.helpers import randn

B, L, S, D = 2, 4, 5, 3
GARBAGE = (np.nan, np.inf, -np.inf)


def _mask():
    """(B, L, S): batch 0 pads keys 3, 4; batch 1 pads key 4 and masks query row 2 fully."""
    m = np.ones((B, L, S), bool)
    m[0, :, 3:] = False
    m[1, :, 4] = False
    m[1, 2, :] = False
    return m


def _inputs(rng, bad):
    """Clean q, k, v and copies with ``bad`` at the masked key slots and the dead query row."""
    q, k, v = randn(rng, B, L, D), randn(rng, B, S, D), randn(rng, B, S, D)
    qb, kb, vb = q.copy(), k.copy(), v.copy()
    kb[0, 3:], vb[0, 3:], kb[1, 4], vb[1, 4] = bad, bad, bad, bad
    qb[1, 2] = bad
    return (q, k, v), (qb, kb, vb)


def _dead_zero(q, k, v):
    """The clean inputs with the masked slots set to 0: the gradients there must be 0."""
    q, k, v = q.copy(), k.copy(), v.copy()
    k[0, 3:] = v[0, 3:] = k[1, 4] = v[1, 4] = q[1, 2] = 0
    return q, k, v


def _dense(fwd, bwd):
    def run(q, k, v, mask, dout, **kw):
        out, cache = fwd(q, k, v, mask, **kw)
        return (out, *bwd(dout, cache))
    return run


def _blocked(q, k, v, mask, dout, **kw):
    """The fused path forced onto its blocked walk (kernels/blocked.py): two workers, blocks of a
    few query rows, so that garbage meets block edges and per-worker partial sums."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocked, "MIN_ELEMENTS", 0)
        mp.setattr(blocked, "BLOCK_ELEMENTS", 8)
        mp.setenv("ATTENTION_NP_NUM_THREADS", "2")
        out, cache = an.sdpa_forward(q, k, v, mask, **kw)
        if not (kw.get("bias") is not None or kw.get("dropout_p")):
            assert cache.blocks is not None                    # the blocked walk was taken
        return (out, *an.sdpa_backward(dout, cache))


PATHS = {
    "fused": _dense(an.sdpa_forward, an.sdpa_backward),
    "blocked": _blocked,
    "reference": _dense(reference.sdpa_forward, reference.sdpa_backward),
    "tiled": _dense(lambda q, k, v, m, **kw: flash_attention_forward(q, k, v, m, block_size=2, **kw),
                    flash_attention_backward),
}


def _check_grads_at_dead_slots(dq, dk, dv):
    assert np.all(dk[0, 3:] == 0) and np.all(dv[0, 3:] == 0)
    assert np.all(dk[1, 4] == 0) and np.all(dv[1, 4] == 0) and np.all(dq[1, 2] == 0)


@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_garbage_at_masked_slots_changes_nothing(path, bad, rng):
    clean, dirty = _inputs(rng, bad)
    mask, dout = _mask(), randn(rng, B, L, D)
    want = PATHS[path](*_dead_zero(*clean), mask, dout)
    got = PATHS[path](*dirty, mask, dout)
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert np.isfinite(g).all(), name
        np.testing.assert_array_equal(g, w, err_msg=name)
    _check_grads_at_dead_slots(*got[1:])
    assert np.all(got[0][1, 2] == 0)                    # the fully masked row gives 0


@pytest.mark.parametrize("path", sorted(PATHS))
def test_garbage_at_masked_slots_matches_torch_on_clean_inputs(path, rng):
    """torch on the clean inputs (the dead row removed: torch's convention there differs)."""
    clean, dirty = _inputs(rng, np.nan)
    mask, dout = _mask(), randn(rng, B, L, D)
    mask_t = mask.copy()
    mask_t[1, 2, 0] = True                              # give the dead row one key for torch
    out, dq, dk, dv = PATHS[path](*dirty, mask, dout)
    t_out, t_dq, t_dk, t_dv = torch_ref.sdpa(*_dead_zero(*clean), dout, mask=mask_t)
    live = np.ones((B, L), bool)
    live[1, 2] = False
    np.testing.assert_allclose(out[live], t_out[live], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dq[live], t_dq[live], rtol=1e-11, atol=1e-13)
    # dk, dv of key 0 in batch 1 also get the extra row's share in torch: compare the others
    np.testing.assert_allclose(dk[0], t_dk[0], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(dv[0], t_dv[0], rtol=1e-11, atol=1e-13)


def test_garbage_at_masked_slots_additive(rng):
    clean, dirty = _inputs(rng, np.nan)
    params = init_additive_params(D, rng=rng)
    mask, dout = _mask(), randn(rng, B, L, D)
    out_w, c_w = additive_attention_forward(*_dead_zero(*clean), params, mask)
    out_g, c_g = additive_attention_forward(*dirty, params, mask)
    np.testing.assert_array_equal(out_g, out_w)
    *gw, grads_w = additive_attention_backward(dout, c_w)
    *gg, grads_g = additive_attention_backward(dout, c_g)
    for g, w in zip(gg, gw, strict=True):
        np.testing.assert_array_equal(g, w)
    for n in grads_w:
        assert np.isfinite(grads_g[n]).all()
        np.testing.assert_array_equal(grads_g[n], grads_w[n])
    _check_grads_at_dead_slots(*gg)


@pytest.mark.parametrize("kernel", ["fused", "reference"])
def test_garbage_at_padded_positions_multi_head(kernel, rng):
    """Self-attention with padded positions: NaN inputs there reach no output row and no gradient."""
    h, d_model = 2, 4
    p = an.init_mha_params(d_model, h, rng=rng)
    x = randn(rng, B, L, d_model)
    lengths = np.array([3, 2])
    real = an.padding_mask(lengths, L)                  # (B, 1, L)
    # padded keys masked for every query, padded queries attend nothing: (B, 1, L, L)
    mask = (real & np.swapaxes(real, -1, -2))[:, None]
    x_bad = x.copy()
    x_bad[0, 3:], x_bad[1, 2:] = np.nan, np.inf
    x_zero = np.where(np.isfinite(x_bad), x, 0.0)
    dout = randn(rng, B, L, d_model)
    runs = []
    for xx in (x_zero, x_bad):
        out, cache = an.mha_forward(xx, xx, xx, p, mask=mask,
                                    spec=an.AttentionSpec(kernel=kernel), num_heads=h)
        runs.append((out, *an.mha_backward(dout, cache)))
    (out_w, dq_w, dk_w, dv_w, g_w), (out_g, dq_g, dk_g, dv_g, g_g) = runs
    np.testing.assert_array_equal(out_g, out_w)
    for a, b in ((dq_g, dq_w), (dk_g, dk_w), (dv_g, dv_w)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a[0, 3:], 0)     # padded positions: gradient 0
        np.testing.assert_array_equal(a[1, 2:], 0)
    for n in g_w:
        assert np.isfinite(g_g[n]).all(), n
        np.testing.assert_array_equal(g_g[n], g_w[n])


def test_mask_of_any_rank_in_tiled_like_sdpa(rng):
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 4)
    for mask in (np.array(True), np.array([True, False, True, True, False])):
        want, _ = an.sdpa_forward(q, k, v, mask)
        got, _ = flash_attention_forward(q, k, v, mask, block_size=2)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_values_near_float32_max_do_not_overflow(rng):
    """(e @ v) / l would sum S values of 3e38 first; torch returns 3e38 here."""
    q, k = randn(rng, 3, 4, dtype=np.float32), randn(rng, 5, 4, dtype=np.float32)
    v = np.full((5, 2), 3e38, np.float32)
    out, _ = an.sdpa_forward(q, k, v)
    want = torch_ref.sdpa(q, k, v, np.zeros_like(out))[0]
    assert np.isfinite(want).all()
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_allclose(out, 3e38, rtol=1e-6)   # a convex combination of 3e38s


def test_q_times_scale_overflow_with_representable_scores(rng):
    """scale 1e30, q ~ 1e10, k ~ 1e-10 in float32: q * scale = inf, the scores ~ 1e30 are not."""
    q = (randn(rng, 3, 4) * 1e10).astype(np.float32)
    k = (randn(rng, 5, 4) * 1e-10).astype(np.float32)
    v, dout = randn(rng, 5, 2, dtype=np.float32), randn(rng, 3, 2, dtype=np.float32)
    t_out = torch_ref.sdpa(q, k, v, dout, scale=1e30)[0]
    assert np.isfinite(t_out).all()
    out, cache = an.sdpa_forward(q, k, v, scale=1e30)
    dq, dk, dv = an.sdpa_backward(dout, cache)
    # float64 oracle on the same float32 inputs
    out64, c64 = an.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), scale=1e30)
    g64 = an.sdpa_backward(dout.astype(np.float64), c64)
    assert np.isfinite(out).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    # the weights are nearly one-hot at scores ~ 1e30: out matches torch to a few float32 ulps
    np.testing.assert_allclose(out, t_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, out64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dv, g64[2], rtol=1e-5, atol=1e-6)


# ---- Partly masked keys: masked for some queries, attended by others ----------------------------
# A NaN or inf at such a key (or in the q of a row) reaches exactly the rows that attend it, as
# Eq. (1) says; a masked pair adds nothing to any sum, in out and in every gradient.

def _partial_mask(kind, rng):
    """(B, L, S) bool, every row and every key but the last attended: the key row 2 is partly masked."""
    i, j = np.arange(L)[:, None], np.arange(S)
    if kind == "causal":
        m = j <= i                                         # key 4 is seen by no row
    elif kind == "window":
        m = abs(i - j) <= 1                                # a sliding window of width 3
    else:                                                  # "per_query": a random bool mask
        m = rng.random((B, L, S)) < 0.5
        m[:, np.arange(L), np.arange(L)] = True            # every row sees a key
        m[:, :2, 2], m[:, 2:, 2] = False, True             # key 2: seen by rows 2, 3 only
    return np.broadcast_to(m, (B, L, S)).copy()


def _put(q, k, v, where, bad):
    """Copies of q, k, v with ``bad`` at key 2 of batch 0 (in k or v) or at query row 1 (in q)."""
    q, k, v = q.copy(), k.copy(), v.copy()
    {"q": q[0, 1], "k": k[0, 2], "v": v[0, 2]}[where][...] = bad
    return q, k, v


def _tainted(mask, where):
    """Batch 0's rows that see the garbage and the keys those rows see (their dk, dv may change)."""
    rows = mask[0, :, 2].copy() if where in "kv" else np.arange(L) == 1
    return rows, mask[0, rows].any(axis=0)


def _assert_same(got, clean, name):
    """Equal to rounding, not bit for bit: with garbage in an input the tiled kernel leaves its
    lazily shifted fast lane (``tiled_forward.LazyShift``) for the exact online softmax, so the
    clean and the garbage runs may round differently; a NaN or inf that leaked would not pass."""
    np.testing.assert_allclose(got, clean, rtol=1e-13, atol=1e-15, err_msg=name)


def _assert_untouched(got, clean, rows, keys):
    out, dq, dk, dv = got
    c_out, c_dq, c_dk, c_dv = clean
    for name, g, c, sel in (("out", out, c_out, ~rows), ("dq", dq, c_dq, ~rows),
                            ("dk", dk, c_dk, ~keys), ("dv", dv, c_dv, ~keys)):
        _assert_same(g[0, sel], c[0, sel], name)                              # batch 0, unseen
        _assert_same(g[1], c[1], name)                                        # batch 1: no garbage
        assert np.isfinite(g[0, sel]).all() and np.isfinite(g[1]).all(), name


@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("kind", ["causal", "window", "per_query"])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_garbage_at_partly_masked_key_reaches_only_rows_that_see_it(path, kind, bad, where, rng):
    q, k, v = randn(rng, B, L, D), randn(rng, B, S, D), randn(rng, B, S, D)
    mask, dout = _partial_mask(kind, rng), randn(rng, B, L, D)
    with np.errstate(invalid="ignore", over="ignore"):   # the torch-style reference below
        got = PATHS[path](*_put(q, k, v, where, bad), mask, dout)
    clean = PATHS[path](q, k, v, mask, dout)
    rows, keys = _tainted(mask, where)
    _assert_untouched(got, clean, rows, keys)
    # The rows that see the garbage get torch's answer, NaN and inf included (torch itself also
    # spreads 0 * NaN to the other rows: not compared there).
    t = torch_ref.sdpa(*_put(q, k, v, where, bad), dout, mask=mask)
    # Except a row whose every attended score is -inf (q = -inf): that is our fully masked row,
    # output 0 (docs/api.md: a -inf score removes its key), where torch gives NaN.
    qb, kb, _ = _put(q, k, v, where, bad)
    with np.errstate(invalid="ignore"):
        scores = np.where(mask, qb @ np.swapaxes(kb, -1, -2), -np.inf)
    dead = (scores[0] == -np.inf).all(axis=-1)
    np.testing.assert_array_equal(got[0][0, dead], 0)
    rows &= ~dead
    np.testing.assert_allclose(got[0][0, rows], t[0][0, rows], rtol=1e-12, atol=1e-14)
    # Each gradient: where torch is finite we agree; where we are not finite, neither is torch.
    for name, g, tg in zip(("dq", "dk", "dv"), got[1:], t[1:], strict=True):
        both = np.isfinite(g) & np.isfinite(tg)
        np.testing.assert_allclose(g[both], tg[both], rtol=1e-11, atol=1e-13, err_msg=name)
        assert np.isfinite(tg[~np.isfinite(g)]).sum() == 0, name


@pytest.mark.parametrize("bad", GARBAGE)
def test_garbage_in_partly_masked_key_tiled_is_causal(bad, rng):
    """The tiled kernel skips the causal blocks above the diagonal: is_causal=True, S > L, garbage in
    k and v."""
    q, k, v = randn(rng, B, L, D), randn(rng, B, 7, D), randn(rng, B, 7, D)
    dout = randn(rng, B, L, D)
    kb, vb = k.copy(), v.copy()
    kb[:, 2], vb[:, 2] = bad, bad                          # rows 2, 3 see key 2, rows 0, 1 do not
    with np.errstate(invalid="ignore"):                   # inf * 0 in the rows that see key 2
        runs = [PATHS["tiled"](q, kk, vv, None, dout, is_causal=True)
                for kk, vv in ((k, v), (kb, vb))]
        fused = PATHS["fused"](q, kb, vb, None, dout, is_causal=True)
    (out, dq, dk, dv), (out_b, dq_b, dk_b, dv_b) = runs
    np.testing.assert_array_equal(out_b[:, :2], out[:, :2])
    np.testing.assert_array_equal(dq_b[:, :2], dq[:, :2])
    np.testing.assert_array_equal(dk_b[:, 4:], 0)          # keys no row sees: gradient 0
    np.testing.assert_array_equal(dv_b[:, 4:], 0)
    assert not np.isfinite(out_b[:, 2:]).any()
    for g, f in zip((out_b, dq_b, dk_b, dv_b), fused, strict=True):   # the dense path agrees
        np.testing.assert_allclose(g, f, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("where", ["k", "v"])
def test_garbage_at_partly_masked_key_additive(where, bad, rng):
    q, k, v = randn(rng, B, L, D), randn(rng, B, S, D), randn(rng, B, S, D)
    params, mask, dout = init_additive_params(D, rng=rng), _partial_mask("window", rng), randn(rng, B, L, D)
    runs = []
    for qq, kk, vv in ((q, k, v), _put(q, k, v, where, bad)):
        with np.errstate(invalid="ignore", over="ignore"):
            out, cache = additive_attention_forward(qq, kk, vv, params, mask)
            dq, dk, dv, grads = additive_attention_backward(dout, cache)
        runs.append(((out, dq, dk, dv), grads))
    (clean, _), (got, grads) = runs
    rows, keys = _tainted(mask, where)
    _assert_untouched(got, clean, rows, keys)
    if where == "v":                    # Eq. (1): the rows that see the garbage do not hide it
        assert not np.isfinite(got[0][0, rows]).any()


@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("kernel", ["fused", "reference"])
def test_garbage_at_a_later_position_multi_head_causal(kernel, bad, rng):
    """Causal self-attention: garbage in x at position 2 leaves positions 0, 1 exactly as they were."""
    h, d_model = 2, 4
    p = an.init_mha_params(d_model, h, rng=rng)
    x, dout = randn(rng, B, L, d_model), randn(rng, B, L, d_model)
    x_bad = x.copy()
    x_bad[:, 2] = bad
    runs = []
    for xx in (x, x_bad):
        with np.errstate(invalid="ignore", over="ignore"):
            out, cache = an.mha_forward(xx, xx, xx, p, is_causal=True,
                                        spec=an.AttentionSpec(kernel=kernel), num_heads=h)
            runs.append((out, *an.mha_backward(dout, cache)[:3]))
    (out, dq, _, _), (out_b, dq_b, _, _) = runs
    np.testing.assert_array_equal(out_b[:, :2], out[:, :2])
    np.testing.assert_array_equal(dq_b[:, :2], dq[:, :2])
    assert np.isfinite(out_b[:, :2]).all()
    # the later rows see the garbage: torch's nn.MultiheadAttention gives the same there
    causal_blocked = ~an.causal_mask(L)
    t_out = torch_ref.mha(x_bad, x_bad, x_bad, p, h, dout, attn_mask=causal_blocked)[0]
    np.testing.assert_allclose(out_b[:, 2:], t_out[:, 2:], rtol=1e-12, atol=1e-14)
    assert not np.isfinite(out_b[:, 2:]).all()


@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("kernel", ["fused", "tiled"])
def test_garbage_at_a_memory_position_outside_every_window_changes_nothing(kernel, bad, rng):
    """Cross-attention with a window (0, 0): memory position 4 is in no query's window, so garbage
    there must reach nothing, the weight gradients included (it reached dW_k, dW_v as NaN when the
    input-dropping step left the window out)."""
    h, d_model = 2, 4
    p = an.init_mha_params(d_model, h, rng=rng)
    x, mem, dout = randn(rng, B, 2, d_model), randn(rng, B, 5, d_model), randn(rng, B, 2, d_model)
    mem_bad = mem.copy()
    mem_bad[:, 4] = bad
    spec = an.AttentionSpec(window=(0, 0), kernel=kernel)
    runs = []
    for m in (mem, mem_bad):
        with np.errstate(invalid="ignore", over="ignore"):
            out, cache = an.mha_forward(x, m, m, p, num_heads=h, spec=spec)
            dx, dk, dv, grads = an.mha_backward(dout, cache)
        runs.append([out, dx, dk[:, :4], dv[:, :4], *(grads[n] for n in sorted(grads))])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", GARBAGE)
def test_garbage_in_a_prefill_chunk_reaches_only_later_positions(bad, rng):
    """mha_decode_step on a chunk of 4: garbage at its position 2 (bottom-right causal) leaves
    positions 0, 1 of the chunk exactly as without it."""
    h, d_model = 2, 4
    p = an.init_mha_params(d_model, h, rng=rng)
    prompt, chunk = randn(rng, B, 3, d_model), randn(rng, B, 4, d_model)
    chunk_bad = chunk.copy()
    chunk_bad[:, 2] = bad
    outs = []
    for c in (chunk, chunk_bad):
        kv = an.KVCache(16)
        an.mha_decode_step(prompt, p, kv, num_heads=h)
        with np.errstate(invalid="ignore", over="ignore"):
            outs.append(an.mha_decode_step(c, p, kv, num_heads=h))
    np.testing.assert_array_equal(outs[1][:, :2], outs[0][:, :2])
    assert np.isfinite(outs[1][:, :2]).all() and not np.isfinite(outs[1][:, 2:]).all()


@pytest.mark.parametrize("block_size", [2, 128])
def test_tiled_values_near_float32_max_do_not_overflow(block_size, rng):
    """The tiled path's acc sums up to S values of 3e38 before dividing: the fallback keeps it an
    average. Forward and backward as the dense path, and torch where torch is finite."""
    q, k = randn(rng, 3, 4, dtype=np.float32), randn(rng, 5, 4, dtype=np.float32)
    v = np.full((5, 2), 3e38, np.float32)
    dout = (0.1 * randn(rng, 3, 2)).astype(np.float32)      # dout . v stays below the maximum
    t_out, _, _, t_dv = torch_ref.sdpa(q, k, v, dout)
    out, cache = flash_attention_forward(q, k, v, block_size=block_size)
    dq, dk, dv = flash_attention_backward(dout, cache)
    d_out, d_cache = an.sdpa_forward(q, k, v)
    d_dq, d_dk, d_dv = an.sdpa_backward(dout, d_cache)
    np.testing.assert_allclose(out, t_out, rtol=1e-6)
    np.testing.assert_allclose(out, d_out, rtol=1e-6)
    np.testing.assert_allclose(dv, t_dv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dv, d_dv, rtol=1e-5, atol=1e-6)
    # dq, dk are P * (dP - D) with dP, D ~ 3e38 * |dout|: the true value is 0 (every v equal),
    # what is left is rounding of dP - D, a few float32 ulps of 3e38 * |dout| times |k| or |q|.
    ulp = np.spacing(np.float32(3e38 * np.abs(dout).sum(axis=-1).max()))
    for g, name, x in ((dq, "dq", k), (dk, "dk", q)):
        assert np.isfinite(g).all(), name
        assert np.abs(g).max() <= 8 * ulp * np.abs(x).max() * x.shape[0], name


@pytest.mark.parametrize("block_size", [2, 128])
def test_tiled_q_times_scale_overflow_with_representable_scores(block_size, rng):
    """scale 1e30, q ~ 1e10, k ~ 1e-10 in float32: the tiled path as the dense path and torch."""
    q = (randn(rng, 3, 4) * 1e10).astype(np.float32)
    k = (randn(rng, 5, 4) * 1e-10).astype(np.float32)
    v, dout = randn(rng, 5, 2, dtype=np.float32), randn(rng, 3, 2, dtype=np.float32)
    t_out, _, _, t_dv = torch_ref.sdpa(q, k, v, dout, scale=1e30)
    out, cache = flash_attention_forward(q, k, v, scale=1e30, block_size=block_size)
    grads = flash_attention_backward(dout, cache)
    d_out, d_cache = an.sdpa_forward(q, k, v, scale=1e30)
    d_grads = an.sdpa_backward(dout, d_cache)
    assert np.isfinite(out).all() and all(np.isfinite(g).all() for g in grads)
    np.testing.assert_allclose(out, t_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, d_out, rtol=1e-5, atol=1e-6)
    for g, dg, name in zip(grads, d_grads, ("dq", "dk", "dv"), strict=True):
        np.testing.assert_allclose(g, dg, rtol=1e-4, atol=1e-6 * np.abs(dg).max(), err_msg=name)
    np.testing.assert_allclose(grads[2], t_dv, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", ["fused", "tiled"])
def test_garbage_at_partly_masked_key_grouped_query_attention(path, rng):
    """enable_gqa: 4 query heads share 2 key/value heads; NaN at key 2 of kv head 0 (causal)."""
    q, k, v = randn(rng, B, 4, L, D), randn(rng, B, 2, S, D), randn(rng, B, 2, S, D)
    dout = randn(rng, B, 4, L, D)
    kb, vb = k.copy(), v.copy()
    kb[:, 0, 2], vb[:, 0, 2] = np.nan, np.nan
    with np.errstate(invalid="ignore"):
        clean, got = (PATHS[path](q, kk, vv, None, dout, is_causal=True,
                                  spec=an.AttentionSpec(enable_gqa=True))
                      for kk, vv in ((k, v), (kb, vb)))
    # rows 0, 1 of query heads 0, 1 (kv head 0) do not see key 2; heads 2, 3 use kv head 1
    for name, g, c in zip(("out", "dq"), got[:2], clean[:2], strict=True):
        _assert_same(g[:, :2, :2], c[:, :2, :2], name)
        _assert_same(g[:, 2:], c[:, 2:], name)
        assert np.isnan(g[:, :2, 2:]).all(), name
    for name, g, c in zip(("dk", "dv"), got[2:], clean[2:], strict=True):
        _assert_same(g[:, 1], c[:, 1], name)                        # kv head 1
        _assert_same(g[:, 0, 4:], c[:, 0, 4:], name)           # no row sees key 4


@pytest.mark.parametrize("path", sorted(PATHS))
def test_random_garbage_and_masks_reach_only_the_rows_that_see_them(path):
    """30 random cases: masks (with dead rows and keys), NaN/±inf scattered over q, k and v."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        Lr, Sr = rng.integers(1, 6, size=2)
        q, k, v = randn(rng, 2, Lr, 3), randn(rng, 2, Sr, 3), randn(rng, 2, Sr, 2)
        mask, dout = rng.random((2, Lr, Sr)) < 0.6, randn(rng, 2, Lr, 2)
        qb, kb, vb = q.copy(), k.copy(), v.copy()
        for x in (qb, kb, vb):
            hit = rng.random(x.shape) < 0.1
            x[hit] = rng.choice(GARBAGE, size=hit.sum())
        with np.errstate(invalid="ignore", over="ignore"):
            got = PATHS[path](qb, kb, vb, mask, dout)
        clean = PATHS[path](q, k, v, mask, dout)
        # rows with garbage in q or attending a key with garbage; keys those rows attend
        bad_key = ~np.isfinite(kb).all(-1) | ~np.isfinite(vb).all(-1)             # (2, S)
        rows = ~np.isfinite(qb).all(-1) | (mask & bad_key[:, None, :]).any(-1)    # (2, L)
        rows &= mask.any(-1)                        # a fully masked row sees nothing: 0
        keys = (mask & rows[..., None]).any(-2)                                   # (2, S)
        for name, g, c, sel in (("out", got[0], clean[0], ~rows), ("dq", got[1], clean[1], ~rows),
                                ("dk", got[2], clean[2], ~keys), ("dv", got[3], clean[3], ~keys)):
            assert np.isfinite(g[sel]).all(), name
            _assert_same(g[sel], c[sel], name)


def test_tiled_overflow_fallback_with_masks_and_a_fully_masked_row(rng):
    """The averaged redo keeps the mask, the causal blocks and a fully masked row's 0."""
    q, k = randn(rng, 2, 4, 3, dtype=np.float32), randn(rng, 2, 6, 3, dtype=np.float32)
    v = np.full((2, 6, 2), 3e38, np.float32)
    mask = rng.random((2, 4, 6)) < 0.7
    mask[1, 2] = False
    for kw in ({"mask": mask}, {"mask": mask, "is_causal": True}):
        out, _ = flash_attention_forward(q, k, v, kw["mask"], is_causal=kw.get("is_causal", False),
                                         block_size=2)
        want, _ = an.sdpa_forward(q, k, v, kw["mask"], is_causal=kw.get("is_causal", False))
        np.testing.assert_allclose(out, want, rtol=1e-6)
        np.testing.assert_array_equal(out[1, 2], 0)


@pytest.mark.parametrize("bad", GARBAGE)
@pytest.mark.parametrize("path", ["fused", "reference"])
def test_a_minus_inf_bias_removes_a_key_like_the_mask(path, bad, rng):
    """bias = -inf for rows 0, 1 at key 2 (no bool mask): garbage there stays out of those rows."""
    fwd = {"fused": an.sdpa_forward, "reference": reference.sdpa_forward}[path]
    bwd = {"fused": an.sdpa_backward, "reference": reference.sdpa_backward}[path]
    q, k, v = randn(rng, B, L, D), randn(rng, B, S, D), randn(rng, B, S, D)
    bias, dout = randn(rng, L, S), randn(rng, B, L, D)
    bias[:2, 2] = -np.inf
    runs = []
    for kk, vv in ((k, v), _put(q, k, v, "v", bad)[1:]):
        with np.errstate(invalid="ignore", over="ignore"):
            out, cache = fwd(q, kk, vv, bias=bias)
            runs.append((out, *bwd(dout, cache)))
    (out, dq, _, _), (out_b, dq_b, _, _) = runs
    np.testing.assert_array_equal(out_b[0, :2], out[0, :2])
    np.testing.assert_array_equal(dq_b[0, :2], dq[0, :2])
    np.testing.assert_array_equal(out_b[1], out[1])
    assert not np.isfinite(out_b[0, 2:]).any()


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_drop_masked_returns_inputs_with_nothing_to_zero_as_they_are(rng):
    """Kills the deleted ``return x`` when every row and key is alive: documented "returned as
    is" (no copy of q, k, v when nothing is masked away)."""
    from attention_np.kernels.guard import drop_masked
    q, k, v = randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 2)
    mask = np.ones((3, 4), bool)
    mask[0, 1] = False                                  # key 1 still alive for other queries
    out = drop_masked(q, k, v, mask)
    assert all(a is b for a, b in zip(out, (q, k, v), strict=True))


@pytest.mark.parametrize("k_batch, v_batch", [((2,), (1,)), ((2, 2, 2), (2, 2))])
def test_masked_key_with_k_and_v_of_different_batch_dims(rng, sdpa, k_batch, v_batch):
    """Kills a changed batch reduction in ``drop_masked``'s ``zero`` (``!=`` -> ``==``, deleted,
    or ``[:-2]`` -> ``[:2]``): k and v of different batch dims with a masked key; v must keep
    its own shape, and dv too."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, *k_batch, 5, 4), randn(rng, *v_batch, 5, 2)
    mask = np.array([True, True, False, True, True])
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    keep = [0, 1, 3, 4]
    out_kept, _ = sdpa.sdpa_forward(q, k[..., keep, :], v[..., keep, :])   # the masked key left out
    np.testing.assert_allclose(out, out_kept, rtol=1e-13, atol=1e-15)


def test_masked_garbage_with_a_mask_of_more_batch_dims_than_k(rng, sdpa):
    """Kills a change to the axes ``_alive_in`` reduces over (``lead + i``, ``n == 1``,
    ``full[...] != 1``): k, v (2, 1, S, d) under a mask (5, 2, 3, L, S), where a key slot of k
    is dead when every query of every broadcast copy (5 x 3) masks it; a NaN in a dead slot never
    reaches the answer, which equals the one with 0 in that slot."""
    L, S = 2, 4
    q, k, v = randn(rng, 3, L, 2), randn(rng, 2, 1, S, 2), randn(rng, 2, 1, S, 3)
    mask = rng.random((5, 2, 3, L, S)) > 0.3
    mask[..., 0] = True
    mask[:, 0, :, :, 2] = False                          # key 2 of k[0] is dead everywhere
    k0, v0 = k.copy(), v.copy()
    k0[0, 0, 2], v0[0, 0, 2] = 0.0, 0.0
    k[0, 0, 2], v[0, 0, 2] = np.nan, np.inf
    dout = randn(rng, 5, 2, 3, L, 3)
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    out0, cache0 = sdpa.sdpa_forward(q, k0, v0, mask)
    for a, b in zip((out, *sdpa.sdpa_backward(dout, cache)),
                    (out0, *sdpa.sdpa_backward(dout, cache0)), strict=True):
        assert np.isfinite(a).all() and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_masked_garbage_in_v_of_fewer_batch_dims_than_k(rng, sdpa):
    """Kills ``x.shape[:-2]`` -> ``[:-3]`` in the reduction of ``drop_masked``'s ``zero``: k (2, 2,
    2, S, d), v (2, 2, S, d), key 2 dead for v[0] (all of its broadcast copies) and alive for
    v[1]; a NaN in v[0]'s slot must not reach the answer."""
    q, k, v = randn(rng, 3, 4), randn(rng, 2, 2, 2, 5, 4), randn(rng, 2, 2, 5, 2)
    mask = np.ones((2, 2, 2, 1, 5), bool)
    mask[:, 0, :, :, 2] = False
    v0 = v.copy()
    v0[0, :, 2] = 0.0
    v[0, :, 2] = np.nan
    dout = randn(rng, 2, 2, 2, 3, 2)
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    out0, cache0 = sdpa.sdpa_forward(q, k, v0, mask)
    for a, b in zip((out, *sdpa.sdpa_backward(dout, cache)),
                    (out0, *sdpa.sdpa_backward(dout, cache0)), strict=True):
        assert np.isfinite(a).all() and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_masked_key_with_v_whose_first_dims_equal_the_kv_batch(rng, sdpa):
    """Kills ``x.shape[:-2]`` -> ``x.shape[:2]`` in ``zero``'s test: k (2, 2, S=2, d) and v (2,
    S=2, d_v), whose first two dims (2, 2) equal the k, v batch (2, 2), so the mutant skips
    reducing the alive keys to v's own batch; v, and dv, must keep v's shape."""
    q, k, v = randn(rng, 3, 4), randn(rng, 2, 2, 2, 4), randn(rng, 2, 2, 3)
    mask = np.array([True, False])
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    np.testing.assert_allclose(out, np.broadcast_to(v[:, :1], (2, 2, 1, 3)).repeat(3, axis=2),
                               rtol=1e-15)        # only key 0 is seen: every query gets v[..., 0, :]
