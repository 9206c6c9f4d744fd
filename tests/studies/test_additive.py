"""Additive attention: finite differences, PyTorch autograd, mask conventions, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attention_np as an
from attention_np.studies.additive import (
    additive_attention,
    additive_attention_backward,
    additive_attention_forward,
    init_additive_params,
)
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded


def _inputs(rng, batch=(2,), L=3, S=4, d_q=5, d_k=6, d_v=3, d_hidden=7, dtype=np.float64):
    q = randn(rng, *batch, L, d_q, dtype=dtype)
    k = randn(rng, *batch, S, d_k, dtype=dtype)
    v = randn(rng, *batch, S, d_v, dtype=dtype)
    params = init_additive_params(d_q, d_k, d_hidden, rng=rng, dtype=dtype)
    # Glorot w_v is small; scale it up so the softmax is far from uniform and the test bites.
    params["w_v"] = params["w_v"] * 3
    return q, k, v, params


def _torch_additive(torch, q, k, v, params, mask=None):
    """The same equation written with torch ops (float64), for autograd to differentiate."""
    t = {n: torch.tensor(a, requires_grad=True) for n, a in
         (("q", q), ("k", k), ("v", v), *params.items())}
    hidden = torch.tanh((t["q"] @ t["W_q"]).unsqueeze(-2) + (t["k"] @ t["W_k"]).unsqueeze(-3))
    scores = hidden @ t["w_v"]
    if mask is not None:
        scores = scores.masked_fill(~torch.tensor(mask), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)   # a fully masked row: 0, as this package does
    return t, weights @ t["v"], weights


def test_backward_matches_finite_differences(rng):
    q, k, v, params = _inputs(rng)
    mask = rng.random((3, 4)) < 0.7
    result = an.gradcheck(lambda q, k, v, p: additive_attention_forward(q, k, v, p, mask),
                          additive_attention_backward, (q, k, v, params), atol=1e-8, rtol=1e-6)
    assert result.ok, str(result)


def test_backward_with_broadcast_batch_dims_matches_finite_differences(rng):
    q = randn(rng, 2, 1, 3, 4)
    k = randn(rng, 1, 3, 5, 4)
    v = randn(rng, 5, 2)
    params = init_additive_params(4, 4, 3, rng=rng)
    result = an.gradcheck(lambda q, k, v, p: additive_attention_forward(q, k, v, p, is_causal=True),
                          additive_attention_backward, (q, k, v, params))
    assert result.ok, str(result)


def test_matches_torch_autograd_in_float64(rng):
    torch = require("torch")
    q, k, v, params = _inputs(rng)
    mask = rng.random((2, 3, 4)) < 0.6
    mask[0, 1] = False                                # one fully masked query row
    out, cache = additive_attention_forward(q, k, v, params, mask)
    dout = rng.standard_normal(out.shape)             # random, never ones
    dq, dk, dv, grads = additive_attention_backward(dout, cache)

    t, t_out, t_weights = _torch_additive(torch, q, k, v, params, mask)
    t_out.backward(torch.tensor(dout))
    assert max_abs_diff(out, t_out.detach().numpy()) < 1e-13
    assert max_abs_diff(cache.weights, t_weights.detach().numpy()) < 1e-13
    for name, mine in (("q", dq), ("k", dk), ("v", dv), *grads.items()):
        assert max_abs_diff(mine, t[name].grad.numpy()) < 1e-12, name


@pytest.mark.float32
def test_float32_error_is_no_larger_than_torch_float32_error(rng):
    torch = require("torch")
    q, k, v, params = _inputs(rng)
    names = ["q", "k", "v", *params]
    f32, f64 = rounded(q, k, v, *params.values(), rng.standard_normal((2, 3, 3)))
    p32 = dict(zip(params, f32[3:-1], strict=True))
    out32, cache32 = additive_attention_forward(*f32[:3], p32)
    grads32 = additive_attention_backward(f32[-1], cache32)
    ours = [out32, *grads32[:3], *grads32[3].values()]

    def in_torch(arrays, dtype):                # the equation in torch ops, autograd's gradients
        t, t_out, _ = _torch_additive(torch, *arrays[:3], dict(zip(params, arrays[3:-1], strict=True)))
        t_out.backward(torch.tensor(arrays[-1], dtype=dtype))
        return [t_out.detach().numpy(), *(t[n].grad.numpy() for n in names)]

    oracle = in_torch(f64, torch.float64)                         # torch, float64: not ours
    theirs = in_torch(f32, torch.float32)
    assert_float32_all(["out", *names], ours, theirs, oracle, framework="torch")


def test_fully_masked_row_gives_zero_output_weights_and_gradients(rng):
    q, k, v, params = _inputs(rng, batch=())
    mask = np.ones((3, 4), bool)
    mask[2] = False
    out, cache = additive_attention_forward(q, k, v, params, mask)
    dq, dk, dv, grads = additive_attention_backward(rng.standard_normal(out.shape), cache)
    assert np.all(out[2] == 0) and np.all(cache.weights[2] == 0) and np.all(dq[2] == 0)
    assert all(np.isfinite(g).all() for g in (dq, dk, dv, *grads.values()))


def test_is_causal_equals_the_explicit_top_left_mask(rng):
    q, k, v, params = _inputs(rng, L=3, S=5)
    a, wa = additive_attention(q, k, v, params, is_causal=True)
    b, wb = additive_attention(q, k, v, params, an.causal_mask(3, 5))
    np.testing.assert_array_equal(a, b)
    assert np.all(wa[..., 0, 1:] == 0) and np.all(wa.sum(-1) > 0.999999)


def test_masked_keys_get_zero_weight_and_rows_sum_to_one(rng):
    q, k, v, params = _inputs(rng)
    mask = np.array([True, False, True, False])        # a key padding mask, broadcast to (L, S)
    _, w = additive_attention(q, k, v, params, mask)
    assert np.all(w[..., ~mask] == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-14)


def test_scores_are_bounded_by_the_l1_norm_of_w_v(rng):
    # tanh keeps each hidden unit in (-1, 1), so |score| <= sum|w_v| = B however large the
    # inputs: within a row, weights differ by at most a factor exp(2B), none underflows to 0.
    q, k, v, params = _inputs(rng)
    out, cache = additive_attention_forward(1e3 * q, 1e3 * k, v, params)
    w = cache.weights                                                  # (..., L, S)
    log_ratio = np.log(w.max(axis=-1) / w.min(axis=-1))
    assert log_ratio.max() <= 2 * np.abs(params["w_v"]).sum() + 1e-12
    assert log_ratio.max() > 0.1                                       # not trivially uniform
    assert np.isfinite(out).all()


def test_additive_attention_is_exported_from_the_package():
    assert an.additive_attention_forward is additive_attention_forward
    assert an.init_additive_params is init_additive_params


def test_bad_inputs_raise_errors_naming_the_argument(rng):
    q, k, v, params = _inputs(rng)
    with pytest.raises(ValueError, match=r"W_q.*\(d_q, d_hidden\)"):
        additive_attention_forward(q[..., :4], k, v, params)
    with pytest.raises(ValueError, match="S=4 positions but v has S=3"):
        additive_attention_forward(q, k, v[..., :3, :], params)
    with pytest.raises(ValueError, match="w_v"):
        additive_attention_forward(q, k, v, {**params, "w_v": params["w_v"][:2]})
    with pytest.raises(ValueError, match="keys"):
        additive_attention_forward(q, k, v, {"W_q": params["W_q"]})
    with pytest.raises(TypeError, match="dtype"):
        additive_attention_forward(q.astype(np.float32), k, v, params)
    with pytest.raises(TypeError, match="mask must be a bool"):
        additive_attention_forward(q, k, v, params, np.ones((3, 4)))
    with pytest.raises(ValueError, match="mask of shape"):
        additive_attention_forward(q, k, v, params, np.ones((3, 5), bool))
    with pytest.raises(ValueError, match="d_hidden"):
        init_additive_params(4, d_hidden=0)
    out, cache = additive_attention_forward(q, k, v, params)
    with pytest.raises(ValueError, match="dout has shape"):
        additive_attention_backward(out[..., :1], cache)


@given(L=st.integers(1, 4), S=st.integers(1, 4), d=st.integers(1, 4),
       q_batch=st.sampled_from([(), (3,), (2, 1)]), k_batch=st.sampled_from([(), (1,), (3,)]),
       seed=st.integers(0, 2**16))
def test_matches_torch_for_any_shapes_broadcasts_and_masks(L, S, d, q_batch, k_batch, seed):
    torch = require("torch")
    rng = np.random.default_rng(seed)
    q = randn(rng, *q_batch, L, d)
    k = randn(rng, *k_batch, S, d + 1)                 # keys of another width than queries
    v = randn(rng, S, 2)
    params = init_additive_params(d, d + 1, 3, rng=rng)
    mask = rng.random((L, S)) < 0.6                    # may contain fully masked rows
    out, cache = additive_attention_forward(q, k, v, params, mask)
    dout = rng.standard_normal(out.shape)
    dq, dk, dv, grads = additive_attention_backward(dout, cache)
    t, t_out, _ = _torch_additive(torch, q, k, v, params, mask)
    t_out.backward(torch.tensor(dout))
    assert max_abs_diff(out, t_out.detach().numpy()) < 1e-13
    for name, mine in (("q", dq), ("k", dk), ("v", dv), *grads.items()):
        assert mine.shape == t[name].shape
        assert max_abs_diff(mine, t[name].grad.numpy()) < 1e-12, name
