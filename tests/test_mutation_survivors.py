"""Tests that kill mutants which survived the suite (tools/mutate.py; issue 11).

Each test names the change it catches; each compares against an independent computation
(the dense path, a float64 oracle, or the definition).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused
from attention_np.kernels import reference as textbook
from attention_np.kernels.softmax_inplace import softmax_
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
    _, cache = an.sdpa_forward(q, k, v, rng=7, spec=an.AttentionSpec(dropout_p=0.5))
    want = np.random.default_rng(7).random((2, 4, 4), dtype=dtype) >= 0.5
    np.testing.assert_array_equal(cache.dropout_mask, want)
    other = np.float64 if dtype == np.float32 else np.float32
    assert not np.array_equal(np.random.default_rng(7).random((2, 4, 4), dtype=other) >= 0.5, want)


# --- survivors of the full runs (docs/mutation.md, tools/mutation/*.json) -----------------


def _softmax_rows(x):
    """The definition, written out: exp(x - max) / sum, float64."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_attention_caches_are_frozen(rng, sdpa):
    """Catches ``@dataclass(frozen=True)`` -> ``frozen=False`` (or the keyword dropped): the
    backward reads the cache, so a caller must not be able to rebind its arrays."""
    q = randn(rng, 2, 3)
    _, cache = sdpa.sdpa_forward(q, q, q)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.q = np.zeros_like(q)


def test_sdpa_forward_default_is_not_causal(rng, sdpa):
    """Catches ``is_causal: bool = False`` -> ``True`` in either sdpa_forward: with no mask every
    query attends to every key, the definition softmax(q k^T / sqrt(d_k)) @ v."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    out, cache = sdpa.sdpa_forward(q, k, v)
    want = _softmax_rows(q @ k.T / 2.0)
    np.testing.assert_allclose(cache.weights, want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out, want @ v, rtol=1e-13, atol=1e-15)


def test_in_place_softmax_default_axis_is_the_last(rng):
    """Catches ``axis: int = -1`` -> ``1`` in ``softmax_`` (additive attention calls it with the
    default on (..., L, S) scores): each last-axis slice of a 3-D array sums to 1."""
    x = randn(rng, 2, 3, 4)
    np.testing.assert_allclose(softmax_(x.copy()), _softmax_rows(x), rtol=1e-14)


def test_softmax_backward_takes_array_likes_and_names_a_non_float_argument():
    """Catches deleting ``dp = as_float_array(dp, "dp")`` (or the same for ``p``): nested
    lists are array-likes like everywhere else, and an int ``dp`` is refused as not floating."""
    p = np.array([[0.25, 0.75]])
    dp = np.array([[1.0, -2.0]])
    want = p * (dp - (dp * p).sum())                       # p_j (dp_j - sum_i dp_i p_i)
    np.testing.assert_allclose(an.softmax_backward(dp.tolist(), p), want, rtol=1e-15)
    np.testing.assert_allclose(an.softmax_backward(dp, p.tolist()), want, rtol=1e-15)
    with pytest.raises(TypeError, match="dp must be a floating-point array"):
        an.softmax_backward(np.array([[1, 2]]), p)
    with pytest.raises(TypeError, match="p must be a floating-point array"):
        an.softmax_backward(dp, np.array([[0, 1]]))


def test_sdpa_bias_that_adds_batch_dims(rng):
    """Catches deleting ``scores = _grow_to(...)`` in fused ``_add_into``: a bias of shape
    (2, L, S) over 2-D q, k, v gives a batch of 2, each the definition with its own bias."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    bias = randn(rng, 2, 3, 5)
    out, weights = an.scaled_dot_product_attention(q, k, v, bias=bias)
    want = _softmax_rows(q @ k.T / 2.0 + bias)                     # (2, 3, 5)
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(weights, want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out, want @ v, rtol=1e-12, atol=1e-15)


