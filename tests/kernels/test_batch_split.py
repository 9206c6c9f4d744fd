"""Heads in parallel (attention_np/kernels/batch_split.py): the blocked and tiled kernels with their
batch entries shared out to two worker threads give the reference kernel's numbers, and fall back to one
thread where the mask or bias differs along the batch, or the work is small."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import batch_split, blocked, reference
from tests.helpers import randn


@pytest.fixture
def split(monkeypatch):
    """Two workers, and every call split (even tiny ones) on both kernels."""
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "2")
    monkeypatch.setattr(batch_split, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(blocked, "MIN_ELEMENTS", 0)


def test_slices_cut_the_batch_into_near_equal_parts(monkeypatch):
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "2")
    assert batch_split.slices((2, 3)) == [slice(0, 3), slice(3, 6)]
    assert batch_split.slices((1,)) == [slice(0, 1)]
    assert batch_split.slices((5,), entries=batch_split.MIN_ELEMENTS - 1) == [slice(0, 5)]
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "3")
    assert batch_split.slices((4,)) == [slice(0, 1), slice(1, 2), slice(2, 4)]


def test_flat_is_a_view_for_a_whole_batch_and_broadcasts_a_shared_one(rng):
    x = randn(rng, 2, 3, 4, 5)
    assert np.shares_memory(batch_split.flat(x, (2, 3)), x)
    y = randn(rng, 4, 5)
    np.testing.assert_array_equal(batch_split.flat(y, (2, 3))[4], y)
    assert batch_split.flat(y, (2, 3)).shape == (6, 4, 5)


CASES = {
    "plain": lambda rng: dict(),
    "causal": lambda rng: dict(is_causal=True),
    "shared mask": lambda rng: dict(mask=rng.random((7, 9)) > 0.3),
    "mask per batch (one thread)": lambda rng: dict(mask=rng.random((2, 1, 7, 9)) > 0.3),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kernel", ["fused", "tiled"])
def test_split_kernels_give_the_reference_numbers(rng, split, kernel, case):
    B, H, L, S = 2, 3, 7, 9
    q, k, v = randn(rng, B, H, L, 4), randn(rng, B, H, S, 4), randn(rng, B, H, S, 5)
    kw = CASES[case](rng)
    if kernel == "fused":
        out, cache = an.sdpa_forward(q, k, v, **kw)
        assert cache.blocks is not None                     # the blocked path, split over heads
    else:
        out, cache = an.flash_attention_forward(q, k, v, block_size=4, **kw)
    dout = randn(rng, *out.shape)
    grads = (an.sdpa_backward if kernel == "fused" else an.flash_attention_backward)(dout, cache)
    out_t, cache_t = reference.sdpa_forward(q, k, v, **kw)
    for what, a, b in zip(("out", "dq", "dk", "dv"), (out, *grads),
                          (out_t, *reference.sdpa_backward(dout, cache_t)), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(1.0, np.abs(b).max()), err_msg=what)


def test_split_and_unsplit_tiled_agree_bit_for_bit(rng, monkeypatch):
    q, k, v = randn(rng, 4, 33, 8), randn(rng, 4, 40, 8), randn(rng, 4, 40, 8)
    dout = randn(rng, 4, 33, 8)
    results = []
    for n in ("1", "2"):
        monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", n)
        monkeypatch.setattr(batch_split, "MIN_ELEMENTS", 0)
        out, cache = an.flash_attention_forward(q, k, v, is_causal=True, block_size=16)
        results.append((out, *an.flash_attention_backward(dout, cache)))
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
