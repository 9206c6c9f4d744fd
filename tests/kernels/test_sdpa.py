"""sdpa_forward / sdpa_backward: Eq. (1), its masks and its hand-written backward.

Every test that takes the ``sdpa`` fixture runs twice: on the reference Eq. (1)
(``attention_np.kernels.reference``) and on the fused path that ``attention_np.sdpa_forward`` runs
(``attention_np.kernels.fused``). Dropout exists on the fused path only: those tests call
``fused`` directly (section "dropout: fused path only").
"""

import dataclasses
import warnings

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused, reference
from tests import oracles
from tests.helpers import randn


def attention_by_definition(q, k, v, allowed=None, bias=None, scale=None):
    """Eq. (1) written out the slow, obvious way, for small inputs (tests/oracles.py)."""
    return oracles.attention(q, k, v, allowed, bias=bias, scale=scale)


def check_grads(sdpa, rng, q, k, v, **kwargs):
    result = an.gradcheck(lambda q, k, v: sdpa.sdpa_forward(q, k, v, **kwargs), sdpa.sdpa_backward,
                          (q, k, v), seed=int(rng.integers(1 << 30)))
    assert result.ok, result


def test_forward_is_equation_one(sdpa, rng):
    q, k, v = randn(rng, 2, 4, 8), randn(rng, 2, 6, 8), randn(rng, 2, 6, 3)
    out, w = sdpa.scaled_dot_product_attention(q, k, v)
    want_out, want_w = attention_by_definition(q, k, v)
    np.testing.assert_allclose(out, want_out, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w, want_w, rtol=1e-13, atol=1e-15)


def test_scale_one_is_unscaled_dot_product_attention(sdpa, rng):
    q, k, v = randn(rng, 3, 16), randn(rng, 5, 16), randn(rng, 5, 2)
    out, _ = sdpa.scaled_dot_product_attention(q, k, v, scale=1.0)
    np.testing.assert_allclose(out, attention_by_definition(q, k, v, scale=1.0)[0], rtol=1e-12, atol=1e-14)


def test_bool_mask_and_bias_enter_the_scores(sdpa, rng):
    q, k, v = randn(rng, 4, 5), randn(rng, 6, 5), randn(rng, 6, 2)
    mask = rng.random((4, 6)) > 0.4
    mask[:, 0] = True
    bias = randn(rng, 4, 6)
    out, w = sdpa.scaled_dot_product_attention(q, k, v, mask, bias=bias)
    want_out, want_w = attention_by_definition(q, k, v, mask, bias)
    np.testing.assert_allclose(out, want_out, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w, want_w, rtol=1e-13, atol=1e-15)
    assert np.all(w[~mask] == 0)


def test_is_causal_is_anded_with_mask(sdpa, rng):
    q, k, v = randn(rng, 5, 3), randn(rng, 5, 3), randn(rng, 5, 3)
    mask = np.ones((5, 5), bool)
    mask[:, 1] = False
    _, w = sdpa.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    allowed = mask & an.causal_mask(5)
    assert np.all(w[~allowed] == 0) and np.all(w[allowed] > 0)


# --- finite differences in float64, random upstream gradients -------------------------------

def test_grads_plain(sdpa, rng):
    check_grads(sdpa, rng, randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2))


def test_grads_with_bool_mask(sdpa, rng):
    mask = rng.random((2, 3, 5)) > 0.4
    check_grads(sdpa, rng, randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3), mask=mask)


def test_grads_with_bias(sdpa, rng):
    check_grads(sdpa, rng, randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2), bias=randn(rng, 3, 5))


@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3)])
def test_grads_causal(sdpa, rng, L, S):
    check_grads(sdpa, rng, randn(rng, L, 4), randn(rng, S, 4), randn(rng, S, 2), is_causal=True)


def test_grads_with_broadcast_batch_dims(sdpa, rng):
    # q has its own batch dim, k and v are shared across it, the mask adds another dim.
    q, k, v = randn(rng, 2, 1, 3, 4), randn(rng, 1, 3, 5, 4), randn(rng, 5, 2)
    mask = rng.random((4, 1, 1, 3, 5)) > 0.3
    out, cache = sdpa.sdpa_forward(q, k, v, mask)
    assert out.shape == (4, 2, 3, 3, 2)
    dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    check_grads(sdpa, rng, q, k, v, mask=mask)


def test_grads_with_dk_not_equal_dv_and_custom_scale(sdpa, rng):
    check_grads(sdpa, rng, randn(rng, 3, 7), randn(rng, 4, 7), randn(rng, 4, 2), scale=0.3)


def test_grads_with_replayed_dropout_mask(rng):
    """Fused path only: the reference Eq. (1) has no dropout."""
    keep = rng.random((2, 3, 5)) > 0.3
    check_grads(fused, rng, randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3),
                spec=an.AttentionSpec(dropout_p=0.3), dropout_mask=keep)


# --- fully masked rows ---------------------------------------------------------------------

