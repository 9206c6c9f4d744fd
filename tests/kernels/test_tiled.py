"""Tiled attention with an online softmax gives the dense path's numbers, without an (L, S) array."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attention_np as an
from attention_np.kernels import scratch
from tests import oracles, torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, rounded


def _both(q, k, v, mask=None, is_causal=False, block_size=3, scale=None, rng=None):
    """Dense and tiled forward and backward with one random upstream gradient."""
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=scale)
    fout, fcache = an.flash_attention_forward(q, k, v, mask, is_causal=is_causal, scale=scale,
                                              block_size=block_size)
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
