"""Attention sinks (kernels/sink_logits.py): against transformers' gpt-oss eager attention with torch autograd
on its ``sinks`` parameter (GQA, causal, sliding window, float64, random upstream gradients), and by
finite differences."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded

R = np.random.default_rng(1260)


@pytest.mark.parametrize("window", [None, (2, 0)])
def test_sinks_equal_gpt_oss_forward_and_every_gradient(window):
    torch = require("torch")
    gpt_oss = require("transformers.models.gpt_oss.modeling_gpt_oss")
    B, H, H_KV, L, D = 2, 4, 2, 5, 6
    q, k, v = randn(R, B, H, L, D), randn(R, B, H_KV, L, D), randn(R, B, H_KV, L, D)
    sinks = randn(R, H)
    mask = an.causal_mask(L) if window is None else an.sliding_window_mask(
        L, L, left=window[0], right=window[1])
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = H // H_KV, False
    module.sinks = torch.nn.Parameter(torch.tensor(sinks))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    additive = torch.zeros(L, L, dtype=torch.float64).masked_fill(~torch.tensor(mask), float("-inf"))
    theirs, _ = gpt_oss.eager_attention_forward(module, tq, tk, tv, additive, scaling=D ** -0.5)
    dout = randn(R, B, L, H, D)                                   # gpt-oss returns (B, L, h, d)
    theirs.backward(torch.tensor(dout))
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, is_causal=True, spec=an.AttentionSpec(window=window,
                                                                                             enable_gqa=True))
    dq, dk, dv, dsinks = an.sdpa_sinks_backward(np.swapaxes(dout, 1, 2), cache)
    assert max_abs_diff(out, np.swapaxes(theirs.detach().numpy(), 1, 2)) < 1e-13
    for ours, t in ((dq, tq), (dk, tk), (dv, tv)):
        assert max_abs_diff(ours, t.grad.numpy()) < 1e-13
    assert max_abs_diff(dsinks, module.sinks.grad.numpy()) < 1e-13
    assert np.all(cache.weights.sum(-1) < 1)                     # the sink takes some weight


def test_sink_gradients_match_finite_differences_with_a_bias():
    q, k, v = randn(R, 2, 3, 4), randn(R, 2, 5, 4), randn(R, 2, 5, 3)
    sinks, bias, dout = randn(R, 2), randn(R, 3, 5), randn(R, 2, 3, 3)

    def loss():
        return float(np.sum(an.sdpa_sinks_forward(q, k, v, sinks, bias=bias)[0] * dout))

    *grads, dsinks, dbias = an.sdpa_sinks_backward(
        dout, an.sdpa_sinks_forward(q, k, v, sinks, bias=bias)[1], return_dbias=True)
    for x, g in zip((q, k, v, sinks, bias), (*grads, dsinks, dbias), strict=True):
        assert g.shape == x.shape and max_abs_diff(g, numerical_gradient(loss, x)) < 1e-9


def test_a_very_negative_sink_is_plain_attention_and_a_masked_row_gives_zero():
    q, k, v = randn(R, 2, 3, 4), randn(R, 2, 5, 4), randn(R, 2, 5, 3)
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out, _ = an.sdpa_sinks_forward(q, k, v, np.full(2, -800.0), mask)
    want, _ = an.sdpa_forward(q, k, v, mask)
    assert max_abs_diff(out, want) < 1e-15
    assert np.all(out[:, 1] == 0)


def test_bad_sinks_name_themselves():
    q = randn(R, 2, 3, 4)
    with pytest.raises(ValueError, match="sinks"):
        an.sdpa_sinks_forward(q, q, q, np.zeros(3))
    with pytest.raises(TypeError, match="sinks"):
        an.sdpa_sinks_forward(q, q, q, np.zeros(2, int))
    with pytest.raises(TypeError, match="cache"):
        an.sdpa_sinks_backward(q, an.sdpa_forward(q, q, q)[1])


@pytest.mark.float32
def test_sinks_float32():
    torch = require("torch")
    gpt_oss = require("transformers.models.gpt_oss.modeling_gpt_oss")
    (q, k, v, sinks, dout), f64 = rounded(*(randn(R, 2, 4, 6, 8) for _ in range(3)), randn(R, 4),
                                         randn(R, 2, 4, 6, 8))
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks)
    ours = [out, *an.sdpa_sinks_backward(dout, cache)]
    oracle = torch_ref.formula(f64[0], f64[1], f64[2], f64[4], sinks=f64[3])   # torch, float64
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = 1, False
    module.sinks = torch.nn.Parameter(torch.tensor(sinks))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_out, _ = gpt_oss.eager_attention_forward(module, tq, tk, tv, None, scaling=8 ** -0.5)
    t_out.backward(torch.tensor(np.swapaxes(dout, 1, 2)))
    theirs = [np.swapaxes(t_out.detach().numpy(), 1, 2), tq.grad.numpy(), tk.grad.numpy(),
              tv.grad.numpy(), module.sinks.grad.numpy()]
    assert_float32_all(("out", "dq", "dk", "dv", "dsinks"), ours, theirs, oracle, framework="gpt-oss")


# --- sinks in multi-head attention and the decode step: params["sinks"] (h,), sinks=True ---

E, H, H_KV, D = 16, 4, 2, 4


def _mha_params():
    p = an.init_mha_params(E, H, num_kv_heads=H_KV, rng=R)
    p = {n: a + 0.1 * randn(R, *a.shape) for n, a in p.items()}     # non-zero biases too
    p["sinks"] = randn(R, H)
    return p


@pytest.mark.parametrize("window", [None, (2, 0)])
def test_mha_sinks_equal_gpt_oss_attention_forward_and_every_gradient(window):
    torch = require("torch")
    gpt_oss = require("transformers.models.gpt_oss.modeling_gpt_oss")
    config = gpt_oss.GptOssConfig(hidden_size=E, num_attention_heads=H, num_key_value_heads=H_KV,
                                  head_dim=D, attention_bias=True)
    config._attn_implementation = "eager"
    attn = gpt_oss.GptOssAttention(config, layer_idx=0).double()
    params = _mha_params()
    with torch.no_grad():
        for n in "qkvo":
            getattr(attn, f"{n}_proj").weight.copy_(torch.tensor(params[f"W_{n}"].T))
            getattr(attn, f"{n}_proj").bias.copy_(torch.tensor(params[f"b_{n}"]))
        attn.sinks.copy_(torch.tensor(params["sinks"]))
    B, L = 2, 6
    x = randn(R, B, L, E)
    cos, sin = (torch.tensor(a)[None] for a in an.rope_angles(np.arange(L), D))   # gpt-oss: (1, L, D/2)
    allowed = an.causal_mask(L) if window is None else an.sliding_window_mask(
        L, L, left=window[0], right=window[1])
    additive = torch.zeros(1, 1, L, L, dtype=torch.float64).masked_fill(~torch.tensor(allowed),
                                                                         float("-inf"))
    tx = torch.tensor(x, requires_grad=True)
    out, _ = attn(tx, position_embeddings=(cos, sin), attention_mask=additive)
    dout = randn(R, B, L, E)
    out.backward(torch.tensor(dout))
    ours, cache = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True,      # sinks: params
                                 spec=an.AttentionSpec(window=window, rope=an.RoPE()))
    dq, dk, dv, grads = an.mha_backward(dout, cache)
    assert max_abs_diff(ours, out.detach().numpy()) < 1e-13
    assert max_abs_diff(dq + dk + dv, tx.grad.numpy()) < 1e-13
    for n in "qkvo":
        assert max_abs_diff(grads[f"W_{n}"], getattr(attn, f"{n}_proj").weight.grad.numpy().T) < 1e-13
        assert max_abs_diff(grads[f"b_{n}"], getattr(attn, f"{n}_proj").bias.grad.numpy()) < 1e-13
    assert max_abs_diff(grads["sinks"], attn.sinks.grad.numpy()) < 1e-13
    assert np.all(np.abs(grads["sinks"]) > 1e-6)                   # the sinks did get a gradient
    assert np.all(cache.weights.sum(-1) < 1)


def test_mha_sink_gradients_match_finite_differences_with_softcap_and_bias():
    params, dout = _mha_params(), randn(R, 2, 3, E)
    query, key = randn(R, 2, 3, E), randn(R, 2, 5, E)
    bias, mask = randn(R, H, 3, 5), R.random((2, 1, 3, 5)) < 0.7
    mask[0, 0, 1] = False                                           # a fully masked query row
    kw = dict(num_heads=H, spec=an.AttentionSpec(softcap=1.5), bias=bias)

    def loss():
        return float(np.sum(an.mha_forward(query, key, key, params, mask, **kw)[0] * dout))

    dquery, dkey, dvalue, grads, dbias = an.mha_backward(
        dout, an.mha_forward(query, key, key, params, mask, **kw)[1], return_dbias=True)
    for x, g in ((query, dquery), (key, dkey + dvalue), (bias, dbias),
                 *((params[n], grads[n]) for n in ("sinks", "W_q", "W_k", "b_v", "W_o"))):
        assert g.shape == x.shape and max_abs_diff(g, numerical_gradient(loss, x)) < 1e-8


def test_sinks_follow_params_and_a_very_negative_sink_changes_nothing():
    params, x = _mha_params(), randn(R, 2, 4, E)
    kw = dict(num_heads=H, is_causal=True)
    without = {n: w for n, w in params.items() if n != "sinks"}
    plain, cache = an.mha_forward(x, x, x, without, **kw)
    params["sinks"] = np.full(H, -800.0)
    assert max_abs_diff(an.mha_forward(x, x, x, params, **kw)[0], plain) < 1e-15


def test_decode_with_sinks_equals_the_whole_sequence_forward():
    params, x = _mha_params(), randn(R, 2, 7, E)
    spec = an.AttentionSpec(window=(3, 0), rope=an.RoPE(), softcap=2.0)
    want, _ = an.mha_forward(x, x, x, params, is_causal=True, spec=spec, num_heads=H)
    kv = an.KVCache(7)
    steps = [an.mha_decode_step(x[:, a:b], params, kv, spec=spec, num_heads=H)
             for a, b in ((0, 3), (3, 4), (4, 7))]                   # a prompt chunk, then steps
    assert max_abs_diff(np.concatenate(steps, axis=1), want) < 1e-13
    # and the sinks matter: the same decode without them gives other numbers
    without = {n: w for n, w in params.items() if n != "sinks"}
    no_sinks = an.mha_decode_step(x, without, an.KVCache(7), spec=spec, num_heads=H)
    assert max_abs_diff(no_sinks, want) > 1e-3


def test_sdpa_sinks_with_softcap_caps_the_scores_not_the_sink():
    q, k, v = randn(R, 2, 3, 4), randn(R, 2, 5, 4), randn(R, 2, 5, 3)
    sinks, dout = np.array([0.5, -1.0]), randn(R, 2, 3, 3)
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, spec=an.AttentionSpec(softcap=0.7))
    # the formula written out: capped scores and the uncapped sink in one softmax denominator
    s = 0.7 * np.tanh(q @ np.swapaxes(k, -1, -2) / 2 / 0.7)                   # scale 1/sqrt(4)
    e, e_sink = np.exp(s), np.exp(sinks)[:, None, None]
    assert max_abs_diff(out, e / (e.sum(-1, keepdims=True) + e_sink) @ v) < 1e-14
    grads = an.sdpa_sinks_backward(dout, cache)
    for x, g in zip((q, k, v, sinks), grads, strict=True):
        num = numerical_gradient(
            lambda: float(np.sum(an.sdpa_sinks_forward(q, k, v, sinks,
                                                       spec=an.AttentionSpec(softcap=0.7))[0] * dout)), x)
        assert max_abs_diff(g, num) < 1e-9


def test_sinks_take_a_key_padding_bias_broadcast_along_the_queries():
    """A (B, 1, 1, S) bias (raised before). Its own generator: with the module's shared one the
    draw depended on the tests run before it. Central differences with step 1e-6 on a loss of
    size ~10 carry ~1e-16 * 10 / 1e-6 = 1e-9 of rounding per entry of dbias (each a sum over 6
    scores): 200 draws measured up to 2.5e-9, so 1e-8 (the sink-free dense dbias is equal to
    ours exactly)."""
    R = np.random.default_rng(207)
    q, k, v = randn(R, 2, 2, 3, 4), randn(R, 2, 2, 5, 4), randn(R, 2, 2, 5, 3)
    bias, dout = randn(R, 2, 1, 1, 5), randn(R, 2, 2, 3, 3)
    out, cache = an.sdpa_sinks_forward(q, k, v, np.full(2, -800.0), bias=bias)
    assert max_abs_diff(out, an.sdpa_forward(q, k, v, bias=bias)[0]) < 1e-15
    dbias = an.sdpa_sinks_backward(dout, cache, return_dbias=True)[-1]
    num = numerical_gradient(lambda: float(np.sum(
        an.sdpa_sinks_forward(q, k, v, np.full(2, -800.0), bias=bias)[0] * dout)), bias)
    assert dbias.shape == bias.shape and max_abs_diff(dbias, num) < 1e-8
    np.testing.assert_array_equal(dbias, an.sdpa_backward(dout, an.sdpa_forward(q, k, v, bias=bias)[1],
                                                          return_dbias=True)[-1])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("path", ["dense", "tiled"])
def test_garbage_in_masked_slots_never_reaches_the_answer_with_sinks(path, bad):
    # batch 0 pads keys 3, 4 (for every query); batch 1 masks query row 2 fully
    q, k, v = randn(R, 2, 2, 4, 3), randn(R, 2, 2, 5, 3), randn(R, 2, 2, 5, 3)
    sinks, dout = randn(R, 2), randn(R, 2, 2, 4, 3)
    mask = np.ones((2, 1, 4, 5), bool)
    mask[0, :, :, 3:] = False
    mask[1, :, 2, :] = False
    qb, kb, vb = q.copy(), k.copy(), v.copy()
    kb[0, :, 3:], vb[0, :, 3:], qb[1, :, 2] = bad, bad, bad

    def run(q, k, v):
        if path == "dense":
            out, cache = an.sdpa_sinks_forward(q, k, v, sinks, mask, spec=an.AttentionSpec(softcap=1.3))
            return [out, *an.sdpa_sinks_backward(dout, cache)]
        out, cache = an.flash_attention_forward(q, k, v, mask, sinks=sinks, block_size=2,
                                                spec=an.AttentionSpec(softcap=1.3))
        return [out, *an.flash_attention_backward(dout, cache)]

    clean = (q.copy(), k.copy(), v.copy())          # the garbage slots set to 0 instead
    clean[1][0, :, 3:] = clean[2][0, :, 3:] = clean[0][1, :, 2] = 0
    with np.errstate(invalid="ignore", over="ignore"):
        got = run(qb, kb, vb)
    for name, a, b in zip(("out", "dq", "dk", "dv", "dsinks"), got, run(*clean), strict=True):
        assert np.array_equal(a, b), name
    assert np.all(got[0][1, :, 2] == 0) and np.all(got[1][1, :, 2] == 0)


def test_init_mha_params_makes_zero_sinks_that_give_one_extra_key_of_score_zero():
    """init_mha_params(sinks=True) makes params["sinks"] = zeros(h): the weights are then
    exp(s_ij) / (1 + sum_j exp(s_ij)), a softmax with one more key of score 0."""
    p = an.init_mha_params(8, 2, rng=0, sinks=True)
    assert p["sinks"].shape == (2,) and p["sinks"].dtype == np.float64 and not p["sinks"].any()
    assert "sinks" not in an.init_mha_params(8, 2, rng=0)
    assert an.init_mha_params(8, 2, rng=0, sinks=True, dtype=np.float32)["sinks"].dtype == np.float32
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    _, cache = an.mha_forward(x, x, x, p, num_heads=2)                        # sinks: params
    q = (x @ p["W_q"]).reshape(1, 5, 2, 4).transpose(0, 2, 1, 3)              # (1, h, L, d_k)
    k = (x @ p["W_k"]).reshape(1, 5, 2, 4).transpose(0, 2, 1, 3)
    e = np.exp(q @ k.transpose(0, 1, 3, 2) / 2.0)                             # scale 1/sqrt(4)
    expected = e / (1 + e.sum(-1, keepdims=True))
    assert np.abs(cache.weights - expected).max() < 1e-14


# --- the dense kernel adds the sink as one term of each row's max and sum, never as a key ---

def test_the_fused_plan_adds_the_sink_as_a_term_not_a_key():
    """fused.sdpa_plan honours Plan.sinks (it used to ignore it): the definition's numbers, a
    cache of the S real keys only (no (L, S + 1) array), and each row's weights plus its sink's
    weight sum to 1."""
    from attention_np.kernels import fused
    from attention_np.kernels.plan import Plan
    q, k, v = randn(R, 2, 4, 3, 5), randn(R, 2, 2, 6, 5), randn(R, 2, 2, 6, 3)
    sinks = randn(R, 4)
    out, cache = fused.sdpa_plan(q, k, v, Plan(sinks=sinks, enable_gqa=True))
    kk = np.repeat(k, 2, axis=1)                                      # GQA written out
    e = np.exp(q @ np.swapaxes(kk, -1, -2) / np.sqrt(5))              # (2, 4, 3, 6)
    total = e.sum(-1, keepdims=True) + np.exp(sinks)[:, None, None]
    assert max_abs_diff(out, e / total @ np.repeat(v, 2, axis=1)) < 1e-14
    assert cache.exp_scores.shape[-1] == 6 and cache.weights.shape == (2, 4, 3, 6)
    assert cache.sink_weight.shape == (2, 4, 3, 1)
    assert max_abs_diff(cache.sink_weight, np.exp(sinks)[:, None, None] / total) < 1e-15
    np.testing.assert_allclose(cache.weights.sum(-1) + cache.sink_weight[..., 0], 1, rtol=1e-14)


def test_the_fused_plan_refuses_sinks_with_dropout():
    from attention_np.kernels import fused
    from attention_np.kernels.plan import Plan
    q = randn(R, 2, 3, 4)
    with pytest.raises(ValueError, match="cannot combine sinks with dropout"):
        fused.sdpa_plan(q, q, q, Plan(sinks=np.zeros(2), dropout_p=0.5, rng=0))
    with pytest.raises(ValueError, match="cannot combine sinks with dropout"):
        fused.sdpa_plan(q, q, q, Plan(sinks=np.zeros(2)), dropout_mask=np.ones((3, 3), bool))


def test_a_minus_inf_sink_is_plain_attention_even_on_a_fully_masked_row():
    """A sink of -inf takes no weight: every row sums to 1 as in Eq. (1), a fully masked row is 0
    (not 0/0), and dsinks is 0."""
    q, k, v, dout = randn(R, 2, 3, 4), randn(R, 2, 5, 4), randn(R, 2, 5, 3), randn(R, 2, 3, 3)
    mask = np.ones((3, 5), bool)
    mask[2] = False
    out, cache = an.sdpa_sinks_forward(q, k, v, np.full(2, -np.inf), mask)
    want, plain = an.sdpa_forward(q, k, v, mask)
    assert max_abs_diff(out, want) == 0 and np.all(out[:, 2] == 0)
    *grads, dsinks = an.sdpa_sinks_backward(dout, cache)
    for g, w in zip(grads, an.sdpa_backward(dout, plain), strict=True):
        assert max_abs_diff(g, w) < 1e-15
    assert np.all(dsinks == 0)


@pytest.mark.float32
def test_a_sink_far_above_every_score_joins_the_max_and_does_not_overflow():
    """exp(100) overflows float32: the sink must be part of each row's max, as in the definition
    computed in float64. Its weight is then ~1 and everything is finite."""
    q, k, v, dout = (randn(R, 2, 3, 4, dtype=np.float32) for _ in range(4))
    sinks = np.array([100.0, 95.0], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):    # underflow is expected
        out, cache = an.sdpa_sinks_forward(q, k, v, sinks)
        dq, dk, dv, dsinks = an.sdpa_sinks_backward(dout, cache)
    e = np.exp(q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / 2)
    total = e.sum(-1, keepdims=True) + np.exp(sinks.astype(np.float64))[:, None, None]
    assert max_abs_diff(out, e / total @ v) < 1e-40 + 1e-6 * np.abs(e / total @ v).max()
    np.testing.assert_allclose(cache.attention.sink_weight, 1, rtol=1e-6)
    assert all(np.isfinite(g).all() for g in (dq, dk, dv, dsinks))


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_sinks_cache_is_frozen(rng):
    """Kills ``frozen=True`` dropped from ``SinksCache``: the backward reads the cache, so a
    caller must not be able to rebind what it holds."""
    q = randn(rng, 2, 3, 4)
    _, cache = an.sdpa_sinks_forward(q, q, q, np.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.attention = None


def test_sinks_forward_takes_array_likes(rng):
    """Kills the deleted ``check_qkv`` of ``sdpa_sinks_forward``: nested lists are inputs as for
    ``sdpa_forward``, and give the numbers of the arrays they hold."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    want, _ = an.sdpa_sinks_forward(q, k, v, sinks)
    out, _ = an.sdpa_sinks_forward(q.tolist(), k.tolist(), v.tolist(), sinks.tolist())
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("scale", [None, 0.3])
def test_sinks_forward_default_is_not_causal_and_scale_is_used(rng, scale):
    """Kills ``is_causal: bool = False`` -> ``True`` and ``scale=`` dropped in
    ``sdpa_sinks_forward``: with no mask every query attends every key, by the definition
    ``e^{scores} / (e^{s_n} + sum_j e^{scores_j})`` with ``scores = q kᵀ·scale``."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    s = 0.5 if scale is None else scale                                # 1/sqrt(d_k), d_k = 4
    e = np.exp(q @ np.swapaxes(k, -1, -2) * s)                         # (2, 3, 5)
    weights = e / (np.exp(sinks)[:, None, None] + e.sum(axis=-1, keepdims=True))
    out, _ = an.sdpa_sinks_forward(q, k, v, sinks, scale=scale)
    np.testing.assert_allclose(out, weights @ v, rtol=1e-12, atol=1e-14)


def test_sinks_mask_of_more_batch_dims_than_q_with_a_dead_row(rng):
    """Kills the deleted sum of a batch-adding mask's dead-row flags back to q's rows (in 0.1's
    sinks module; the fused kernel's ``drop_masked`` does this now): q must keep its shape, so dq
    has q's shape and is the sum of the gradients of the batch's masks run one at a time (the
    backward of broadcasting q over them)."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.3, -0.7])
    mask = rng.random((2, 1, 3, 5)) > 0.3
    mask[0, 0, 1] = False                       # query 1 sees no key in batch 0 (only the sink)
    mask[1, 0, 1, 2] = True                     # but it sees key 2 in batch 1
    dout = randn(rng, 2, 2, 3, 2)
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, mask)
    dq, dk, dv, dsinks = an.sdpa_sinks_backward(dout, cache)
    assert out.shape == (2, 2, 3, 2) and dq.shape == q.shape
    parts = []
    for b in range(2):
        out_b, cache_b = an.sdpa_sinks_forward(q, k, v, sinks, mask[b])
        np.testing.assert_allclose(out[b], out_b, rtol=1e-13, atol=1e-15)
        parts.append(an.sdpa_sinks_backward(dout[b], cache_b))
    for got, want in zip((dq, dk, dv, dsinks), (sum(p[i] for p in parts) for i in range(4)),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw, words", [
    ({"mask": np.ones((4, 3), bool)}, "mask of shape (4, 3)"),
    ({"bias": np.zeros((5, 3, 3))}, "bias of shape (5, 3, 3)"),
    ({"bias": np.zeros((3, 4))}, "bias of shape (3, 4)"),
])
def test_sinks_forward_names_a_mask_or_bias_that_does_not_fit(kw, words):
    """A bug found reading a survivor (the broadcast of the allowed pairs to the mask's shape
    deleted): a mask or bias that does not fit the scores raised NumPy's "shape mismatch: objects
    cannot be broadcast", naming neither; now a ValueError names the argument, its shape and the
    scores' shape."""
    q = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=re.escape(words) + ".*does not broadcast to scores"):
        an.sdpa_sinks_forward(q, q, q, np.zeros(2), **kw)


