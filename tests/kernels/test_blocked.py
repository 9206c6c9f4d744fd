"""The blocked path (kernels/blocked.py): which blocks and key spans it plans, when sdpa_forward
takes it, and that it gives the reference kernel's numbers with real block sizes on two threads, in the
edge cases of its own (overflow fallbacks, thread settings; garbage at masked keys: the
``blocked`` path of tests/kernels/test_masked_garbage.py).

The whole reference-equals-fused matrix also runs on it (tests/kernels/test_reference_equals_fused.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import blocked, recycled, reference
from attention_np.kernels.threads import blas_threads
from attention_np.paper.masks import causal_mask
from tests.helpers import assert_float32_near_float64, q_times_scale_overflows, randn


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "2")


@pytest.fixture
def forced(monkeypatch, two_threads):
    """Every call blocked, two query rows per block when the batch is 1 and S = 8."""
    monkeypatch.setattr(blocked, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(blocked, "BLOCK_ELEMENTS", 16)


def test_plan_reads_only_the_keys_a_causal_block_may_attend(forced):
    # top-left causal, L = S = 8: rows i:i+2 may attend keys 0 .. i+1
    assert blocked.plan((), 8, 8, causal_mask(8, 8)) == [(0, 2, 0, 2), (2, 4, 0, 4),
                                                          (4, 6, 0, 6), (6, 8, 0, 8)]


def test_plan_skips_padding_and_blocks_that_attend_nothing(forced):
    mask = np.ones((2, 1, 8, 8), bool)
    mask[..., 5:] = False                 # keys 5, 6, 7 are padding in both batch entries
    mask[:, :, 2:4, :] = False            # rows 2, 3 attend nothing
    mask[1, 0, 6, 1] = False
    mask[0, 0, 6:, 0] = False             # key 0 is still attended by batch 1's rows 6, 7
    assert blocked.plan((2, 1), 8, 8, mask) == [(0, 1, 0, 5), (1, 2, 0, 5), (2, 3, 0, 0),
                                                (3, 4, 0, 0), (4, 5, 0, 5), (5, 6, 0, 5),
                                                (6, 7, 0, 5), (7, 8, 0, 5)]


def test_plan_of_a_band_starts_after_the_first_key(forced):
    i, j = np.arange(8)[:, None], np.arange(8)
    band = (j <= i) & (j > i - 3)         # a sliding window of 3 keys
    spans = [(j0, j1) for _, _, j0, j1 in blocked.plan((), 8, 8, band)]
    assert spans == [(0, 2), (0, 4), (2, 6), (4, 8)]


def test_plan_caps_the_rows_of_a_block():
    L = 2 * blocked.MAX_ROWS + 3
    rows = [j - i for i, j, _, _ in blocked.plan((1,), L, 10, None)]
    assert max(rows) == blocked.MAX_ROWS and sum(rows) == L
    masked = [j - i for i, j, _, _ in blocked.plan((1,), L, 10, np.ones((L, 10), bool))]
    assert max(masked) == min(blocked.MAX_ROWS, blocked.MASKED_ROWS) and sum(masked) == L


def test_plan_makes_at_least_min_blocks():
    rows = [j - i for i, j, _, _ in blocked.plan((1,), 200, 600, None, min_blocks=2)]
    assert rows == [100, 100]
    assert len(blocked.plan((1,), 1, 600, None, min_blocks=2)) == 1      # one row: one block


@pytest.mark.parametrize("workers, blocks", [("1", 1), ("2", 2), ("3", 3)])
def test_one_head_is_cut_into_a_block_per_worker(rng, monkeypatch, workers, blocks):
    """A single head whose rows fit one block still gives every worker a block (its products
    on one BLAS thread each), instead of running alone on the calling thread."""
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", workers)
    q, k, v = randn(rng, 1, 220, 8), randn(rng, 1, 600, 8), randn(rng, 1, 600, 8)
    out, cache = an.sdpa_forward(q, k, v)
    assert len(cache.blocks) == blocks
    np.testing.assert_allclose(out, an.paper.sdpa_forward(q, k, v)[0], rtol=1e-12, atol=1e-13)
    dq, dk, dv = an.sdpa_backward(np.ones_like(out), cache)
    pq, pk, pv = an.paper.sdpa_backward(np.ones_like(out), an.paper.sdpa_forward(q, k, v)[1])
    for got, want in ((dq, pq), (dk, pk), (dv, pv)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("kw, taken", [
    (dict(), True),
    (dict(is_causal=True), True),
    (dict(spec=an.AttentionSpec(dropout_p=0.1), rng=0), False),
    (dict(bias=np.zeros((256, 256))), False),
])
def test_sdpa_forward_takes_the_blocked_path_for_big_scores_without_dropout_or_bias(rng, kw, taken):
    q, k, v = randn(rng, 2, 256, 8), randn(rng, 2, 256, 8), randn(rng, 2, 256, 8)  # 2**17 scores
    assert (an.sdpa_forward(q, k, v, **kw)[1].blocks is not None) is taken
    small = an.sdpa_forward(q[:, :100], k, v)[1]
    assert small.blocks is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_real_block_sizes_on_two_threads_give_the_reference_numbers(rng, dtype, two_threads):
    B, H, L, S = 2, 3, 300, 260           # 468 000 scores: blocks of MAX_ROWS rows and a rest
    q, k, v = randn(rng, B, H, L, 16, dtype=dtype), randn(rng, B, H, S, 16, dtype=dtype), \
        randn(rng, B, H, S, 8, dtype=dtype)
    mask = np.ones((B, 1, 1, S), bool)
    mask[1, ..., 200:] = False            # batch 1 pads its last 60 keys
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=True)
    assert cache.blocks is not None and len(cache.blocks) == -(-L // blocked.MASKED_ROWS) > 1
    out_t, cache_t = reference.sdpa_forward(q, k, v, mask, is_causal=True)
    dout = randn(rng, *out.shape, dtype=dtype)
    eps = np.finfo(dtype).eps
    for what, a, b in zip(("out", "weights", "dq", "dk", "dv"),
                          (out, cache.weights, *an.sdpa_backward(dout, cache)),
                          (out_t, cache_t.weights, *reference.sdpa_backward(dout, cache_t)),
                          strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=64 * eps * max(1.0, np.abs(b).max()),
                                   err_msg=what)


def test_one_thread_and_two_give_the_same_forward_and_backward(rng, monkeypatch):
    # The blocks are the same on any number of workers, so the forward's formulas and summation
    # order are too; only BLAS may differ (one worker: BLAS on its own threads, which some vendors
    # split into another order), hence a few ulps rather than bit for bit. dk, dv: the workers'
    # partial sums are added in another order.
    q, k, v = randn(rng, 4, 300, 16), randn(rng, 4, 300, 16), randn(rng, 4, 300, 16)
    dout = randn(rng, 4, 300, 16)
    results = {}
    for n in ("1", "2"):
        monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", n)
        out, cache = an.sdpa_forward(q, k, v, is_causal=True)
        results[n] = (out, *an.sdpa_backward(dout, cache))
    eps = np.finfo(np.float64).eps
    for name, a, b in zip(("out", "dq", "dk", "dv"), results["1"], results["2"], strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=64 * eps * max(1.0, np.abs(b).max()), err_msg=name)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_thread_count_names_the_variable(rng, monkeypatch, value):
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", value)
    q = randn(rng, 2, 256, 8)
    expected = f"ATTENTION_NP_NUM_THREADS must be a positive integer, got '{value}'"
    with pytest.raises(ValueError, match=expected):
        an.sdpa_forward(q, q, q)


def test_blas_threads_are_restored_after_a_blocked_call(rng, two_threads):
    from attention_np.kernels.threads import openblas_thread_functions
    funcs = openblas_thread_functions()
    if funcs is None:
        pytest.skip("NumPy is not linked against OpenBLAS here")
    get, _ = funcs
    with blas_threads(2):
        an.sdpa_forward(*(randn(rng, 2, 256, 8) for _ in range(3)))
        assert get() == 2


def test_float32_values_near_the_maximum_do_not_overflow(forced):
    q = np.zeros((1, 8, 4), np.float32)
    v = np.full((1, 8, 3), 3e38, np.float32)
    out, cache = an.sdpa_forward(q, q, v, is_causal=True)
    assert cache.blocks is not None
    np.testing.assert_allclose(out, v, rtol=1e-6)          # every row averages 3e38s: 3e38


def test_q_times_scale_may_overflow_where_the_scores_do_not(forced, rng):
    q = np.full((1, 6, 2), 1e10, np.float32)
    k = np.full((1, 6, 2), 1e-10, np.float32)
    v = randn(rng, 1, 6, 2, dtype=np.float32)
    out, cache = an.sdpa_forward(q, k, v, scale=1e30)      # scores 2e30, q * scale 1e40 = inf
    assert cache.blocks is not None and np.isfinite(out).all()
    with pytest.warns(RuntimeWarning, match="overflow"):     # dk = 1e40 * ... is not representable:
        dq, dk, dv = an.sdpa_backward(np.ones_like(out), cache)   # NumPy says so, and this test expects it
    assert np.isfinite(dq).all() and np.isfinite(dv).all() and not np.isfinite(dk).all()
    # equal scores: every row averages v
    np.testing.assert_allclose(out, np.broadcast_to(v.mean(axis=1, keepdims=True), out.shape), rtol=1e-6)


def test_the_old_import_path_of_blas_threads_still_works():
    from attention_np.kernels.threads import blas_threads as old
    assert old is blas_threads


def test_parallel_map_inside_a_worker_runs_inline_instead_of_waiting_for_itself(two_threads):
    from attention_np.kernels.threads import parallel_map

    def outer(part):
        return sum(parallel_map(lambda x: x * part, [1, 2, 3]))    # nested: no deadlock

    assert parallel_map(outer, [1, 10]) == [6, 60]


@pytest.mark.parametrize("case", ["plain", "causal", "padding", "gqa", "minus_inf_sink"])
def test_sinks_on_the_blocked_path_give_the_fused_numbers(forced, rng, case):
    """Sinks join each row's max and sum block by block: the same out, gradients, dsinks and
    weights as the unblocked fused path (forced there by a zero bias, which the blocked path
    does not take), a row that attends no key and a block whose rows attend nothing included."""
    B, H, L, S, d = 2, 4, 8, 8, 3
    q, k, v = randn(rng, B, H, L, d), randn(rng, B, H, S, d), randn(rng, B, H, S, 2)
    dout = randn(rng, B, H, L, 2)
    sinks, kw = randn(rng, H), {}
    if case == "causal":
        kw["is_causal"] = True
    elif case == "padding":
        mask = np.ones((B, 1, L, S), bool)
        mask[0, :, :, 5:] = False                    # padded keys
        mask[1, :, 2:4] = False                      # rows 2, 3 of sequence 1: one block, no key
        kw["mask"] = mask
    elif case == "gqa":
        k, v = k[:, :2], v[:, :2]
        kw["spec"] = an.AttentionSpec(enable_gqa=True)
    else:
        sinks[1] = -np.inf
        kw["mask"] = np.ones((L, S), bool)
        kw["mask"][4:6] = False
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, **kw)
    want, want_cache = an.sdpa_sinks_forward(q, k, v, sinks, bias=np.zeros((L, S)), **kw)
    assert cache.attention.blocks is not None and want_cache.attention.blocks is None
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(cache.attention.sink_weight, want_cache.attention.sink_weight,
                               rtol=1e-13, atol=1e-15)
    for g, w in zip(an.sdpa_sinks_backward(dout, cache), an.sdpa_sinks_backward(dout, want_cache),
                    strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_sinks_on_the_blocked_path_keep_garbage_at_masked_slots_out(forced, rng, bad):
    q, k, v = randn(rng, 2, 2, 6, 3), randn(rng, 2, 2, 8, 3), randn(rng, 2, 2, 8, 3)
    dout = randn(rng, 2, 2, 6, 3)
    sinks, mask = randn(rng, 2), np.ones((2, 1, 6, 8), bool)
    mask[0, :, :, 5:] = False                        # padded keys of sequence 0
    mask[1, :, 3] = False                            # query 3 of sequence 1 attends the sink alone
    runs = []
    for garbage in (False, True):
        kk, vv, qq = k.copy(), v.copy(), q.copy()
        kk[0, :, 5:] = vv[0, :, 5:] = qq[1, :, 3] = bad if garbage else 0
        with np.errstate(invalid="ignore", over="ignore"):
            out, cache = an.sdpa_sinks_forward(qq, kk, vv, sinks, mask)
            runs.append([out, *an.sdpa_sinks_backward(dout, cache)])
        assert cache.attention.blocks is not None
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------
# (``forced``: every call blocked, two query rows per block when the batch is 1 and S = 8)


@pytest.mark.parametrize("mask_shape", [(), (8,), (1, 8)])
def test_blocked_unbatched_with_a_mask_of_fewer_dims(rng, forced, mask_shape):
    """Kills ``2`` -> ``3`` and ``2 - ndim`` -> ``2 + ndim`` or ``3 - ndim`` in the padding of a
    mask's dims: a 0-d, 1-D or 2-D mask with an unbatched ``q (L, d_k)`` adds no batch dim; the
    output is ``(L, d_v)``, as the reference kernel's."""
    q, k, v = randn(rng, 6, 4), randn(rng, 8, 4), randn(rng, 8, 3)
    mask = np.ones(mask_shape, bool) if mask_shape else np.True_
    if mask_shape:
        mask[..., 2] = False
    out, cache = an.sdpa_forward(q, k, v, mask)
    assert cache.blocks is not None
    ref, _ = reference.sdpa_forward(q, k, v, mask)
    assert out.shape == ref.shape == (6, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_blocked_garbage_in_a_block_whose_other_row_sees_it(rng, forced, bad):
    """Kills ``mask is not None`` -> ``is None`` where the forward and backward choose the
    attended-pairs sums, and ``invalid=`` dropped from their errstates (a warning): batch 1, two
    rows per block, causal, a NaN or inf at key 5. Rows 4 and 5 share a block whose key span
    holds key 5, which row 4 does not see; row 4's output and gradient must equal the clean
    input's, and no warning may surface (the fused path's behaviour)."""
    q, k, v, dout = randn(rng, 1, 8, 4), randn(rng, 1, 8, 4), randn(rng, 1, 8, 3), randn(rng, 1, 8, 3)
    q[:, 6] = np.abs(q[:, 6])             # an inf key scores +inf: the softmax meets inf - inf
    q[:, 7] = np.abs(q[:, 7]) * [1, -1, 1, -1]      # +inf - inf inside the product q @ k.T
    kb, vb = k.copy(), v.copy()
    kb[:, 5] = vb[:, 5] = bad
    clean, c_cache = an.sdpa_forward(q, k, v, is_causal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dirty, d_cache = an.sdpa_forward(q, kb, vb, is_causal=True)
        grads = an.sdpa_backward(dout, d_cache)
    assert d_cache.blocks is not None and any(b[:2] == (4, 6) for b in d_cache.blocks)
    # Equal to rounding, not bit for bit: the clean input's blocks may skip the shift by the row
    # max (blocked.small_scores: its scores are provably small), which a NaN or inf rules out.
    np.testing.assert_allclose(dirty[:, :5], clean[:, :5], rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(grads[0][:, :5], an.sdpa_backward(dout, c_cache)[0][:, :5], rtol=1e-14,
                               atol=1e-15)


def test_blocked_backward_when_q_times_scale_overflows_but_the_softmax_is_not_saturated(
        rng, forced):
    """Kills the blocked backward's recomputed ``dk`` deleted (or divided by the scale), and its
    errstate dropped: float32, causal, scale 1e29, max |q| = 5e9, k ~ 5e-39 (scores ~1),
    against the float64 reference kernel on the same inputs, without a warning."""
    q, k, v, dout = q_times_scale_overflows(rng, (1,))
    with warnings.catch_warnings():       # causal: masked pairs have dscores = 0, and 0 * inf
        warnings.simplefilter("error")    # (q * scale) is the "invalid" the errstate hides
        out, cache = an.sdpa_forward(q, k, v, scale=1e29, is_causal=True)
        grads = an.sdpa_backward(dout, cache)
    assert cache.blocks is not None
    ref, c64 = reference.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), scale=1e29,
                                     is_causal=True)
    assert_float32_near_float64(out, grads, ref,
                                reference.sdpa_backward(dout.astype(np.float64), c64))


def test_blocked_values_of_mixed_sign_near_float32_max_without_a_warning(forced):
    """Kills ``over=`` or ``invalid=`` dropped from the errstates of the blocked forward's
    ``e @ v`` and its fallback: equal weights (q = 0) on values +-3e38 overflow ``e @ v`` before
    the division by the row sum; the fallback gives the average, 3e38 / 5 on every row, without
    a warning."""
    q = np.zeros((1, 6, 4), np.float32)
    k = np.ones((1, 5, 4), np.float32)
    v = np.array([3e38, 3e38, -3e38, -3e38, 3e38], np.float32).reshape(1, 5, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v)
    assert cache.blocks is not None
    np.testing.assert_allclose(out, np.float32(3e38) / 5, rtol=1e-6)


def test_blocked_one_key_and_a_row_that_sees_none(rng, forced):
    """Probes ``S == 0`` -> ``S == 1`` in the plan's empty key span (an equivalent mutant,
    docs/mutation.md): with one key, a row that may not attend it gives 0, and the others give
    v, forward and backward as the reference."""
    q, k, v, dout = randn(rng, 4, 3), randn(rng, 1, 3), randn(rng, 1, 2), randn(rng, 4, 2)
    mask = np.array([[True], [False], [True], [True]])
    out, cache = an.sdpa_forward(q, k, v, mask)
    assert cache.blocks is not None
    ref, rc = reference.sdpa_forward(q, k, v, mask)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    for g, r in zip(an.sdpa_backward(dout, cache), reference.sdpa_backward(dout, rc), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


def test_blocked_infinite_values_without_a_mask_give_nan_silently_as_the_fused_path(rng, forced):
    """Kills ``invalid=`` dropped from the errstate of the blocked forward's fallback: values
    +inf and -inf, no mask: ``e @ v`` is NaN (inf - inf), the fallback meets the same; NaN in,
    NaN out, without a warning, as the fused path (which ignores invalid operations there)."""
    q, k = randn(rng, 1, 6, 4), randn(rng, 1, 5, 4)
    v = randn(rng, 1, 5, 2)
    v[0, 1], v[0, 3] = np.inf, -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v)
        assert cache.blocks is not None
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(blocked, "MIN_ELEMENTS", 1 << 40)          # the fused path, unblocked
            fused, fcache = an.sdpa_forward(q, k, v)
    assert fcache.blocks is None
    np.testing.assert_array_equal(out, fused)                     # NaN where NaN


def test_blocked_backward_is_as_silent_as_the_fused_path_when_garbage_meets_an_overflow(
        rng, forced):
    """Kills ``over=`` dropped from the blocked backward's errstate: an inf in a value that rows
    0-4 do not see (causal), and ``dout ~ 1e30`` times ``v ~ 1e10`` overflowing float32: the
    fused backward ignores overflows once an input is non-finite under a mask, and so does the
    blocked one; the same numbers."""
    q, k = randn(rng, 1, 8, 3, dtype=np.float32), randn(rng, 1, 8, 3, dtype=np.float32)
    v = (randn(rng, 1, 8, 2) * 1e10).astype(np.float32)
    v[0, 5] = np.inf
    dout = (randn(rng, 1, 8, 2) * 1e30).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, cache = an.sdpa_forward(q, k, v, is_causal=True)
        got = an.sdpa_backward(dout, cache)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(blocked, "MIN_ELEMENTS", 1 << 40)
            _, fcache = an.sdpa_forward(q, k, v, is_causal=True)
            want = an.sdpa_backward(dout, fcache)
    assert cache.blocks is not None and fcache.blocks is None
    assert not np.isfinite(want[0][0, :5]).all()          # rows that never see key 5 overflow
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_the_blocked_e_is_recycled_only_when_nothing_holds_it(rng):
    """kernels/recycled.py: a forward's e is handed to a later forward only once no cache, no
    view of it and no caller holds it; while any does, the later forward gets new memory."""
    q, k, v = (randn(rng, 2, 1024, 8, dtype=np.float32) for _ in range(3))     # 8 MiB of e
    recycled.release()
    _, first = an.sdpa_forward(q, k, v)
    assert first.blocks is not None and first.e.nbytes >= recycled.MIN_BYTES
    _, second = an.sdpa_forward(q, k, v)                          # first still alive
    assert not np.shares_memory(first.e, second.e)
    held = first.e[:5]                                            # a view outlives its cache
    want = first.weights
    del first
    _, third = an.sdpa_forward(q, k, v)
    assert not np.shares_memory(third.e, held) and not np.shares_memory(third.e, second.e)
    address = third.e.ctypes.data
    del held, third                                               # nothing holds it now
    _, fourth = an.sdpa_forward(q, k, v)
    assert fourth.e.ctypes.data == address                        # its memory again, no new pages
    np.testing.assert_array_equal(fourth.weights, want)


@pytest.mark.parametrize("scale, shifted", [(0.1, False), (500.0, True)])
def test_blocks_shifted_by_the_row_max_or_not_give_the_reference_weights(rng, forced, monkeypatch,
                                                                          scale, shifted):
    """A block whose scores are provably small (Cauchy-Schwarz, blocked.small_scores) skips the
    shift by the row max; a block of big scores takes it (scores of a few thousand overflow
    float64 unshifted). Both give the reference kernel's output, weights and gradients."""
    calls = []
    monkeypatch.setattr(blocked, "small_scores",
                        lambda *a, f=blocked.small_scores: calls.append(f(*a)) or calls[-1])
    q, k, v, dout = randn(rng, 3, 8, 4), randn(rng, 3, 8, 4), randn(rng, 3, 8, 3), randn(rng, 3, 8, 3)
    out, cache = an.sdpa_forward(q, k, v, is_causal=True, scale=scale)
    assert cache.blocks is not None and calls
    assert (not any(calls)) if shifted else all(calls)
    ref, rc = reference.sdpa_forward(q, k, v, is_causal=True, scale=scale)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(cache.weights, rc.weights, rtol=1e-13, atol=1e-15)
    for got, want in zip(an.sdpa_backward(dout, cache), reference.sdpa_backward(dout, rc), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