def test_sdpa_cache_built_without_its_optional_fields(rng):
    """``SDPACache``'s defaults mean "no dropout, no grouped-query attention": a cache built
    from a plain forward's fields without them gives the same backward (catches a changed
    default of ``kv_groups`` or ``dropout_scale``)."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    _, c = an.sdpa_forward(q, k, v)
    hand = an.SDPACache(q=c.q, k=c.k, v=c.v, exp_scores=c.exp_scores, rowsum=c.rowsum, out=c.out,
                        scale=c.scale)
    assert hand.dropout_mask is None and hand.dropout_scale == c.dropout_scale
    dout = randn(rng, 2, 3, 2)
    for a, b in zip(an.sdpa_backward(dout, c), an.sdpa_backward(dout, hand), strict=True):
        np.testing.assert_array_equal(a, b)


def test_softmax_refuses_a_0d_array_and_an_axis_out_of_range():
    """Catches deleting the 0-d ``raise`` or ``axis < x.ndim`` -> ``<=`` in ``softmax`` and
    ``softmax_backward``: the documented errors, not NumPy's."""
    with pytest.raises(ValueError, match="at least 1 dim"):
        an.softmax(np.float64(1.0))
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 2\)"):
        an.softmax(x, axis=2)
    for axis in (2, 1.0):
        with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 2\)"):
            an.softmax_backward(x, x, axis=axis)
    with pytest.raises(ValueError, match="p must have at least 1 dim"):
        an.softmax_backward(np.float64(1.0), np.float64(0.5))


def test_flash_cache_is_frozen(rng):
    q = randn(rng, 2, 3)
    _, cache = an.flash_attention_forward(q, q, q, block_size=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.lse = np.zeros(2)


@pytest.mark.parametrize("mask", [np.bool_(True), np.array([True, False, True, True, False]),
                                  np.array([[True, False, True, True, False]])],
                         ids=["0-d", "1-D", "2-D"])
def test_tiled_low_dim_masks_keep_the_dense_shape(rng, mask):
    """Catches changes to the 0-d / 1-D mask reshape of ``tiles.check_flash`` (``ndim < 2`` ->
    ``< 3``, the padding count): the tiled path gives the dense path's shapes and numbers."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    dout = randn(rng, 3, 2)
    dense, tiled = _dense_and_tiled(q, k, v, mask, block_size=2, dout=dout)
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_tiled_mask_whose_batch_dims_match_the_tile_dims(rng):
    """Catches ``s.shape[:-2] != shape`` -> ``s.shape[:2]``: q (2, L=2, d), mask (2, 2, 2, S) give
    a tile (2, 2, S) whose first two dims equal the batch shape (2, 2); it must still grow."""
    q, k, v = randn(rng, 2, 2, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3)
    mask = rng.random((2, 2, 2, 5)) > 0.3
    mask[..., 0] = True
    dense, tiled = _dense_and_tiled(q, k, v, mask, block_size=5, dout=randn(rng, 2, 2, 2, 3))
    for a, b in zip(dense, tiled, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13


def test_tiled_grouped_query_attention_keeps_scale_block_size_and_drops_masked_keys(rng):
    """Catches the grouped-query recursion of ``flash_attention_forward`` dropping ``scale=`` or
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


@pytest.mark.parametrize("q_mag, scale, k_mag", [(2e8, 2e30, 2.5e-39), (3e38, 1.5, 2e-39),
                                                  (1e10, 1e30, 1e-10)])   # the last: issue 11's
def test_float32_scores_representable_where_q_times_scale_is_not(rng, q_mag, scale, k_mag):
    """``q * scale`` overflows float32 while the scores (k tiny) are O(1): the forward and the
    backward's dk take their fallback, ``(q @ k.T) * scale``. Catches any change to those
    fallbacks or their ``abs(scale) > 1`` conditions (scale 1.5 is in (1, 2]), and a dropped
    ``errstate(over=...)`` (a RuntimeWarning escaping). The oracle: float64 (no overflow) on the
    same float32 inputs."""
    q = (q_mag * rng.uniform(-1, 1, (2, 3, 2))).astype(np.float32)
    k = (k_mag * rng.uniform(-1, 1, (2, 4, 2))).astype(np.float32)
    v = (0.1 * rng.standard_normal((2, 4, 5))).astype(np.float32)
    dout = (1e-3 * rng.standard_normal((2, 3, 5))).astype(np.float32)
    q[0, 0, 0] = q_mag                                     # q * scale > float32 max there
    with np.errstate(over="ignore"):
        assert not np.isfinite(q * np.float32(scale)).all()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v, scale=scale)
        grads = an.sdpa_backward(dout, cache)
    out64, cache64 = textbook.sdpa_forward(*(x.astype(np.float64) for x in (q, k, v)), scale=scale)
    grads64 = textbook.sdpa_backward(dout.astype(np.float64), cache64)
    saturated = k_mag == 1e-10     # scores ~1e30: one-hot weights; dscores is float32 rounding
    for i, (ours, want) in enumerate(zip((out, *grads), (out64, *grads64), strict=True)):
        assert ours.dtype == np.float32 and np.isfinite(ours).all()
        if saturated and i > 0:    # (~1e-11) times 1e30 in dq, dk: finite is all that is defined
            continue
        # 5 %: k is subnormal, and dq's product dscores @ k is deeper subnormal before it is
        # scaled (~1 % rounding); every mutant above is off by orders of magnitude or not finite.
        assert max_abs_diff(ours, want) <= 5e-2 * np.abs(want).max()