def test_fully_masked_row_gives_zero_output_weights_and_grads(sdpa, rng):
    q, k, v = randn(rng, 2, 4, 3), randn(rng, 2, 5, 3), randn(rng, 2, 5, 2)
    mask = np.ones((2, 4, 5), bool)
    mask[0, 1] = False
    mask[1, 3] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = sdpa.sdpa_forward(q, k, v, mask)
        dq, dk, dv = sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    assert np.all(out[0, 1] == 0) and np.all(out[1, 3] == 0)
    assert np.all(cache.weights[0, 1] == 0) and np.all(cache.weights[1, 3] == 0)
    assert np.all(dq[0, 1] == 0) and np.all(dq[1, 3] == 0)
    assert np.all(np.isfinite(dk)) and np.all(np.isfinite(dv))
    check_grads(sdpa, rng, q, k, v, mask=mask)


def test_row_fully_masked_by_minus_infinity_bias_gives_zero(sdpa, rng):
    bias = np.zeros((3, 4))
    bias[2] = -np.inf
    out, cache = sdpa.sdpa_forward(randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 2), bias=bias)
    assert np.all(out[2] == 0) and np.all(cache.weights[2] == 0)
    assert np.all(np.isfinite(out))


def test_causal_with_more_queries_than_keys_has_no_empty_row_top_left(sdpa, rng):
    # top-left with L > S: every row i sees key 0, so nothing is fully masked.
    _, w = sdpa.scaled_dot_product_attention(randn(rng, 6, 2), randn(rng, 3, 2), randn(rng, 3, 2),
                                             is_causal=True)
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_bottom_right_mask_with_more_queries_than_keys_empties_the_first_rows(sdpa, rng):
    mask = an.causal_mask(6, 3, align="bottom_right")
    out, w = sdpa.scaled_dot_product_attention(randn(rng, 6, 2), randn(rng, 3, 2), randn(rng, 3, 2),
                                               mask)
    np.testing.assert_array_equal(w.sum(-1), [0, 0, 0, 1, 1, 1])
    assert np.all(out[:3] == 0)


# --- numerics and dtypes -------------------------------------------------------------------

