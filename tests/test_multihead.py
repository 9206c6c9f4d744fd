"""Multi-head attention, §3.2.2: parameters, forward against the paper's per-head formula, backward."""

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn


def with_random_biases(params, rng):
    """Biases start at zero; random ones make their gradients (and bugs) visible."""
    return {n: (randn(rng, *p.shape) if n.startswith("b_") else p) for n, p in params.items()}


def multihead_by_definition(query, key, value, p, h, mask=None):
    """MultiHead = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V),
    one head at a time with explicit column blocks (the paper's formula, slowly)."""
    d_k, d_v = p["W_q"].shape[1] // h, p["W_v"].shape[1] // h
    heads = []
    for i in range(h):
        cq, cv = slice(i * d_k, (i + 1) * d_k), slice(i * d_v, (i + 1) * d_v)
        q = query @ p["W_q"][:, cq] + p.get("b_q", np.zeros(h * d_k))[cq]
        k = key @ p["W_k"][:, cq] + p.get("b_k", np.zeros(h * d_k))[cq]
        v = value @ p["W_v"][:, cv] + p.get("b_v", np.zeros(h * d_v))[cv]
        heads.append(an.scaled_dot_product_attention(q, k, v, mask)[0])
    return np.concatenate(heads, axis=-1) @ p["W_o"] + p.get("b_o", 0.0)


def check_grads(rng, query, key, value, params, **kwargs):
    result = an.gradcheck(lambda q, k, v, p: an.mha_forward(q, k, v, p, **kwargs), an.mha_backward,
                          (query, key, value, params), seed=int(rng.integers(1 << 30)))
    assert result.ok, result


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
    p = with_random_biases(an.init_mha_params(12, 3, rng=0), rng)
    x = randn(rng, 2, 5, 12)
    out, cache = an.mha_forward(x, x, x, p, num_heads=3)
    np.testing.assert_allclose(out, multihead_by_definition(x, x, x, p, 3), rtol=1e-12, atol=1e-13)
    assert cache.weights.shape == (2, 3, 5, 5)


def test_cross_attention_with_kdim_vdim_and_explicit_d_k(rng):
    p = with_random_biases(an.init_mha_params(6, 2, d_k=5, d_v=3, kdim=4, vdim=7, rng=0), rng)
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
    _, cache = an.mha_forward(x, x, x, p, num_heads=2, mask=mask)
    assert np.all(cache.weights[1, :, :, 2:] == 0)
    np.testing.assert_allclose(cache.weights.sum(-1), 1.0)


# --- backward: finite differences on every input and parameter -----------------------------

def test_grads_self_attention_every_input_and_parameter(rng):
    p = with_random_biases(an.init_mha_params(6, 2, rng=0), rng)
    x = randn(rng, 2, 3, 6)
    check_grads(rng, x, x.copy(), x.copy(), p, num_heads=2)


def test_grads_cross_attention_kdim_vdim_d_k(rng):
    p = with_random_biases(an.init_mha_params(4, 2, d_k=3, d_v=1, kdim=5, vdim=2, rng=1), rng)
    check_grads(rng, randn(rng, 3, 4), randn(rng, 4, 5), randn(rng, 4, 2), p, num_heads=2)


def test_grads_without_bias_with_mask_and_causal(rng):
    p = an.init_mha_params(4, 2, bias=False, rng=2)
    mask = an.padding_mask([3, 2])[:, None]
    check_grads(rng, randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), p,
                num_heads=2, mask=mask, is_causal=True)


def test_self_attention_gradient_is_the_sum_of_the_three(rng):
    # One array used as query, key and value: its gradient is dquery + dkey + dvalue.
    p = with_random_biases(an.init_mha_params(4, 2, rng=0), rng)
    x, dout = randn(rng, 3, 4), randn(rng, 3, 4)

    def loss(x):
        return float(np.sum(an.mha_forward(x, x, x, p, num_heads=2)[0] * dout))

    _, cache = an.mha_forward(x, x, x, p, num_heads=2)
    dq, dk, dv, _ = an.mha_backward(dout, cache)
    numerical = an.numerical_gradient(lambda: loss(x), x)
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
