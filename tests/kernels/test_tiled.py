"""Tiled attention with an online softmax gives the dense path's numbers, without an (L, S) array."""

from __future__ import annotations

import dataclasses
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attention_np as an
from attention_np.kernels import scratch
from tests import oracles, torch_ref
from tests.helpers import (
    assert_float32_all,
    assert_float32_near_float64,
    max_abs_diff,
    q_times_scale_overflows,
    randn,
    rounded,
)


def _both(q, k, v, mask=None, is_causal=False, block_size=3, scale=None, rng=None, dout=None):
    """Dense and tiled forward and backward with one random upstream gradient (or ``dout``)."""
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=scale)
    fout, fcache = an.flash_attention_forward(q, k, v, mask, is_causal=is_causal, scale=scale,
                                              block_size=block_size)
    if dout is None:
        dout = (rng or np.random.default_rng(0)).standard_normal(out.shape).astype(q.dtype)
    return ((out, *an.sdpa_backward(dout, cache)),
            (fout, *an.flash_attention_backward(dout, fcache)))


@pytest.mark.parametrize("block_size", [1, 3, 4, 7, 128])
@pytest.mark.parametrize("L,S", [(8, 8), (5, 11), (11, 5)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiled_equals_dense_for_any_block_size_including_non_dividing(rng, block_size, L, S, is_causal):
    q, k, v = randn(rng, 2, 3, L, 4), randn(rng, 2, 3, S, 4), randn(rng, 2, 3, S, 5)
    dense, tiled = _both(q, k, v, is_causal=is_causal, block_size=block_size, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape
        assert max_abs_diff(a, b) < 1e-13


@pytest.mark.parametrize("mask_shape", [(6, 9), (2, 1, 1, 9), (2, 3, 6, 9), (1, 6, 1), (3, 1, 9)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiled_equals_dense_with_broadcast_masks(rng, mask_shape, is_causal):
    q, k, v = randn(rng, 2, 3, 6, 4), randn(rng, 2, 3, 9, 4), randn(rng, 2, 3, 9, 5)
    mask = rng.random(mask_shape) > 0.35
    dense, tiled = _both(q, k, v, mask, is_causal=is_causal, block_size=4, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert max_abs_diff(a, b) < 1e-13


def test_tiled_sums_gradients_over_broadcast_batch_dims_like_dense(rng):
    # k, v shared by every batch entry; a mask that adds a batch dim of its own
    q, k, v = randn(rng, 3, 1, 5, 4), randn(rng, 7, 4), randn(rng, 1, 2, 7, 2)
    mask = rng.random((4, 1, 1, 1, 7)) > 0.3
    dense, tiled = _both(q, k, v, mask, is_causal=True, block_size=3, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape
        assert max_abs_diff(a, b) < 1e-13


def test_fully_masked_rows_give_zero_output_and_gradients_without_warnings(rng):
    q, k, v = randn(rng, 2, 6, 4), randn(rng, 2, 10, 4), randn(rng, 2, 10, 3)
    mask = rng.random((2, 6, 10)) > 0.4
    mask[0, 1] = False            # fully masked row
    mask[1, 4, :4] = False        # row masked in its first blocks only: online max starts at -inf
    mask[1, 4, 4:] = False
    mask[0, 2, :8] = False        # first two blocks masked, then keys: the -inf max is replaced
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.flash_attention_forward(q, k, v, mask, block_size=4)
        dq, dk, dv = an.flash_attention_backward(randn(rng, *out.shape), cache)
    assert np.all(out[0, 1] == 0) and np.all(out[1, 4] == 0)
    assert np.all(dq[0, 1] == 0) and np.all(dq[1, 4] == 0)
    assert np.isinf(cache.lse[0, 1]) and cache.lse[0, 1] > 0
    dense, tiled = _both(q, k, v, mask, block_size=4, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert np.all(np.isfinite(b))
        assert max_abs_diff(a, b) < 1e-13


@given(L=st.integers(1, 12), S=st.integers(1, 12), block_size=st.integers(1, 13),
       is_causal=st.booleans(), density=st.sampled_from([0.0, 0.3, 0.8, 1.0]),
       seed=st.integers(0, 2**16))
def test_tiled_equals_dense_on_random_shapes_masks_and_blocks(L, S, block_size, is_causal, density, seed):
    rng = np.random.default_rng(seed)
    q, k, v = randn(rng, 2, L, 3), randn(rng, 2, S, 3), randn(rng, 2, S, 2)
    mask = rng.random((2, L, S)) < density
    dense, tiled = _both(q, k, v, mask, is_causal=is_causal, block_size=block_size, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert max_abs_diff(a, b) < 1e-13


def test_lse_is_the_log_sum_exp_of_each_rows_scores(rng):
    q, k, v = randn(rng, 3, 7, 4), randn(rng, 3, 9, 4), randn(rng, 3, 9, 4)
    _, cache = an.flash_attention_forward(q, k, v, is_causal=True, scale=0.7, block_size=2)
    scores = np.where(an.causal_mask(7, 9), 0.7 * q @ np.swapaxes(k, -1, -2), -np.inf)
    big = scores.max(-1)
    want = big + np.log(np.exp(scores - big[..., None]).sum(-1))
    assert cache.lse.shape == (3, 7)
    assert max_abs_diff(cache.lse, want) < 1e-13


def test_tiled_backward_passes_gradcheck(rng):
    q, k, v = randn(rng, 2, 5, 3), randn(rng, 2, 7, 3), randn(rng, 2, 7, 2)
    mask = rng.random((5, 7)) > 0.3

    def forward(q, k, v):
        return an.flash_attention_forward(q, k, v, mask, is_causal=True, block_size=3)

    result = an.gradcheck(forward, an.flash_attention_backward, (q, k, v))
    assert result.ok, str(result)


def test_tiled_matches_torch_sdpa_float64(rng):
    q, k, v = randn(rng, 2, 4, 37, 8), randn(rng, 2, 4, 45, 8), randn(rng, 2, 4, 45, 8)
    mask = rng.random((2, 1, 37, 45)) > 0.2
    out, cache = an.flash_attention_forward(q, k, v, mask, block_size=16)
    dout = randn(rng, *out.shape)
    grads = an.flash_attention_backward(dout, cache)
    for ours, theirs in zip((out, *grads), torch_ref.sdpa(q, k, v, dout, mask=mask), strict=True):
        assert max_abs_diff(ours, theirs) < 1e-12


@pytest.mark.float32
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiled_float32_stays_float32_and_is_as_accurate_as_dense_float32(rng, is_causal):
    f32, f64 = rounded(*(randn(rng, 2, 2, 200, 32) * 1.5 for _ in range(3)), randn(rng, 2, 2, 200, 32))
    oracle = oracles.attention_and_gradients(*f64, is_causal=is_causal)   # by definition, float64
    fout, fcache = an.flash_attention_forward(*f32[:3], is_causal=is_causal, block_size=48)
    tiled32 = (fout, *an.flash_attention_backward(f32[3], fcache))
    out32, cache32 = an.sdpa_forward(*f32[:3], is_causal=is_causal)
    dense32 = (out32, *an.sdpa_backward(f32[3], cache32))
    assert fcache.lse.dtype == np.float32
    names = ("out", "dq", "dk", "dv")
    # the float32 rule, the dense path in the framework's place: each within 10x the other's error
    assert_float32_all(names, tiled32, dense32, oracle, framework="dense")
    # and both against torch's float32 error (two paths of ours could share a bug)
    torch32 = torch_ref.sdpa(*f32, is_causal=is_causal)
    assert_float32_all(names, tiled32, torch32, oracle, framework="torch")
    assert_float32_all(names, dense32, torch32, oracle, framework="torch")


def test_cache_keeps_inputs_output_and_lse_only(rng):
    q, k, v = randn(rng, 2, 30, 4), randn(rng, 2, 40, 4), randn(rng, 2, 40, 4)
    out, cache = an.flash_attention_forward(q, k, v, block_size=8)
    arrays = {name: x for name, x in vars(cache).items() if isinstance(x, np.ndarray)}
    assert set(arrays) == {"q", "k", "v", "out", "lse"}
    assert cache.lse.shape == (2, 30)


def test_peak_memory_grows_with_L_times_block_not_L_times_S():
    """Dense attention at L = S = 2048 holds (L, S) float64 arrays of 32 MiB; the tiled path holds
    a few (L, block) tiles (1 MiB each at block 64) and the (L, d) inputs and outputs."""
    rng = np.random.default_rng(0)
    L, d, block = 2048, 16, 64
    q, k, v, dout = (rng.standard_normal((L, d)) for _ in range(4))
    scratch.release()              # the kernel's reused buffers are counted, not kept from before
    tracemalloc.start()
    try:
        out, cache = an.flash_attention_forward(q, k, v, is_causal=True, block_size=block)
        an.flash_attention_backward(dout, cache)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    one_tile, one_scores = L * block * 8, L * L * 8
    assert peak < 8 * one_tile + 8 * L * d * 8
    assert peak < one_scores / 4


def test_tiled_refuses_bad_arguments(rng):
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    with pytest.raises(ValueError, match="block_size must be a positive int, got 0"):
        an.flash_attention_forward(q, k, v, block_size=0)
    with pytest.raises(TypeError, match="pass it as bias"):
        an.flash_attention_forward(q, k, v, np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\) does not broadcast"):
        an.flash_attention_forward(q, k, v, np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="q has d_k=4 but k has d_k=3"):
        an.flash_attention_forward(q, k[:, :3], v)
    out, cache = an.flash_attention_forward(q, k, v)
    with pytest.raises(ValueError, match=r"dout has shape \(3, 3\) but out has shape \(3, 2\)"):
        an.flash_attention_backward(np.zeros((3, 3)), cache)


def _peak_bytes(f, *args):
    scratch.release()              # the kernel's reused buffers are counted, not kept from before
    tracemalloc.start()
    try:
        f(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("threads", ["1", "2"])
def test_float32_forward_passes_hold_no_float64_temporaries(monkeypatch, threads):
    """float32 in, float32 work: the dense forward holds one (L, S) float32 array (4 MiB here),
    a float64 temporary of the scores would add 8 MiB; the tiled one holds (L, block) tiles.

    The dense forward's blocked path gives each worker thread its own (64, S) tiles, one worker
    per core unless ATTENTION_NP_NUM_THREADS says otherwise: the count is fixed here, or the peak
    would grow with the machine's cores (measured on 2 cores with 1 to 64 workers: 1.11 to 1.30
    x the scores for the plain forward)."""
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", threads)
    rng = np.random.default_rng(0)
    L, d = 1024, 32
    q, k, v = (rng.standard_normal((L, d)).astype(np.float32) for _ in range(3))
    scores32 = L * L * 4
    assert _peak_bytes(an.sdpa_forward, q, k, v) < 1.5 * scores32
    assert _peak_bytes(lambda: an.sdpa_forward(q, k, v, is_causal=True)) < 1.5 * scores32 + 2 * L * L
    # dropout: the keep-mask (1 byte per weight) and the kept weights, but no float64 random draw
    assert _peak_bytes(lambda: an.sdpa_forward(q, k, v, rng=0,
                                               spec=an.AttentionSpec(dropout_p=0.1))) < 3.5 * scores32
    tiled = _peak_bytes(lambda: an.flash_attention_forward(q, k, v, block_size=64))
    assert tiled < 4 * (L * 64 * 4) + 8 * (L * d * 4)


@pytest.mark.parametrize("H,H_kv", [(6, 2), (4, 1), (4, 2)])  # (4, 2): 2 query heads per kv head
@pytest.mark.parametrize("mask_shape", [None, (2, 6, 5, 9), (2, 1, 1, 9)])
def test_tiled_grouped_query_attention_equals_dense(rng, H, H_kv, mask_shape):
    q, k, v = randn(rng, 2, H, 5, 4), randn(rng, 2, H_kv, 9, 4), randn(rng, 2, H_kv, 9, 3)
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape[:1] + (H if mask_shape[1] > 1 else 1,) + mask_shape[2:]) > 0.3
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=True, spec=an.AttentionSpec(enable_gqa=True))
    fout, fcache = an.flash_attention_forward(q, k, v, mask, is_causal=True, block_size=4,
                                              spec=an.AttentionSpec(enable_gqa=True))
    dout = randn(rng, *out.shape)
    dense = (out, *an.sdpa_backward(dout, cache))
    tiled = (fout, *an.flash_attention_backward(dout, fcache))
    assert fcache.lse.shape == (2, H, 5)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape
        assert max_abs_diff(a, b) < 1e-13


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_tiled_running_max_is_per_row(rng):
    """Kills ``p.max(axis=-1)`` -> ``p.max()``: one max per tile instead of per row. Rows whose
    scores lie +-1000 apart then underflow to 0 (or 0/0) against the other rows' max."""
    q, k, v = randn(rng, 3, 4), randn(rng, 6, 4), randn(rng, 6, 2)
    q[0] *= 1000.0
    q[1] *= -1000.0
    dense, tiled = _both(q, k, v, block_size=2, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert np.isfinite(b).all()
        assert max_abs_diff(a, b) < 1e-9 * max(1.0, np.abs(a).max())


@pytest.mark.parametrize("mask_shape", [(2, 5), (2, 1), (1, 2), (2, 2)])
def test_tiled_masks_with_two_rows_or_columns(rng, mask_shape):
    """Kills ``mask.shape[-2] > 1`` -> ``> 2`` (and the same for columns): a mask with 2 rows
    must be sliced from the first query row the causal tile starts at."""
    L, S = 2, 5 if mask_shape[-1] != 2 else 2
    if mask_shape[-1] == 1:
        S = 5
    q, k, v = randn(rng, L, 3), randn(rng, S, 3), randn(rng, S, 2)
    shape = (mask_shape[0], mask_shape[1] if mask_shape[1] != 5 else S)
    mask = rng.random(shape) > 0.4
    mask[..., 0] = True
    dense, tiled = _both(q, k, v, mask, is_causal=True, block_size=1, rng=rng)
    for a, b in zip(dense, tiled, strict=True):
        assert max_abs_diff(a, b) < 1e-13


def test_tiled_mask_with_extra_batch_dims(rng):
    """Kills ``broadcast_shapes(mask.shape, (L, S))[:-2]`` -> ``[:2]``: a 4-D mask over 2-D
    q, k, v adds two batch dims."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    mask = rng.random((2, 3, 3, 5)) > 0.3
    dout = randn(rng, 2, 3, 3, 2)
    dense, tiled = _both(q, k, v, mask, block_size=2, dout=dout)
    assert tiled[0].shape == (2, 3, 3, 2)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_tiled_cache_is_frozen(rng):
    """Kills ``frozen=True`` dropped from ``FlashCache``: the backward reads it."""
    q = randn(rng, 2, 3)
    _, cache = an.flash_attention_forward(q, q, q, block_size=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.lse = np.zeros(2)


@pytest.mark.parametrize("mask", [np.bool_(True), np.array([True, False, True, True, False]),
                                  np.array([[True, False, True, True, False]])],
                         ids=["0-d", "1-D", "2-D"])
def test_tiled_low_dim_masks_keep_the_dense_shape(rng, mask):
    """Kills a change to the 0-d / 1-D mask reshape of the tiled checks (``ndim < 2`` -> ``< 3``,
    the padding count): the tiled path gives the dense path's shapes and numbers."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    dout = randn(rng, 3, 2)
    dense, tiled = _both(q, k, v, mask, block_size=2, dout=dout)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_tiled_mask_whose_batch_dims_match_the_tile_dims(rng):
    """Kills ``s.shape[:-2] != shape`` -> ``s.shape[:2]``: q (2, L=2, d), mask (2, 2, 2, S) give
    a tile (2, 2, S) whose first two dims equal the batch shape (2, 2); it must still grow."""
    q, k, v = randn(rng, 2, 2, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3)
    mask = rng.random((2, 2, 2, 5)) > 0.3
    mask[..., 0] = True
    dense, tiled = _both(q, k, v, mask, block_size=5, dout=randn(rng, 2, 2, 2, 3))
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_tiled_grouped_query_attention_keeps_scale_block_size_and_drops_masked_keys(rng):
    """Kills the grouped-query path of ``flash_attention_forward`` dropping ``scale=`` or
    ``block_size=``, or its cache keeping the inputs from before ``drop_masked``: a NaN at a
    masked key must not reach any gradient (the dense path's answer)."""
    q, k, v = randn(rng, 4, 3, 2), randn(rng, 2, 5, 2), randn(rng, 2, 5, 3)
    mask = np.array([True, True, False, True, False])
    k[:, 2], v[:, 4] = np.nan, np.inf
    dout = randn(rng, 4, 3, 3)
    out, cache = an.sdpa_forward(q, k, v, mask, scale=0.3, spec=an.AttentionSpec(enable_gqa=True))
    fout, fcache = an.flash_attention_forward(q, k, v, mask, scale=0.3, block_size=2,
                                              spec=an.AttentionSpec(enable_gqa=True))
    assert fcache.block_size == 2
    dense = (out, *an.sdpa_backward(dout, cache))
    tiled = (fout, *an.flash_attention_backward(dout, fcache))
    for a, b in zip(dense, tiled, strict=True):
        assert np.isfinite(b).all() and a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_causal_tiled_path_skips_the_key_blocks_above_the_diagonal():
    """Kills the deleted causal bound ``right = 0`` (or ``0`` -> ``1``) and ``<`` -> ``<=`` in
    which blocks ``tiles.key_blocks`` visits: under a top-left causal mask, query rows ``i < j0``
    see nothing of the key block ``[j0, j1)``, so the block is visited by rows ``[j0, L)`` only,
    and a block that starts at or after row ``L`` (no row sees it) is not visited at all. The
    output would be the same; what is held is the work not done (blocks that are fully masked
    are skipped)."""
    from attention_np.kernels import tiles

    assert list(tiles.key_blocks(8, 8, 4, True)) == [(0, 4, 0, 8), (4, 8, 4, 8)]
    # L = 8 queries, S = 16 keys: the block [8, 16) is above every query's diagonal
    assert list(tiles.key_blocks(8, 16, 8, True)) == [(0, 8, 0, 8)]
    # a right window wider than 0 does not undo causality
    assert list(tiles.key_blocks(8, 8, 4, True, (None, 3))) == [(0, 4, 0, 8), (4, 8, 4, 8)]


def test_tiled_path_with_a_scale_that_overflows_q_warns_nothing(rng):
    """Kills ``over=`` dropped from the errstate of the tiles' scaled scores: ``q * scale``
    overflowing (scale 1e30, q ~ 1e10 in float32) is expected and handled (the scale is applied
    to the scores instead), so it must not surface as a RuntimeWarning; the output equals the
    float64 dense path's."""
    q = (randn(rng, 2, 3, 4) * 1e10).astype(np.float32)
    k = (randn(rng, 2, 5, 4) * 1e-30).astype(np.float32)
    v = randn(rng, 2, 5, 3).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(q, k, v, scale=1e30, block_size=2)
    ref, _ = an.sdpa_forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                             scale=1e30)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_tiled_default_block_size_is_128(rng):
    """Kills the default ``block_size`` ``128`` -> ``129``: the documented default, recorded in the
    cache (the backward walks the same blocks)."""
    _, cache = an.flash_attention_forward(randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2))
    assert cache.block_size == 128


@pytest.mark.parametrize("shape", [(), (5,)])
def test_tiled_backward_with_a_bias_of_fewer_than_two_dims(rng, shape):
    """Kills the tiled backward slicing a bias before giving it its (L, S) dims: a 0-d or a
    per-key (S,) bias, whose gradient comes back in its own shape, as the dense path's."""
    q, k, v, dout = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2), randn(rng, 3, 2)
    bias = randn(rng, *shape) if shape else np.float64(0.3)
    _, cache = an.flash_attention_forward(q, k, v, bias=bias, block_size=2)
    got = an.flash_attention_backward(dout, cache, return_dbias=True)
    _, dense = an.sdpa_forward(q, k, v, bias=bias)
    want = an.sdpa_backward(dout, dense, return_dbias=True)
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kind", ["mask", "causal", "window"])
def test_tiled_garbage_reaches_only_the_rows_that_see_it_forward_and_backward(rng, kind):
    """Kills a change to when the tiled forward and backward sum over the attended pairs only
    (any of a mask, causality or a window, with an input that is not finite): an inf in the
    value of key 1, which rows 0 (causal, or masked) or 4 and 5 (window) do not see. Those
    rows' outputs and gradients stay finite, the rest are what the dense path gives; NaN where
    it has NaN. Without any warning, as the dense path (the backward's ``D = rowsum(dout *
    out)`` warned "invalid value" here before this test)."""
    L = S = 6
    q, k, v, dout = randn(rng, L, 4), randn(rng, S, 4), randn(rng, S, 2), randn(rng, L, 2)
    v[1] = np.inf
    opts = {"mask": dict(mask=np.arange(S) != np.where(np.arange(L) == 0, 1, -1)[:, None]),
            "causal": dict(is_causal=True), "window": dict(spec=an.AttentionSpec(window=(2, 0)))}[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.flash_attention_forward(q, k, v, block_size=2, **opts)
        grads = an.flash_attention_backward(dout, cache)
    with np.errstate(invalid="ignore"):
        d_out, d_cache = an.sdpa_forward(q, k, v, **opts)
        d_grads = an.sdpa_backward(dout, d_cache)
    blind = {"mask": [0], "causal": [0], "window": [4, 5]}[kind]
    assert np.isfinite(out[blind]).all() and np.isfinite(grads[0][blind]).all()
    np.testing.assert_allclose(out, d_out, rtol=1e-12, atol=1e-13)          # NaN where NaN
    for g, w in zip(grads, d_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("block_size", [2, 128])
def test_tiled_backward_when_q_times_scale_overflows_but_the_softmax_is_not_saturated(
        rng, block_size):
    """Kills ``post=`` dropped and ``dk *= post`` deleted (or a division) in the tiled backward:
    float32, scale 1e29, max |q| = 5e9 (q * scale = 5e38 overflows), k ~ 5e-39, so the scores
    are ~1 and every gradient is far from 0 (unlike scale 1e30 with k ~ 1e-10, where the weights
    are one-hot and dq = dk = 0). Against the float64 dense path on the same inputs; no
    warning."""
    q, k, v, dout = q_times_scale_overflows(rng, ())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.flash_attention_forward(q, k, v, scale=1e29, block_size=block_size)
        grads = an.flash_attention_backward(dout, cache)
    ref, c64 = an.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), scale=1e29)
    assert_float32_near_float64(out, grads, ref, an.sdpa_backward(dout.astype(np.float64), c64))


def test_tiled_values_near_float32_max_are_averaged_without_a_warning(rng):
    """Kills ``over=`` or ``invalid=`` dropped from the errstate of the tiled forward's first
    pass: with every value 3e38 in float32 the running sum ``acc`` overflows, which the forward
    detects and redoes as a running average; that is handled, so no RuntimeWarning may surface,
    and the output is the values' weighted average (3e38, the dense path's)."""
    q, k = randn(rng, 3, 4, dtype=np.float32), randn(rng, 5, 4, dtype=np.float32)
    v = np.full((5, 2), 3e38, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(q, k, v, block_size=2)
    dense, _ = an.sdpa_forward(q, k, v)
    np.testing.assert_allclose(out, dense, rtol=1e-6)
    np.testing.assert_allclose(out, 3e38, rtol=1e-6)
    # mixed signs, equal weights (q = 0): the first block's sum is +inf, the second's -inf, and
    # inf + (-inf) is the "invalid" NaN the errstate hides; the average is 3e38 / 5
    v = np.array([3e38, 3e38, -3e38, -3e38, 3e38], np.float32)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(np.zeros_like(q), k, v, block_size=2)
    np.testing.assert_allclose(out, np.float32(3e38) / 5, rtol=1e-6)


def test_tiled_backward_is_as_silent_as_the_dense_path_when_garbage_meets_an_overflow(rng):
    """Kills ``over=`` dropped from the tiled backward's errstates: with an inf in a value that
    row 0 does not see (masked), the dense backward runs under ``errstate(over="ignore")`` as
    well as ``invalid``, so where ``dout ~ 1e30`` times ``v ~ 1e10`` overflows float32 it gives
    inf without a warning; the tiled backward gives the same numbers, equally silently."""
    q, k = randn(rng, 4, 3, dtype=np.float32), randn(rng, 4, 3, dtype=np.float32)
    v = (randn(rng, 4, 2) * 1e10).astype(np.float32)
    v[3] = np.inf
    mask = np.ones((4, 4), bool)
    mask[0, 3] = False                                    # key 3: seen by rows 1-3 only
    dout = (randn(rng, 4, 2) * 1e30).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, dense = an.sdpa_forward(q, k, v, mask)
        want = an.sdpa_backward(dout, dense)
        _, cache = an.flash_attention_forward(q, k, v, mask, block_size=2)
        got = an.flash_attention_backward(dout, cache)
    assert not np.isfinite(want[0][0]).all()              # row 0's dq overflows
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5)
