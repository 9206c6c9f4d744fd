"""The tiled kernel's fast lane (attention_np/kernels/tiled_forward.py, ``LazyShift``) and its
scratch memory (attention_np/kernels/scratch.py).

The fast lane shifts a tile by the running max as it stands and leaves to the exact online
softmax every tile where that could overflow or lose a row: these tests build such tiles on
purpose, check that the exact update took them, and compare with the paper's Eq. (1). The scratch
pool reuses memory from call to call: these tests check that nothing a call returns or caches
lives in it.
"""

from __future__ import annotations

import threading
import tracemalloc
import warnings

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import scratch, tiled_forward
from attention_np.paper import attention as paper
from tests.helpers import randn


@pytest.fixture
def lanes(monkeypatch):
    """Records, for each tile the fast lane was offered, whether it took it (True) or left it to
    the exact update (False)."""
    taken = []
    add_tile = tiled_forward.LazyShift.add_tile

    def spy(self, *args):
        taken.append(add_tile(self, *args))
        return taken[-1]

    monkeypatch.setattr(tiled_forward.LazyShift, "add_tile", spy)
    return taken


def _paper(q, k, v, mask, dout):
    out, cache = paper.sdpa_forward(q, k, v, mask)
    return (out, *paper.sdpa_backward(dout, cache))


def _tiled(q, k, v, mask, dout, block_size):
    out, cache = an.flash_attention_forward(q, k, v, mask, block_size=block_size)
    return (out, *an.flash_attention_backward(dout, cache))


def _assert_close(got, want, rtol):
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=name)


def test_plain_tiles_take_the_fast_lane_and_agree_with_the_paper(rng, lanes):
    q, k, v, dout = randn(rng, 2, 12, 4), randn(rng, 2, 20, 4), randn(rng, 2, 20, 4), randn(rng, 2, 12, 4)
    _assert_close(_tiled(q, k, v, None, dout, 4), _paper(q, k, v, None, dout), 1e-12)
    assert lanes == [False, True, True, True, True]      # the first block finds each row's max


@pytest.mark.float32
@pytest.mark.parametrize("dtype, jump", [(np.float64, 400.0), (np.float32, 50.0), (np.float32, 100.0)])
def test_scores_far_above_the_running_max_go_through_the_exact_update(rng, lanes, dtype, jump):
    """Keys 8..11 score ``jump`` above the first blocks: exp(jump) passes sqrt of the dtype's
    largest number (e^354 in float64, e^44 in float32), so their tile must rescale exactly. At
    100 in float32 the fast lane's exp overflows to inf on the way: silently, it is expected."""
    L, S, d = 6, 16, 4
    q = np.abs(randn(rng, L, d)) + 1
    k = randn(rng, S, d) * 0.1
    k[8:12] = q.mean(axis=0) / np.square(q.mean(axis=0)).sum() * jump * np.sqrt(d)  # q·k/√d ≈ jump
    v, dout = randn(rng, S, d), randn(rng, L, d)
    want = _paper(q, k, v, None, dout)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no RuntimeWarning for an expected inf
        got = _tiled(*(x.astype(dtype) for x in (q, k, v)), None, dout.astype(dtype), 4)
    assert lanes[2] is False and lanes[1] is True and lanes[3] is True
    assert all(np.isfinite(g).all() for g in got)
    _assert_close(got, want, 1e-12 if dtype == np.float64 else 2e-4)


def test_a_row_that_has_seen_no_key_yet_is_not_shifted_by_minus_infinity(rng, lanes):
    """Row 0 may attend keys 8.. only, row 1 every key: the first block leaves row 0's max at
    -inf, so the second block (where row 0 sees nothing either) can take the fast lane and the
    third (its first keys) cannot."""
    L, S = 3, 12
    mask = np.ones((L, S), bool)
    mask[0, :8] = False
    mask[2] = False                                       # and a row that never sees a key
    q, k, v, dout = randn(rng, L, 4), randn(rng, S, 4), randn(rng, S, 4), randn(rng, L, 4)
    got = _tiled(q, k, v, mask, dout, 4)
    want = _paper(q, k, v, mask, dout)
    assert lanes == [False, True, False]
    _assert_close(got, want, 1e-12)
    np.testing.assert_array_equal(got[0][2], 0)          # the fully masked row: out 0


