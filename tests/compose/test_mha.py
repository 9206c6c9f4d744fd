"""Multi-head attention, §3.2.2: parameters, forward against the paper's per-head formula, backward."""

import numpy as np
import pytest

import attention_np as an
from tests import oracles
from tests.helpers import mha_params, randn


def multihead_by_definition(query, key, value, p, h, mask=None, is_causal=False):
    """MultiHead = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V),
    one head at a time with explicit column blocks (the paper's formula, slowly; tests/oracles.py)."""
    return oracles.multihead(query, key, value, p, h, mask, is_causal=is_causal)[0]


def check_grads(rng, query, key, value, params, num_heads, mask=None, is_causal=False):
    """mha_backward against central differences of the by-definition forward (not of ours)."""
    out, cache = an.mha_forward(query, key, value, params, num_heads=num_heads, mask=mask,
                                is_causal=is_causal)
    dout = randn(rng, *out.shape)
    dquery, dkey, dvalue, grads = an.mha_backward(dout, cache)
    names = list(params)
    want = oracles.gradients_by_definition(
        lambda: multihead_by_definition(query, key, value, params, num_heads, mask, is_causal),
        [query, key, value, *(params[n] for n in names)], dout)
    for name, got, w in zip(["dquery", "dkey", "dvalue", *names],
                            [dquery, dkey, dvalue, *(grads[n] for n in names)], want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-8, err_msg=name)


# --- parameters ----------------------------------------------------------------------------

def test_init_shapes_follow_the_api_layout():
    p = an.init_mha_params(12, 3, d_k=5, d_v=2, kdim=7, vdim=4, rng=0)
    assert {n: a.shape for n, a in p.items()} == {
        "W_q": (12, 15), "W_k": (7, 15), "W_v": (4, 6), "W_o": (6, 12),
        "b_q": (15,), "b_k": (15,), "b_v": (6,), "b_o": (12,)}


def test_init_defaults_are_the_papers_d_model_over_h_and_zero_biases():
    p = an.init_mha_params(512, 8, rng=0)
    assert p["W_q"].shape == (512, 8 * 64) and p["W_o"].shape == (512, 512)
    assert all(np.all(p[b] == 0) for b in ("b_q", "b_k", "b_v", "b_o"))


def test_init_weights_are_glorot_uniform():
    p = an.init_mha_params(64, 4, kdim=32, rng=0)
    limit = np.sqrt(6 / (32 + 64))
    W = p["W_k"]
    assert np.abs(W).max() <= limit and np.abs(W).max() > 0.95 * limit
    np.testing.assert_allclose(W.var(), limit ** 2 / 3, rtol=0.1)   # Var of U(-a, a) is a²/3


def test_init_is_reproducible_and_honours_bias_and_dtype():
    a, b = an.init_mha_params(8, 2, rng=3), an.init_mha_params(8, 2, rng=np.random.default_rng(3))
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["W_q"], an.init_mha_params(8, 2, rng=4)["W_q"])
    p = an.init_mha_params(8, 2, bias=False, dtype=np.float32)
    assert set(p) == {"W_q", "W_k", "W_v", "W_o"} and all(x.dtype == np.float32 for x in p.values())


# --- forward -------------------------------------------------------------------------------

def test_forward_is_the_papers_per_head_formula(rng):
    p = mha_params(rng, 12, 3)
    x = randn(rng, 2, 5, 12)
    out, cache = an.mha_forward(x, x, x, p, num_heads=3)
    want_out, want_weights = oracles.multihead(x, x, x, p, 3)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(cache.weights, want_weights, rtol=1e-12, atol=1e-14)


def test_cross_attention_with_kdim_vdim_and_explicit_d_k(rng):
    p = mha_params(rng, 6, 2, d_k=5, d_v=3, kdim=4, vdim=7)
    query, key, value = randn(rng, 2, 3, 6), randn(rng, 2, 5, 4), randn(rng, 2, 5, 7)
    mask = rng.random((3, 5)) > 0.3
    out, cache = an.mha_forward(query, key, value, p, num_heads=2, mask=mask)
    assert out.shape == (2, 3, 6) and cache.weights.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(out, multihead_by_definition(query, key, value, p, 2, mask),
                               rtol=1e-12, atol=1e-13)


def test_padding_mask_with_a_head_axis_blocks_padded_keys_in_every_head(rng):
    p = an.init_mha_params(8, 2, rng=0)
    x = randn(rng, 2, 4, 8)
    mask = an.padding_mask([4, 2])[:, None]            # (B, 1, 1, S)
    out, cache = an.mha_forward(x, x, x, p, num_heads=2, mask=mask)
    assert np.all(cache.weights[1, :, :, 2:] == 0)
    want_out, want_weights = oracles.multihead(x, x, x, p, 2, mask)
    np.testing.assert_allclose(cache.weights, want_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-13)


# --- backward: finite differences on every input and parameter -----------------------------

def test_grads_self_attention_every_input_and_parameter(rng):
    p = mha_params(rng, 6, 2)
    x = randn(rng, 2, 3, 6)
    check_grads(rng, x, x.copy(), x.copy(), p, 2)


def test_grads_cross_attention_kdim_vdim_d_k(rng):
    p = mha_params(rng, 4, 2, d_k=3, d_v=1, kdim=5, vdim=2)
    check_grads(rng, randn(rng, 3, 4), randn(rng, 4, 5), randn(rng, 4, 2), p, 2)


def test_grads_without_bias_with_mask_and_causal(rng):
    p = an.init_mha_params(4, 2, bias=False, rng=2)
    mask = an.padding_mask([3, 2])[:, None]
    check_grads(rng, randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), p, 2,
                mask=mask, is_causal=True)


def test_self_attention_gradient_is_the_sum_of_the_three(rng):
    # One array used as query, key and value: its gradient is dquery + dkey + dvalue.
    p = mha_params(rng, 4, 2)
    x, dout = randn(rng, 3, 4), randn(rng, 3, 4)

    _, cache = an.mha_forward(x, x, x, p, num_heads=2)
    dq, dk, dv, _ = an.mha_backward(dout, cache)
    numerical, = oracles.gradients_by_definition(lambda: multihead_by_definition(x, x, x, p, 2), [x], dout)
    np.testing.assert_allclose(dq + dk + dv, numerical, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept_through_every_gradient(rng, dtype):
    p = an.init_mha_params(8, 2, rng=0, dtype=dtype)
    x = randn(rng, 2, 3, 8, dtype=dtype)
    out, cache = an.mha_forward(x, x, x, p, num_heads=2)
    dq, dk, dv, grads = an.mha_backward(randn(rng, *out.shape, dtype=dtype), cache)
    assert out.dtype == dtype
    assert all(g.dtype == dtype for g in (dq, dk, dv, *grads.values()))
    assert set(grads) == set(p)


def test_key_bias_gradient_is_zero_because_a_softmax_ignores_a_shift_of_every_score(rng):
    # b_k adds q_i . b_k to every score of query i's row: the softmax cancels it, so db_k = 0
    # exactly (up to rounding) while db_q, which changes the scores unevenly, is not.
    p = mha_params(rng, 8, 2)
    x, y = randn(rng, 2, 3, 8), randn(rng, 2, 5, 8)
    out, cache = an.mha_forward(x, y, y, p, num_heads=2)
    grads = an.mha_backward(randn(rng, *out.shape), cache)[3]
    assert np.abs(grads["b_k"]).max() < 1e-12 < np.abs(grads["b_q"]).max()