def test_dropout_keeps_a_draw_equal_to_p():
    """Catches ``draw >= dropout_p`` -> ``>``: a weight is dropped iff its uniform draw u < p,
    so that P(dropped) = P(u < p) = p exactly; a draw equal to p is kept."""
    q = np.ones((1, 2, 3))
    u = np.random.default_rng(5).random((1, 2, 2))
    _, cache = fused.sdpa_forward(q, q, q, rng=5, spec=an.AttentionSpec(dropout_p=float(u[0, 0, 0])))
    assert cache.dropout_mask[0, 0, 0]
    np.testing.assert_array_equal(cache.dropout_mask, u >= u[0, 0, 0])


def test_mha_cache_is_frozen(rng):
    x = randn(rng, 3, 4)
    _, cache = an.mha_forward(x, x, x, an.init_mha_params(4, 2, rng=0), num_heads=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.concat = np.zeros_like(cache.concat)


def test_mha_takes_array_likes_and_names_each_bad_input(rng):
    """Catches deleting ``as_float_array`` or ``check_min_ndim`` of ``query``, ``key`` or ``value``
    in ``check_mha_inputs``: nested lists work as arrays; an int or 1-D input is refused by name."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 3, 4)
    want, _ = an.mha_forward(x, x, x, params, num_heads=2)
    for i in range(3):
        args = [x, x, x]
        args[i] = x.tolist()
        np.testing.assert_array_equal(an.mha_forward(*args, params, num_heads=2)[0], want)
    for i, name in enumerate(("query", "key", "value")):
        args = [x, x, x]
        args[i] = np.ones((3, 4), dtype=int)
        with pytest.raises(TypeError, match=f"{name} must be a floating-point array"):
            an.mha_forward(*args, params, num_heads=2)
        args[i] = x[0]
        with pytest.raises(ValueError, match=f"{name} must have at least 2 dims"):
            an.mha_forward(*args, params, num_heads=2)


def test_float32_q_k_product_overflows_where_the_scaled_scores_do_not(rng):
    """``q @ k.T`` overflows float32 (q, k ~ 1e20) but ``(q * scale) @ k.T`` with scale 1e-30
    does not: the forward must scale q first (catches ``abs(scale) > 1 and ...`` -> ``or``)."""
    q = (1e20 * rng.uniform(0.5, 1, (3, 2))).astype(np.float32)
    k = (1e20 * rng.uniform(0.5, 1, (4, 2))).astype(np.float32)
    v = rng.standard_normal((4, 2)).astype(np.float32)
    with np.errstate(over="ignore"):
        assert not np.isfinite(q @ k.T).all()
    out, _ = an.sdpa_forward(q, k, v, scale=1e-30)
    out64, _ = textbook.sdpa_forward(*(x.astype(np.float64) for x in (q, k, v)), scale=1e-30)
    assert np.isfinite(out).all()
    assert max_abs_diff(out, out64) <= 1e-5 * np.abs(out64).max()


def test_drop_masked_returns_inputs_with_nothing_to_zero_as_they_are(rng):
    """Catches deleting ``return x`` when every row/key is alive: documented "returned as is"
    (no copy of q, k, v when nothing is masked away)."""
    from attention_np.kernels.guard import drop_masked
    q, k, v = randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 2)
    mask = np.ones((3, 4), bool)
    mask[0, 1] = False                                  # key 1 still alive for other queries
    out = drop_masked(q, k, v, mask)
    assert all(a is b for a, b in zip(out, (q, k, v), strict=True))


@pytest.mark.parametrize("k_batch, v_batch", [((2,), (1,)), ((2, 2, 2), (2, 2))])
def test_masked_key_with_k_and_v_of_different_batch_dims(rng, sdpa, k_batch, v_batch):
    """Catches the batch reduction of ``drop_masked``'s ``zero`` (``!=`` -> ``==``, deleted, or
    a slice ``[:-2]`` -> ``[:2]``): k and v of different batch dims with a masked key; v must
    keep its own shape, and dv too."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, *k_batch, 5, 4), randn(rng, *v_batch, 5, 2)
    mask = np.array([True, True, False, True, True])
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    keep = [0, 1, 3, 4]
    out_kept, _ = sdpa.sdpa_forward(q, k[..., keep, :], v[..., keep, :])   # the masked key left out
    np.testing.assert_allclose(out, out_kept, rtol=1e-13, atol=1e-15)


