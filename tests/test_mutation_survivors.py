"""Tests that kill mutants which survived the suite (tools/mutate.py; issue 11).

Each test names the change it catches; each compares against an independent computation
(the dense path, a float64 oracle, or the definition).
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from tests.helpers import max_abs_diff, randn


def _dense_and_tiled(q, k, v, mask=None, is_causal=False, block_size=2, dout=None):
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=is_causal)
    fout, fcache = an.flash_attention_forward(q, k, v, mask, is_causal=is_causal,
                                              block_size=block_size)
    dout = np.random.default_rng(1).standard_normal(out.shape) if dout is None else dout
    return (out, *an.sdpa_backward(dout, cache)), (fout, *an.flash_attention_backward(dout, fcache))


def test_tiled_running_max_is_per_row(rng):
    """Catches ``p.max(axis=-1)`` -> ``p.max()``: one max per tile instead of per row. Rows
    whose scores lie +-1000 apart then underflow to 0 (or 0/0) against the other rows' max."""
    q, k, v = randn(rng, 3, 4), randn(rng, 6, 4), randn(rng, 6, 2)
    q[0] *= 1000.0
    q[1] *= -1000.0
    dense, tiled = _dense_and_tiled(q, k, v, block_size=2)
    for a, b in zip(dense, tiled, strict=True):
        assert np.isfinite(b).all()
        assert max_abs_diff(a, b) < 1e-9 * max(1.0, np.abs(a).max())


@pytest.mark.parametrize("mask_shape", [(2, 5), (2, 1), (1, 2), (2, 2)])
def test_tiled_masks_with_two_rows_or_columns(rng, mask_shape):
    """Catches ``mask.shape[-2] > 1`` -> ``> 2`` (and the same for columns): a mask with 2 rows
    must be sliced from the first query row the causal tile starts at."""
    L, S = 2, 5 if mask_shape[-1] != 2 else 2
    if mask_shape[-1] == 1:
        S = 5
    q, k, v = randn(rng, L, 3), randn(rng, S, 3), randn(rng, S, 2)
    shape = (mask_shape[0], mask_shape[1] if mask_shape[1] != 5 else S)
    mask = rng.random(shape) > 0.4
    mask[..., 0] = True
    dense, tiled = _dense_and_tiled(q, k, v, mask, is_causal=True, block_size=1)
    for a, b in zip(dense, tiled, strict=True):
        assert max_abs_diff(a, b) < 1e-13


def test_tiled_mask_with_extra_batch_dims(rng):
    """Catches ``broadcast_shapes(mask.shape, (L, S))[:-2]`` -> ``[:2]``: a 4-D mask over 2-D
    q, k, v adds two batch dims."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    mask = rng.random((2, 3, 3, 5)) > 0.3
    dout = randn(rng, 2, 3, 3, 2)
    dense, tiled = _dense_and_tiled(q, k, v, mask, block_size=2, dout=dout)
    assert tiled[0].shape == (2, 3, 3, 2)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


@pytest.mark.parametrize("L, S", [(0, 0), (3, 0), (0, 4)])
def test_causal_mask_with_no_keys_or_no_queries(L, S):
    for align in ("top_left", "bottom_right"):
        m = an.causal_mask(L, S, align=align)
        assert m.shape == (L, S) and m.dtype == bool


def test_padding_mask_with_S_zero():
    m = an.padding_mask(np.array([0, 0]))
    assert m.shape == (2, 1, 0) and m.dtype == bool
    m = an.padding_mask(np.array([0, 0]), S=0)
    assert m.shape == (2, 1, 0)
    assert an.padding_mask(np.array([], dtype=int), S=3).shape == (0, 1, 3)
    assert an.padding_mask(np.array([], dtype=int)).shape == (0, 1, 0)   # no sequences: S = 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_is_drawn_in_the_inputs_precision(dtype):
    """Catches a change of the draw's dtype: documented as ``rng.random(shape, dtype)`` in the
    inputs' precision, so a seed gives the same keep-mask as that draw (and float32 attention
    makes no float64 (L, S) array)."""
    q, k, v = (np.ones((2, 4, 3), dtype) for _ in range(3))
    _, cache = an.sdpa_forward(q, k, v, dropout_p=0.5, rng=7)
    want = np.random.default_rng(7).random((2, 4, 4), dtype=dtype) >= 0.5
    np.testing.assert_array_equal(cache.dropout_mask, want)
    other = np.float64 if dtype == np.float32 else np.float32
    assert not np.array_equal(np.random.default_rng(7).random((2, 4, 4), dtype=other) >= 0.5, want)