def test_sinks_mask_as_a_list_or_a_float_array(rng):
    """Kills the deleted ``mask = as_bool_mask(mask)`` of ``sdpa_sinks_forward``: a nested list of
    bools is a mask (the numbers of the array it holds); a float array is a TypeError naming
    ``mask``."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    mask = rng.random((3, 5)) > 0.4
    want, _ = an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask)
    out, _ = an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask.tolist())
    np.testing.assert_array_equal(out, want)
    with pytest.raises(TypeError, match="mask must be a bool array"):
        an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask.astype(float))


def test_sinks_forward_default_is_not_grouped_query_attention(rng):
    """Kills ``enable_gqa: bool = False`` -> ``True`` in ``sdpa_sinks_forward``: as
    ``sdpa_forward`` (and PyTorch SDPA), k and v of fewer heads than q are refused unless
    ``enable_gqa=True``, which then gives query head n the key/value head n // 2 (here against k,
    v repeated by hand)."""
    q, k, v = randn(rng, 4, 3, 8), randn(rng, 2, 5, 8), randn(rng, 2, 5, 2)
    sinks = np.array([0.1, -0.2, 0.3, 0.0])
    with pytest.raises(ValueError, match="batch dims do not broadcast"):
        an.sdpa_sinks_forward(q, k, v, sinks)
    out, _ = an.sdpa_sinks_forward(q, k, v, sinks, spec=an.AttentionSpec(enable_gqa=True))
    want, _ = an.sdpa_sinks_forward(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0), sinks)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)


def test_sinks_nan_query_in_a_row_that_sees_no_key(rng):
    """Kills ``any(axis=-1)`` -> ``axis=1`` in the rows that see no key: a query whose every key
    is masked (here row 1 of head 0 under a per-head mask) attends the sink alone, value 0, so
    its output is 0 even when that query is NaN (the sink key's score is ``q · 0`` then); the
    other rows are the definition's."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    mask = np.ones((2, 3, 5), bool)
    mask[0, 1] = False
    q[0, 1] = np.nan
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, mask)
    assert np.all(out[0, 1] == 0)
    e = np.exp(q @ np.swapaxes(k, -1, -2) / 2.0)
    weights = e / (np.exp(sinks)[:, None, None] + e.sum(axis=-1, keepdims=True))
    want = weights @ v
    np.testing.assert_allclose(out[1], want[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out[0, [0, 2]], want[0, [0, 2]], rtol=1e-12, atol=1e-14)
    assert all(np.isfinite(g).all() for g in an.sdpa_sinks_backward(randn(rng, 2, 3, 2), cache))