def test_mha_names_a_mask_that_does_not_fit_and_a_bad_dropout_p(rng):
    """Catches deleting the mask check of ``_drop_masked_inputs`` or ``check_dropout_p`` of
    ``_attention_path``: the error names the argument (not NumPy's, not the path's)."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 3, 4)
    bad_mask = np.ones((3, 7), bool)
    bad_mask[:, 0] = False                  # a dead key: the inputs' dropping runs before Eq. (1)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 7\) does not broadcast"):
        an.mha_forward(x, x, x, params, bad_mask, num_heads=2)
    for kernel in ("fused", "reference"):
        with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\], got 1.5"):
            an.mha_forward(x, x, x, params, spec=an.AttentionSpec(dropout_p=1.5, kernel=kernel), num_heads=2)


def test_mha_grouped_query_params_with_a_wrong_W_k_width(rng):
    """Catches deleting the ``W_k`` width check for ``num_kv_heads`` (or ``d_k`` computed with
    ``/``: the message would say ``d_k=2.0``): h=2, H_kv=1, d_k=2 need W_k with 2 columns. The
    width of W_k decides the key heads, and 3 columns fit no number of them."""
    params = an.init_mha_params(4, 2, num_kv_heads=1, rng=0)
    params["W_k"], params["b_k"] = np.zeros((4, 3)), np.zeros(3)
    x = randn(rng, 3, 4)
    with pytest.raises(ValueError, match=r"params\['W_q'\] has 4 columns but params\['W_k'\] has 3"):
        an.mha_forward(x, x, x, params, num_heads=2)


def test_float32_values_near_the_maximum(rng):
    """v = 3e38 everywhere in float32: ``e @ v`` overflows before its division, the weighted
    average does not (3e38). Catches changes to the fallback ``(kept / l) @ v`` and a dropped
    ``errstate(over=...)`` (a RuntimeWarning escaping)."""
    q, k = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(2))
    v = np.full((2, 3, 2), 3e38, np.float32)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.sdpa_forward(q, k, v)
    np.testing.assert_allclose(out, np.full((2, 3, 2), 3e38), rtol=1e-6)   # each row: weights sum to 1


@pytest.mark.parametrize("mask_ndim", [3, 4])
def test_mha_per_head_mask_over_a_batch_as_long_as_the_heads(rng, mask_ndim):
    """A per-head mask (h, L, S) (or (B, h, L, S)) over query (B, L, d_model) with B = h = 2:
    key 1 is masked for head 0 only, so the inputs dropped before the projections must be those
    dead for *every* head (catches ``m.ndim >= 3`` -> ``> 3`` and a deleted ``m.any(axis=-3)``,
    which would line the head axis up with the batch). Oracle: the steps of §3.2.2 by hand."""
    B, h, L, d_model = 2, 2, 3, 4
    params = an.init_mha_params(d_model, h, rng=0)
    x = randn(rng, B, L, d_model)
    mask = np.ones((h, L, L), bool)
    mask[0, :, 1] = False
    if mask_ndim == 3:
        # B == h: per head or per sequence? 0.2 refuses to guess (issue 22) and names the fix
        with pytest.raises(ValueError, match=re.escape("mask[None]")):
            an.mha_forward(x, x, x, params, mask, num_heads=h)
        mask = mask[None]
    else:
        mask = np.broadcast_to(mask, (B, h, L, L))
    out, _ = an.mha_forward(x, x, x, params, mask, num_heads=h)
    np.testing.assert_allclose(out, _mha_by_hand(x, params, h, mask), rtol=1e-12, atol=1e-14)


def _mha_by_hand(x, params, h, mask=None, **sdpa_kw):
    """Self-attention of §3.2.2 step by step: project, split heads, fused Eq. (1), concat, W_o."""
    B, L, _ = x.shape

    def heads(W, b):                                    # (B, L, h*d) -> (B, h, L, d)
        return (x @ params[W] + params[b]).reshape(B, L, h, -1).transpose(0, 2, 1, 3)
    o, _ = fused.sdpa_forward(heads("W_q", "b_q"), heads("W_k", "b_k"), heads("W_v", "b_v"),
                              mask, **sdpa_kw)
    return o.transpose(0, 2, 1, 3).reshape(B, L, -1) @ params["W_o"] + params["b_o"]


def test_mha_passes_dropout_and_its_rng_to_the_attention(rng):
    """Catches ``mha_forward`` dropping ``spec.dropout_p`` or ``rng=`` on the way to Eq. (1): the
    output is that of the same steps by hand with the same dropout draw."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 2, 3, 4)
    out, _ = an.mha_forward(x, x, x, params, spec=an.AttentionSpec(dropout_p=0.5), rng=3, num_heads=2)
    want = _mha_by_hand(x, params, 2, spec=an.AttentionSpec(dropout_p=0.5), rng=3)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)
    assert max_abs_diff(out, _mha_by_hand(x, params, 2)) > 1e-3        # dropout did something