@pytest.mark.parametrize("threads", ["1", "2"])
def test_nothing_returned_or_cached_lives_in_the_scratch_pool(rng, monkeypatch, threads):
    """A second call reuses every scratch buffer: the first call's output, cache and gradients
    must not change (they would, were any of them scratch)."""
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", threads)
    shape = (2, 4, 96, 8)                                 # above batch_split.MIN_ELEMENTS with 4 heads
    monkeypatch.setattr("attention_np.kernels.batch_split.MIN_ELEMENTS", 0)
    q, k, v, dout = (randn(rng, *shape) for _ in range(4))
    out, cache = an.flash_attention_forward(q, k, v, block_size=32)
    grads = an.flash_attention_backward(dout, cache)
    kept = [x.copy() for x in (out, cache.q, cache.k, cache.v, cache.out, cache.lse, *grads)]
    q2, k2, v2, dout2 = (randn(rng, *shape) * 3 for _ in range(4))
    out2, cache2 = an.flash_attention_forward(q2, k2, v2, block_size=32)
    an.flash_attention_backward(dout2, cache2)
    for before, now in zip(kept, (out, cache.q, cache.k, cache.v, cache.out, cache.lse, *grads),
                           strict=True):
        np.testing.assert_array_equal(now, before)


def test_a_second_call_allocates_no_tile(rng, monkeypatch):
    """The point of the pool: once warm, a forward+backward allocates its outputs, not its tiles.
    Here a tile is 1024 x 256 float64 = 2 MiB and every output together about 0.5 MiB."""
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "1")
    q, k, v, dout = (randn(rng, 1024, 8) for _ in range(4))

    def call():
        out, cache = an.flash_attention_forward(q, k, v, block_size=256)
        return an.flash_attention_backward(dout, cache)

    call()                                                # fills the pool
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 256 * 8 / 2, f"{peak / 2**20:.2f} MiB: a tile was allocated afresh"


def test_scratch_reuses_a_buffer_per_name_per_thread_and_release_drops_them():
    scratch.release()
    a = scratch.scratch("test a", (3, 4), np.float32)
    assert a.shape == (3, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    assert np.shares_memory(scratch.scratch("test a", (2, 5), np.float32), a)   # smaller: reused
    assert not np.shares_memory(scratch.scratch("test b", (3, 4), np.float32), a)
    assert not np.shares_memory(scratch.scratch("test a", (3, 4), np.float64), a)
    grown = scratch.scratch("test a", (5, 5), np.float32)                         # larger: new
    assert not np.shares_memory(grown, a)
    assert np.shares_memory(scratch.scratch("test a", (3, 4), np.float32), grown)
    other = []
    worker = threading.Thread(target=lambda: other.append(scratch.scratch("test a", (3, 4), np.float32)))
    worker.start()
    worker.join()
    assert not np.shares_memory(other[0], grown)                                  # its own pool
    scratch.release()
    assert not np.shares_memory(scratch.scratch("test a", (3, 4), np.float32), grown)


def test_scratch_keeps_no_more_than_the_limit_per_thread(monkeypatch):
    scratch.release()
    monkeypatch.setattr(scratch, "KEEP_BYTES", 200)
    big = scratch.scratch("test big", (60,), np.float32)                          # 240 bytes
    assert not np.shares_memory(scratch.scratch("test big", (60,), np.float32), big)
    small = scratch.scratch("test small", (30,), np.float32)                      # 120 bytes
    assert np.shares_memory(scratch.scratch("test small", (30,), np.float32), small)
    other = scratch.scratch("test other", (30,), np.float32)                      # 120 + 120 > 200
    assert not np.shares_memory(scratch.scratch("test other", (30,), np.float32), other)
    scratch.release()