def test_huge_scores_do_not_overflow(sdpa, rng):
    q = randn(rng, 3, 4) * 300.0
    k = randn(rng, 5, 4) * 300.0            # |q·k| / √d_k ~ 1e5
    v = randn(rng, 5, 2)
    for dtype in (np.float32, np.float64):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out, cache = sdpa.sdpa_forward(q.astype(dtype), k.astype(dtype), v.astype(dtype))
            grads = sdpa.sdpa_backward(randn(rng, *out.shape, dtype=dtype), cache)
        assert np.all(np.isfinite(out)) and all(np.all(np.isfinite(g)) for g in grads)
        # saturated: each row puts (almost) all weight on its best key
        np.testing.assert_allclose(cache.weights.max(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept_end_to_end(sdpa, rng, dtype):
    q, k, v = (randn(rng, 2, 3, 4, dtype=dtype) for _ in range(3))
    out, cache = sdpa.sdpa_forward(q, k, v, bias=randn(rng, 3, 3), is_causal=True)
    assert out.dtype == dtype and cache.weights.dtype == dtype
    assert all(g.dtype == dtype for g in sdpa.sdpa_backward(randn(rng, *out.shape, dtype=dtype), cache))


# --- dropout: fused path only (the reference Eq. (1) has none) -----------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept_end_to_end_with_dropout(rng, dtype):
    q, k, v = (randn(rng, 2, 3, 4, dtype=dtype) for _ in range(3))
    out, cache = fused.sdpa_forward(q, k, v, bias=randn(rng, 3, 3), is_causal=True,
                                    rng=0, spec=an.AttentionSpec(dropout_p=0.2))
    assert out.dtype == dtype and cache.weights.dtype == dtype
    assert all(g.dtype == dtype for g in fused.sdpa_backward(randn(rng, *out.shape, dtype=dtype), cache))


def test_dropout_is_reproducible_with_a_seed_and_saved_for_the_backward(rng):
    q, k, v = randn(rng, 4, 3), randn(rng, 6, 3), randn(rng, 6, 2)
    out1, c1 = fused.sdpa_forward(q, k, v, rng=7, spec=an.AttentionSpec(dropout_p=0.5))
    out2, c2 = fused.sdpa_forward(q, k, v, rng=7, spec=an.AttentionSpec(dropout_p=0.5))
    np.testing.assert_array_equal(out1, out2)
    assert c1.dropout_mask is not None and 0 < c1.dropout_mask.mean() < 1
    # replaying the saved keep-mask reproduces the output exactly
    out3, _ = fused.sdpa_forward(q, k, v, dropout_mask=c1.dropout_mask, spec=an.AttentionSpec(dropout_p=0.5))
    np.testing.assert_array_equal(out1, out3)


def test_dropout_scales_kept_weights_by_one_over_keep_probability(rng):
    q, k, v = randn(rng, 2, 3), randn(rng, 4, 3), randn(rng, 4, 2)
    keep = np.array([[True, False, True, True], [False, True, True, False]])
    out, cache = fused.sdpa_forward(q, k, v, dropout_mask=keep, spec=an.AttentionSpec(dropout_p=0.25))
    # the definition: the weights of Eq. (1), dropped where keep is False, the rest / (1 - p)
    weights = attention_by_definition(q, k, v)[1]
    np.testing.assert_allclose(out, (weights * keep / 0.75) @ v, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(cache.weights, weights, rtol=1e-13, atol=1e-15)


def test_dropout_preserves_the_output_in_expectation(rng):
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    clean, _ = fused.sdpa_forward(q, k, v)
    g = np.random.default_rng(0)
    mean = np.mean([fused.sdpa_forward(q, k, v, rng=g,
                                       spec=an.AttentionSpec(dropout_p=0.5))[0] for _ in range(4000)], axis=0)
    np.testing.assert_allclose(mean, clean, atol=0.06)


def test_dropout_p_one_drops_everything(rng):
    out, cache = fused.sdpa_forward(randn(rng, 2, 3), randn(rng, 4, 3), randn(rng, 4, 2),
                                    rng=0, spec=an.AttentionSpec(dropout_p=1.0))
    assert np.all(out == 0)
    assert all(np.all(g == 0) for g in fused.sdpa_backward(randn(rng, 2, 2), cache))


def test_forward_does_not_modify_inputs(sdpa, rng):
    q, k, v, bias = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2), randn(rng, 3, 5)
    copies = [a.copy() for a in (q, k, v, bias)]
    out, cache = sdpa.sdpa_forward(q, k, v, bias=bias, is_causal=True)
    sdpa.sdpa_backward(randn(rng, *out.shape), cache)
    for a, b in zip((q, k, v, bias), copies, strict=True):
        np.testing.assert_array_equal(a, b)


# --- the caller's arrays and the cache stay independent ---------------------------------

@pytest.mark.parametrize("forward,backward", [(reference.sdpa_forward, reference.sdpa_backward),
                                              (fused.sdpa_forward, fused.sdpa_backward),
                                              (an.flash_attention_forward,
                                               an.flash_attention_backward)],
                         ids=["reference", "fused", "tiled"])
def test_changing_the_returned_output_does_not_change_the_gradients(rng, forward, backward):
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3)
    out, cache = forward(q, k, v)
    dout = randn(rng, *out.shape)
    want = [g.copy() for g in backward(dout, cache)]
    out *= 2.0                                   # the caller reuses the output buffer
    for g, w in zip(backward(dout, cache), want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_no_keys_gives_zero_output_in_both_paths(sdpa, rng):
    q, k, v = randn(rng, 3, 4), randn(rng, 0, 4), randn(rng, 0, 2)
    out, cache = sdpa.sdpa_forward(q, k, v)
    fout, _ = an.flash_attention_forward(q, k, v)
    assert out.shape == (3, 2) and np.all(out == 0) and np.all(fout == 0)
    assert cache.weights.shape == (3, 0)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_attention_caches_are_frozen(rng, sdpa):
    """Kills ``@dataclass(frozen=True)`` -> ``frozen=False`` (or the keyword dropped): the
    backward reads the cache, so a caller must not be able to rebind its arrays."""
    q = randn(rng, 2, 3)
    _, cache = sdpa.sdpa_forward(q, q, q)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.q = np.zeros_like(q)


def test_sdpa_forward_default_is_not_causal(rng, sdpa):
    """Kills ``is_causal: bool = False`` -> ``True`` in either sdpa_forward: with no mask every
    query attends to every key, the definition softmax(q k^T / sqrt(d_k)) @ v."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    out, cache = sdpa.sdpa_forward(q, k, v)
    want = oracles.softmax_rows(q @ k.T / 2.0)
    np.testing.assert_allclose(cache.weights, want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out, want @ v, rtol=1e-13, atol=1e-15)


def test_sdpa_cache_built_without_its_optional_fields(rng):
    """Kills a changed default of ``SDPACache.kv_groups`` or ``dropout_scale``: they mean "no
    dropout, no grouped-query attention", so a cache built from a plain forward's fields without
    them gives the same backward."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    _, c = an.sdpa_forward(q, k, v)
    hand = an.SDPACache(q=c.q, k=c.k, v=c.v, out=c.out, scale=c.scale, e=c.e, l=c.l)
    assert hand.dropout_mask is None and hand.dropout_scale == c.dropout_scale
    dout = randn(rng, 2, 3, 2)
    for a, b in zip(an.sdpa_backward(dout, c), an.sdpa_backward(dout, hand), strict=True):
        np.testing.assert_array_equal(a, b)


def test_float32_values_near_the_maximum(rng):
    """Kills any change to the fallback ``(kept / l) @ v`` and a dropped ``errstate(over=...)``
    around it (a RuntimeWarning escaping): v = 3e38 everywhere in float32, so ``e @ v``
    overflows before its division while the weighted average (3e38) does not."""
    q, k = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(2))
    v = np.full((2, 3, 2), 3e38, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.sdpa_forward(q, k, v)
    np.testing.assert_allclose(out, np.full((2, 3, 2), 3e38), rtol=1e-6)   # each row: weights sum to 1