def test_init_mha_params_refuses_a_default_width_that_does_not_divide():
    """Catches ``(d_k is None or d_v is None)`` -> ``and``: d_model=5, h=2 with only d_k given
    leaves d_v to the default d_model / h, which does not divide."""
    for kw in (dict(d_k=3), dict(d_v=3)):
        with pytest.raises(ValueError, match="d_model=5 is not divisible by num_heads=2"):
            an.init_mha_params(5, 2, **kw)


def test_mha_params_width_messages_name_the_right_count(rng):
    """Catches ``num_kv_heads is None`` -> ``is not None`` in the message's name, and ``//`` ->
    ``/`` for the concatenated width (the message would say 4.0 features)."""
    x = randn(rng, 3, 4)
    params = an.init_mha_params(4, 2, rng=0)
    bad_v = dict(params, W_v=np.zeros((4, 3)), b_v=np.zeros(3))
    with pytest.raises(ValueError, match=r"params\['W_v'\] has 3 columns, not divisible by "
                                         r"num_heads=2$"):
        an.mha_forward(x, x, x, bad_v, num_heads=2)
    bad_o = dict(params, W_o=np.zeros((5, 4)))
    with pytest.raises(ValueError, match=r"the concatenated heads have 4 features \(h\*d_v\)$"):
        an.mha_forward(x, x, x, bad_o, num_heads=2)


