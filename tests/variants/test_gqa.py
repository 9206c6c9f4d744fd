"""Grouped-query and multi-query attention: sdpa_forward(enable_gqa=True), mha_forward with params of
init_mha_params(num_kv_heads=...) (the width of W_k says how many key/value heads)."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded

# (H, H_kv): grouped-query, multi-query (H_kv = 1), and the trivial grouping H_kv = H
HEADS = [(6, 2), (4, 1), (3, 3)]


def _torch_sdpa(q, k, v, dout, mask=None, is_causal=False):
    return torch_ref.sdpa(q, k, v, dout, mask=mask, is_causal=is_causal, enable_gqa=True)


@pytest.mark.parametrize("H,H_kv", HEADS)
@pytest.mark.parametrize("masking", ["none", "per_head", "padding", "causal"])
def test_gqa_forward_and_gradients_match_torch_enable_gqa_float64(rng, H, H_kv, masking):
    B, L, S, d_k, d_v = 2, 5, 7, 4, 3
    q, k, v = randn(rng, B, H, L, d_k), randn(rng, B, H_kv, S, d_k), randn(rng, B, H_kv, S, d_v)
    mask, is_causal = None, masking == "causal"
    if masking == "per_head":
        mask = rng.random((B, H, L, S)) > 0.3
        mask[0, -1, 2] = False                     # one fully masked row: 0, as in torch
    elif masking == "padding":
        mask = an.padding_mask([S, 4])[:, None]   # (B, 1, 1, S)
    out, cache = an.sdpa_forward(q, k, v, mask, is_causal=is_causal, spec=an.AttentionSpec(enable_gqa=True))
    dout = randn(rng, *out.shape)
    grads = an.sdpa_backward(dout, cache)
    want = _torch_sdpa(q, k, v, dout, mask, is_causal)
    assert out.shape == (B, H, L, d_v) and cache.weights.shape == (B, H, L, S)
    for got, ref, x in zip((out, *grads), want, (out, q, k, v), strict=True):
        assert got.shape == x.shape
        assert max_abs_diff(got, ref) < 1e-12


@pytest.mark.float32
@pytest.mark.parametrize("H,H_kv", HEADS[:2])
def test_gqa_float32_error_is_no_larger_than_torch_float32(rng, H, H_kv):
    B, L, S, d = 2, 16, 24, 8
    f32, f64 = rounded(randn(rng, B, H, L, d), randn(rng, B, H_kv, S, d), randn(rng, B, H_kv, S, d),
                       randn(rng, B, H, L, d))
    oracle = _torch_sdpa(*f64, is_causal=True)                    # torch, float64: not ours
    out, cache = an.sdpa_forward(*f32[:3], is_causal=True, spec=an.AttentionSpec(enable_gqa=True))
    ours = (out, *an.sdpa_backward(f32[3], cache))
    theirs = _torch_sdpa(*f32, is_causal=True)
    assert_float32_all(("out", "dq", "dk", "dv"), ours, theirs, oracle, framework="torch")


@pytest.mark.parametrize("H,H_kv", HEADS)
def test_gqa_equals_attention_with_kv_heads_repeated_and_sums_grads_over_the_group(rng, H, H_kv):
    G = H // H_kv
    q, k, v = randn(rng, 2, H, 4, 5), randn(rng, 2, H_kv, 6, 5), randn(rng, 2, H_kv, 6, 3)
    out, cache = an.sdpa_forward(q, k, v, spec=an.AttentionSpec(enable_gqa=True))
    dout = randn(rng, *out.shape)
    dq, dk, dv = an.sdpa_backward(dout, cache)
    # the reference materializes the repeated heads: query head n uses kv head n // G
    k_rep, v_rep = np.repeat(k, G, axis=-3), np.repeat(v, G, axis=-3)
    ref_out, ref_cache = an.sdpa_forward(q, k_rep, v_rep)
    ref_dq, ref_dk, ref_dv = an.sdpa_backward(dout, ref_cache)
    assert max_abs_diff(out, ref_out) < 1e-14
    assert max_abs_diff(dq, ref_dq) < 1e-14
    assert max_abs_diff(dk, ref_dk.reshape(2, H_kv, G, 6, 5).sum(axis=2)) < 1e-13
    assert max_abs_diff(dv, ref_dv.reshape(2, H_kv, G, 6, 3).sum(axis=2)) < 1e-13


def test_gqa_backward_passes_gradcheck_with_mask_bias_and_dropout(rng):
    q, k, v = randn(rng, 2, 4, 3, 2), randn(rng, 2, 2, 5, 2), randn(rng, 2, 2, 5, 3)
    mask = rng.random((2, 4, 3, 5)) > 0.3
    bias = randn(rng, 1, 4, 3, 5)

    def forward(q, k, v):
        return an.sdpa_forward(q, k, v, mask, bias=bias, rng=7, spec=an.AttentionSpec(dropout_p=0.25,
                                                                                      enable_gqa=True))

    result = an.gradcheck(forward, an.sdpa_backward, (q, k, v))
    assert result.ok, str(result)


def test_gqa_replays_an_explicit_per_head_dropout_mask(rng):
    q, k, v = randn(rng, 1, 4, 3, 2), randn(rng, 1, 2, 5, 2), randn(rng, 1, 2, 5, 3)
    keep = rng.random((1, 4, 3, 5)) > 0.4
    out, cache = an.sdpa_forward(q, k, v, dropout_mask=keep, spec=an.AttentionSpec(dropout_p=0.4,
                                                                                   enable_gqa=True))
    ref, _ = an.sdpa_forward(q, np.repeat(k, 2, axis=-3), np.repeat(v, 2, axis=-3),
                             dropout_mask=keep, spec=an.AttentionSpec(dropout_p=0.4))
    assert max_abs_diff(out, ref) < 1e-14
    spec = an.AttentionSpec(dropout_p=0.4, enable_gqa=True)
    result = an.gradcheck(lambda q, k, v: an.sdpa_forward(q, k, v, dropout_mask=keep, spec=spec),
                          an.sdpa_backward, (q, k, v))
    assert result.ok, str(result)


def test_gqa_flag_with_equal_head_counts_changes_nothing(rng):
    q, k, v = randn(rng, 2, 3, 4, 5), randn(rng, 2, 3, 6, 5), randn(rng, 2, 3, 6, 5)
    a, _ = an.sdpa_forward(q, k, v, is_causal=True, spec=an.AttentionSpec(enable_gqa=True))
    b, _ = an.sdpa_forward(q, k, v, is_causal=True)
    assert np.array_equal(a, b)


def test_gqa_refuses_head_counts_that_do_not_divide(rng):
    q, k, v = randn(rng, 1, 6, 3, 4), randn(rng, 1, 4, 5, 4), randn(rng, 1, 4, 5, 4)
    with pytest.raises(ValueError, match=r"H=6 heads, not a multiple of the H_kv=4"):
        an.sdpa_forward(q, k, v, spec=an.AttentionSpec(enable_gqa=True))
    with pytest.raises(ValueError, match=r"k has 2 heads but v has 4"):
        an.sdpa_forward(q, k[:, :2], v, spec=an.AttentionSpec(enable_gqa=True))
    with pytest.raises(ValueError, match=r"needs a head axis: k must be"):
        an.sdpa_forward(q, k[0, 0], v, spec=an.AttentionSpec(enable_gqa=True))
    with pytest.raises(ValueError, match=r"mask of shape \(1, 3, 3, 5\) has 3 heads"):
        an.sdpa_forward(q, k[:, :2], v[:, :2], np.ones((1, 3, 3, 5), bool),
                        spec=an.AttentionSpec(enable_gqa=True))


def test_gqa_without_the_flag_refuses_mismatched_heads_as_before(rng):
    q, k, v = randn(rng, 1, 6, 3, 4), randn(rng, 1, 2, 5, 4), randn(rng, 1, 2, 5, 4)
    with pytest.raises(ValueError, match="batch dims do not broadcast"):
        an.sdpa_forward(q, k, v)


# ----------------------------------------------------------------- multi-head with num_kv_heads

def test_init_mha_params_gives_kv_projections_num_kv_heads_wide():
    p = an.init_mha_params(24, 6, num_kv_heads=2, rng=0)
    assert p["W_q"].shape == (24, 24) and p["W_o"].shape == (24, 24)
    assert p["W_k"].shape == (24, 8) and p["W_v"].shape == (24, 8)
    assert p["b_k"].shape == (8,) and p["b_v"].shape == (8,)
    mqa = an.init_mha_params(24, 6, num_kv_heads=1, rng=0, bias=False)
    assert mqa["W_k"].shape == (24, 4) and "b_k" not in mqa
    with pytest.raises(ValueError, match="num_heads=6 is not a multiple of num_kv_heads=4"):
        an.init_mha_params(24, 6, num_kv_heads=4)


@pytest.mark.parametrize("num_kv_heads", [2, 1])
def test_mha_with_num_kv_heads_matches_torch_projections_and_sdpa_enable_gqa(rng, num_kv_heads):
    torch = require("torch")
    d_model, h, B, L, S = 12, 6, 2, 5, 4
    p = an.init_mha_params(d_model, h, num_kv_heads=num_kv_heads, rng=rng)
    p = {name: w + 0.1 * randn(rng, *w.shape) for name, w in p.items()}   # nonzero biases
    query, key = randn(rng, B, L, d_model), randn(rng, B, S, d_model)
    value = randn(rng, B, S, d_model)
    mask = rng.random((L, S)) > 0.25
    out, cache = an.mha_forward(query, key, value, p, num_heads=h, mask=mask)
    dout = randn(rng, *out.shape)
    dquery, dkey, dvalue, grads = an.mha_backward(dout, cache)

    t = {name: torch.tensor(w, requires_grad=True) for name, w in p.items()}
    tx = [torch.tensor(x, requires_grad=True) for x in (query, key, value)]

    def heads(x, n):   # (B, T, n*d) -> (B, n, T, d)
        return x.unflatten(-1, (n, -1)).transpose(1, 2)

    tq = heads(tx[0] @ t["W_q"] + t["b_q"], h)
    tk = heads(tx[1] @ t["W_k"] + t["b_k"], num_kv_heads)
    tv = heads(tx[2] @ t["W_v"] + t["b_v"], num_kv_heads)
    th = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask),
                                                          enable_gqa=True)
    tout = th.transpose(1, 2).flatten(-2) @ t["W_o"] + t["b_o"]
    tout.backward(torch.tensor(dout))
    assert max_abs_diff(out, tout.detach().numpy()) < 1e-12
    for ours, theirs in zip((dquery, dkey, dvalue), tx, strict=True):
        assert max_abs_diff(ours, theirs.grad.numpy()) < 1e-12
    for name in p:
        assert grads[name].shape == p[name].shape
        assert max_abs_diff(grads[name], t[name].grad.numpy()) < 1e-12


def test_mha_with_num_kv_heads_passes_gradcheck(rng):
    p = an.init_mha_params(8, 4, num_kv_heads=2, rng=rng)
    p = {name: w + 0.1 * randn(rng, *w.shape) for name, w in p.items()}
    x, y = randn(rng, 2, 3, 8), randn(rng, 2, 4, 8)

    def forward(query, key, value, params):
        return an.mha_forward(query, key, value, params, num_heads=4, is_causal=True)

    result = an.gradcheck(forward, an.mha_backward, (x, y, y + 1.0, p))
    assert result.ok, str(result)


def test_tiled_gqa_accepts_nested_lists_like_the_dense_path(rng):
    q, k, v = randn(rng, 4, 3, 2), randn(rng, 2, 5, 2), randn(rng, 2, 5, 2)
    out, _ = an.flash_attention_forward(q.tolist(), k.tolist(), v.tolist(),
                                        spec=an.AttentionSpec(enable_gqa=True))
    want, _ = an.sdpa_forward(q.tolist(), k.tolist(), v.tolist(), spec=an.AttentionSpec(enable_gqa=True))
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)


def test_grouped_query_shapes_without_the_flag_suggest_it():
    """4 query heads over 2 key/value heads is grouped-query attention: the kernels' error says
    which flag runs it (enable_gqa=True); shapes that are not GQA get no hint; multi-head attention
    reads it from params."""
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(1, 4, 5, 8)), rng.normal(size=(1, 2, 5, 8))
    for forward in (an.sdpa_forward, an.flash_attention_forward):
        with pytest.raises(ValueError, match=r"q has 4 heads and k, v 2: for grouped-query "
                                             r"attention pass spec=AttentionSpec\(enable_gqa=True\)$"):
            forward(q, k, k)
    with pytest.raises(ValueError, match=r"do not broadcast: q \(1, 4\), k \(1, 3\), v \(1, 3\)$"):
        an.sdpa_forward(q, k[:, :1].repeat(3, 1), k[:, :1].repeat(3, 1))
    params = an.init_mha_params(16, 4, rng=0)
    params = {n: p[..., :8] if n[-1] in "kv" else p for n, p in params.items()}    # 2 kv heads
    x = rng.normal(size=(2, 5, 16))
    # W_k's width says 2 key/value heads, so mha_forward runs grouped-query attention as is
    out = an.mha_forward(x, x, x, params, num_heads=4)[0]
    assert out.shape == (2, 5, 16)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


@pytest.mark.parametrize("dropout", ["none", "drawn", "given"])
def test_dense_grouped_query_attention_with_per_head_mask_bias_and_dropout(rng, dropout):
    """Kills a change to the grouping of mask, bias and dropout mask (``H = q.shape[-3]``, the
    ``is None`` tests, ``groups > 1``) in the forward, or to the backward's regrouping of the
    keep-mask: ``enable_gqa`` with a per-query-head mask and bias (H, L, S) and dropout, against
    the same call on k, v repeated to H heads (dk, dv summed back over each group of G = 2)."""
    from attention_np.kernels import fused

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