@pytest.mark.parametrize("dropout", ["none", "drawn", "given"])
def test_dense_grouped_query_attention_with_per_head_mask_bias_and_dropout(rng, dropout):
    """``enable_gqa`` with a per-query-head mask and bias (H, L, S) and dropout, against the
    same call on k, v repeated to H heads (dk, dv summed back over each group of G = 2).
    Catches the grouping of mask, bias and dropout mask (``H = q.shape[-3]``, the ``is None``
    tests, ``groups > 1``) in the forward and the backward's regrouping of the keep-mask."""
    H, H_kv, L, S = 4, 2, 3, 5
    q, k, v = randn(rng, 2, H, L, 2), randn(rng, 2, H_kv, S, 2), randn(rng, 2, H_kv, S, 3)
    mask = rng.random((H, L, S)) > 0.3
    mask[..., 0] = True
    bias = randn(rng, H, L, S)
    kw = dict(mask=mask, bias=bias, spec=an.AttentionSpec(dropout_p=0.0 if dropout == "none" else 0.3))
    if dropout == "drawn":
        kw.update(rng=4)
    elif dropout == "given":
        kw.update(dropout_mask=rng.random((2, H, L, S)) > 0.3)
    out, cache = fused.sdpa_forward(q, k, v, **{**kw, "spec": kw["spec"].replace(enable_gqa=True)})
    if dropout != "none":
        assert cache.dropout_mask.shape[-3:] == (H, L, S)
        kw.pop("rng", None)
        kw["dropout_mask"] = cache.dropout_mask
    k_rep, v_rep = np.repeat(k, 2, axis=-3), np.repeat(v, 2, axis=-3)
    want, cache_rep = fused.sdpa_forward(q, k_rep, v_rep, **kw)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)
    dout = randn(rng, 2, H, L, 3)
    dq, dk, dv = fused.sdpa_backward(dout, cache)
    dq_r, dk_r, dv_r = fused.sdpa_backward(dout, cache_rep)
    np.testing.assert_allclose(dq, dq_r, rtol=1e-12, atol=1e-14)
    for g, g_rep in ((dk, dk_r), (dv, dv_r)):
        np.testing.assert_allclose(g, g_rep.reshape(2, H_kv, 2, S, -1).sum(axis=2),
                                   rtol=1e-12, atol=1e-14)


def test_masked_garbage_with_a_mask_of_more_batch_dims_than_k(rng, sdpa):
    """k, v (2, 1, S, d) under a mask (5, 2, 3, L, S): a key slot of k is dead when every query
    of every broadcast copy (5 x 3) masks it. Catches the axes ``_alive_in`` reduces over
    (``lead + i``, ``n == 1``, ``full[...] != 1``): a NaN in a dead slot never reaches the
    answer, which equals the one with 0 in that slot."""
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


def test_mha_passes_bias_to_the_attention(rng):
    """Catches ``mha_forward`` dropping ``bias=`` on the way to Eq. (1)."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 2, 3, 4)
    bias = randn(rng, 2, 3, 3)                                 # (h, L, S)
    out, _ = an.mha_forward(x, x, x, params, num_heads=2, bias=bias)
    np.testing.assert_allclose(out, _mha_by_hand(x, params, 2, bias=bias), rtol=1e-12, atol=1e-14)


def test_mha_key_dead_only_under_mask_and_causal(rng):
    """Key 2 is seen only by query 2 under the causal mask, and the mask blocks (2, 2): dead only
    for ``mask & causal``. A NaN in its input must not reach the answer (catches a dropped
    ``m & causal_mask`` or ``mask is not None`` -> ``is None``)."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 3, 4)
    kv0, kv = x.copy(), x.copy()
    kv0[2], kv[2] = 0.0, np.nan
    mask = np.ones((3, 3), bool)
    mask[2, 2] = False
    out, cache = an.mha_forward(x, kv, kv, params, mask, num_heads=2, is_causal=True)
    out0, cache0 = an.mha_forward(x, kv0, kv0, params, mask, num_heads=2, is_causal=True)
    dout = randn(rng, 3, 4)
    g, g0 = an.mha_backward(dout, cache), an.mha_backward(dout, cache0)
    for a, b in zip((out, *g[:3], *g[3].values()), (out0, *g0[:3], *g0[3].values()), strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_masked_garbage_in_v_of_fewer_batch_dims_than_k(rng, sdpa):
    """k (2, 2, 2, S, d), v (2, 2, S, d): key 2 is dead for v[0] (all of its broadcast copies),
    alive for v[1]. A NaN in v[0]'s slot must not reach the answer (catches the reduction to
    ``x.shape[:-2]`` in ``drop_masked``'s ``zero`` changed to ``[:-3]``)."""
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
    """k (2, 2, S=2, d) and v (2, S=2, d_v): v's first two dims (2, 2) equal the k, v batch
    (2, 2), so ``x.shape[:-2]`` -> ``x.shape[:2]`` in ``zero``'s test would skip reducing the
    alive keys to v's own batch; v, and dv, must keep v's shape."""
    q, k, v = randn(rng, 3, 4), randn(rng, 2, 2, 2, 4), randn(rng, 2, 2, 3)
    mask = np.array([True, False])
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    np.testing.assert_allclose(out, np.broadcast_to(v[:, :1], (2, 2, 1, 3)).repeat(3, axis=2),
                               rtol=1e-15)        # only key 0 is seen: every query gets v[..., 0, :]


def test_kv_cache_append_takes_array_likes_and_names_bad_ones(rng):
    """Catches deleting ``as_float_array`` / ``np.asarray`` of ``k_new``, ``v_new``, or the
    ``v_new`` ndim check, in ``KVCache``: lists append like arrays; an int or 1-D one is refused."""
    k, v = randn(rng, 2, 3, 4), randn(rng, 2, 3, 5)
    cache = an.KVCache(max_len=4)
    ck, cv = cache.append(k.tolist(), v.tolist())
    np.testing.assert_array_equal(ck, k)
    np.testing.assert_array_equal(cv, v)
    with pytest.raises(TypeError, match="k_new must be a floating-point array"):
        an.KVCache(max_len=4).append(np.ones((2, 3, 4), int), v)
    with pytest.raises(ValueError, match="v_new must have at least 2 dims"):
        an.KVCache(max_len=4).append(k[0], v[0, 0])


def test_mha_decode_step_scale(rng):
    """Catches ``mha_decode_step`` dropping ``scale=`` (the output must be mha_forward's with the
    same scale)."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 3, 4)
    want, _ = an.mha_forward(x, x, x, params, num_heads=2, is_causal=True, scale=0.3)
    out = an.mha_decode_step(x, params, an.KVCache(max_len=3), num_heads=2, scale=0.3)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)
    assert max_abs_diff(out, an.mha_decode_step(x, params, an.KVCache(max_len=3), num_heads=2)) > 1e-6


def test_kv_cache_second_append_must_match_the_first(rng):
    """Catches changes to the shape test of a later ``append`` (``[:-2]`` -> ``[:-3]`` or
    ``[:2]``, ``[-1]`` -> ``[-2]``): a valid second chunk is taken; other heads or widths are not."""
    cache = an.KVCache(max_len=6)
    cache.append(randn(rng, 2, 3, 4), randn(rng, 2, 3, 5))
    k, v = cache.append(randn(rng, 2, 1, 4), randn(rng, 2, 1, 5))
    assert k.shape == (2, 4, 4) and v.shape == (2, 4, 5)
    for k_new in (randn(rng, 3, 1, 4), randn(rng, 2, 1, 3)):
        with pytest.raises(ValueError, match=r"k_new has shape .* but the cache holds "
                                             r"\(2,\) \+ \(positions, 4\)$"):
            cache.append(k_new, randn(rng, *k_new.shape[:-1], 5))
    assert cache.length == 4
