"""attention_np.interop.torch and compare_mha: conversions to and from PyTorch, checked by
running both sides (float64, random upstream gradients)."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.interop import compare_mha
from attention_np.interop import torch as itorch
from tests.helpers import max_abs_diff, require

torch = require("torch")
F = torch.nn.functional


def _params(rng, d_model=8, h=2, kdim=None, vdim=None, bias=True):
    params = an.init_mha_params(d_model, h, kdim=kdim, vdim=vdim, bias=bias, rng=rng)
    # non-zero biases, so that a bias in the wrong place shows
    return {n: (rng.standard_normal(p.shape) if n.startswith("b") else p) for n, p in params.items()}


LAYOUTS = [dict(), dict(kdim=6, vdim=4), dict(bias=False), dict(kdim=6, vdim=4, bias=False)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=["packed", "separate", "packed-nobias",
                                                 "separate-nobias"])
def test_params_roundtrip_through_torch_module_is_exact(rng, layout):
    params = _params(rng, **layout)
    module = itorch.params_to_torch_mha(params, 2)
    back, h = itorch.params_from_torch_mha(module)
    assert h == 2 and set(back) == set(params)
    for name in params:
        np.testing.assert_array_equal(back[name], params[name])


def test_packed_in_proj_weight_rows_are_transposed_w_q_w_k_w_v(rng):
    params = _params(rng)
    module = itorch.params_to_torch_mha(params, 2)
    packed = module.in_proj_weight.detach().numpy()
    np.testing.assert_array_equal(packed, np.concatenate([params["W_q"].T, params["W_k"].T,
                                                          params["W_v"].T]))
    np.testing.assert_array_equal(module.in_proj_bias.detach().numpy(),
                                  np.concatenate([params["b_q"], params["b_k"], params["b_v"]]))
    np.testing.assert_array_equal(module.out_proj.weight.detach().numpy(), params["W_o"].T)


def test_separate_projection_weights_when_kdim_vdim_differ(rng):
    params = _params(rng, kdim=6, vdim=4)
    module = itorch.params_to_torch_mha(params, 2)
    assert module.in_proj_weight is None
    np.testing.assert_array_equal(module.k_proj_weight.detach().numpy(), params["W_k"].T)
    np.testing.assert_array_equal(module.v_proj_weight.detach().numpy(), params["W_v"].T)


@pytest.mark.parametrize("layout", LAYOUTS, ids=["packed", "separate", "packed-nobias",
                                                 "separate-nobias"])
def test_converted_module_matches_mha_forward_and_backward(rng, layout):
    params = _params(rng, **layout)
    query = rng.standard_normal((2, 5, 8))
    key = rng.standard_normal((2, 7, layout.get("kdim", 8)))
    value = rng.standard_normal((2, 7, layout.get("vdim", 8)))
    out, cache = an.mha_forward(query, key, value, params, num_heads=2)
    dout = rng.standard_normal(out.shape)
    dquery, dkey, dvalue, grads = an.mha_backward(dout, cache)
    t_out, _, t_inputs, t_grads = itorch.mha_forward_backward(itorch.params_to_torch_mha(params, 2),
                                                              query, key, value, dout)
    assert max_abs_diff(t_out, out) < 1e-12
    for got, want in zip(t_inputs, (dquery, dkey, dvalue), strict=True):
        assert max_abs_diff(got, want) < 1e-12
    for name in grads:
        assert max_abs_diff(t_grads[name], grads[name]) < 1e-12, name


def test_params_to_torch_refuses_head_width_other_than_d_model_over_h(rng):
    params = an.init_mha_params(8, 2, d_k=6, d_v=6, rng=rng)
    with pytest.raises(ValueError, match=r"W_q.*12 output columns.*embed_dim = 8"):
        itorch.params_to_torch_mha(params, 2)


def test_params_to_torch_refuses_some_biases_only(rng):
    params = _params(rng)
    del params["b_o"]
    with pytest.raises(ValueError, match="all of"):
        itorch.params_to_torch_mha(params, 2)


def test_params_from_torch_reads_add_bias_kv_and_mha_forward_refuses_them():
    """add_bias_kv's (1, 1, E) biases read as bias_k, bias_v (E,) and written back; they are
    core.extra_kv's parameters, not mha_forward's (an unknown key there)."""
    module = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
    params, h = itorch.params_from_torch_mha(module)
    assert params["bias_k"].shape == params["bias_v"].shape == (8,)
    np.testing.assert_array_equal(params["bias_k"], module.bias_k.detach().numpy().reshape(-1))
    other = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
    itorch.params_to_torch_mha(params, h, module=other)
    assert torch.equal(other.bias_v, module.bias_v)
    with pytest.raises(ValueError, match="unknown keys"):
        an.mha_forward(np.zeros((1, 2, 8), np.float32), np.zeros((1, 2, 8), np.float32),
                       np.zeros((1, 2, 8), np.float32), params, num_heads=2)


def _diff_with_masks(rng, params, torch_masks, L=4, S=6):
    """Run torch MHA with torch's masks and ours with their conversion; max output diff."""
    query, key = rng.standard_normal((2, L, 8)), rng.standard_normal((2, S, 8))
    mask, bias = itorch.masks_from_torch_mha(**torch_masks, num_heads=2)
    out, _ = an.mha_forward(query, key, key, params, num_heads=2, mask=mask, bias=bias)
    module = itorch.params_to_torch_mha(params, 2)
    t_out, _ = module(torch.from_numpy(query), torch.from_numpy(key), torch.from_numpy(key),
                      **{n: torch.as_tensor(m) for n, m in torch_masks.items()})
    return max_abs_diff(t_out.detach(), out)


def test_bool_key_padding_mask_true_means_blocked(rng):
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 4:] = True
    assert _diff_with_masks(rng, _params(rng), {"key_padding_mask": kpm}) < 1e-12
    mask, bias = itorch.masks_from_torch_mha(kpm, num_heads=2)
    assert mask.shape == (2, 1, 1, 6) and bias is None and not mask[1, 0, 0, 4:].any()


def test_float_masks_become_bias_and_their_neg_inf_a_mask(rng):
    kpm = rng.standard_normal((2, 6))
    kpm[0, 5] = -np.inf
    attn = rng.standard_normal((4, 6))
    diff = _diff_with_masks(rng, _params(rng), {"key_padding_mask": kpm, "attn_mask": attn})
    assert diff < 1e-12
    mask, bias = itorch.masks_from_torch_mha(kpm, attn, num_heads=2)
    assert not mask[0, 0, 0, 5] and np.isfinite(bias).all()


def test_per_head_attn_mask_of_shape_n_times_h(rng):
    blocked = rng.random((2 * 2, 4, 6)) < 0.4
    blocked[..., 0] = False
    assert _diff_with_masks(rng, _params(rng), {"attn_mask": blocked}) < 1e-12
    mask, _ = itorch.masks_from_torch_mha(attn_mask=blocked, num_heads=2)
    np.testing.assert_array_equal(mask[1, 0], ~blocked[2])   # batch 1, head 0 is row 1*h + 0


@pytest.mark.parametrize("shape", [(4, 6), (2, 1, 1, 6), (2, 2, 4, 6)])
def test_masks_to_torch_mha_inverts_masks_from_torch_mha(rng, shape):
    mask = rng.random(shape) < 0.5
    kwargs = itorch.masks_to_torch_mha(mask, num_heads=2, batch_size=2)
    if shape == (2, 1, 1, 6):
        assert set(kwargs) == {"key_padding_mask"}
    back, bias = itorch.masks_from_torch_mha(**kwargs, num_heads=2)
    assert bias is None
    np.testing.assert_array_equal(np.broadcast_to(back, (2, 2, 4, 6)),
                                  np.broadcast_to(mask, (2, 2, 4, 6)))


@pytest.mark.parametrize("shape", [(1, 1, 1, 6), (1, 2, 4, 6), (2, 4, 6), (1, 1, 4, 6)])
def test_masks_to_torch_mha_broadcasts_a_batch_of_one_to_batch_size(rng, shape):
    params = _params(rng)
    query, key = rng.standard_normal((3, 4, 8)), rng.standard_normal((3, 6, 8))
    mask = rng.random(shape) < 0.6
    mask[..., 0] = True                                    # no fully masked row
    out, _ = an.mha_forward(query, key, key, params, num_heads=2, mask=mask)
    kwargs = itorch.masks_to_torch_mha(mask, num_heads=2, batch_size=3)
    module = itorch.params_to_torch_mha(params, 2)
    t_out, _ = module(*(torch.from_numpy(a) for a in (query, key, key)), **kwargs)
    assert max_abs_diff(t_out.detach(), out) < 1e-12


@pytest.mark.parametrize("shape", [(1, 1, 1, 6), (1, 2, 4, 6), (2, 4, 6)])
def test_masks_to_torch_mha_asks_for_batch_size_when_torch_needs_the_batch_axis(shape):
    with pytest.raises(ValueError, match="pass batch_size"):
        itorch.masks_to_torch_mha(np.ones(shape, dtype=bool), num_heads=2)


def test_masks_to_torch_mha_refuses_a_batch_other_than_batch_size():
    with pytest.raises(ValueError, match="not batch_size=3"):
        itorch.masks_to_torch_mha(np.ones((2, 1, 1, 6), dtype=bool), num_heads=2, batch_size=3)


SDPA_CASES = {
    "mask": dict(mask=True),
    "bias": dict(bias=True),
    "mask+bias": dict(mask=True, bias=True),
    "causal": dict(is_causal=True),
    "causal+mask": dict(is_causal=True, mask=True),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("case", SDPA_CASES.values(), ids=SDPA_CASES.keys())
def test_to_torch_sdpa_matches_sdpa_forward_and_backward(rng, case):
    q, k, v = rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 7, 4)), \
        rng.standard_normal((2, 2, 7, 3))
    mask = rng.random((2, 1, 5, 7)) < 0.6 if case.get("mask") else None
    if mask is not None:
        mask[..., 0] = True
    bias = rng.standard_normal((5, 7)) if case.get("bias") else None
    kw = dict(bias=bias, is_causal=case.get("is_causal", False), scale=case.get("scale"))
    out, cache = an.sdpa_forward(q, k, v, mask, **kw)
    dout = rng.standard_normal(out.shape)
    grads = an.sdpa_backward(dout, cache)
    targs = itorch.to_torch_sdpa(q, k, v, mask, **kw)
    leaves = [targs[n].requires_grad_() for n in ("query", "key", "value")]
    t_out = F.scaled_dot_product_attention(**targs)
    t_out.backward(torch.from_numpy(dout))
    assert max_abs_diff(t_out.detach(), out) < 1e-12
    for leaf, g in zip(leaves, grads, strict=True):
        assert max_abs_diff(leaf.grad, g) < 1e-12


def test_from_torch_sdpa_reads_bool_float_and_causal_bias_masks(rng):
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    kw = itorch.from_torch_sdpa(causal_lower_right(3, 5))
    np.testing.assert_array_equal(kw["mask"], an.causal_mask(3, 5, align="bottom_right"))
    kw = itorch.from_torch_sdpa(causal_upper_left(3, 5))
    np.testing.assert_array_equal(kw["mask"], an.causal_mask(3, 5))
    blocked = torch.tensor([[0.0, -np.inf], [0.5, 0.25]])
    kw = itorch.from_torch_sdpa(blocked, scale=0.5)
    np.testing.assert_array_equal(kw["mask"], [[True, False], [True, True]])
    np.testing.assert_array_equal(kw["bias"], [[0.0, 0.0], [0.5, 0.25]])
    assert kw["scale"] == 0.5 and kw["is_causal"] is False


def test_to_torch_sdpa_passes_enable_gqa_through(rng):
    q, k, v = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, 2, 6, 3)), \
        rng.standard_normal((2, 2, 6, 3))
    out, cache = an.sdpa_forward(q, k, v, spec=an.AttentionSpec(enable_gqa=True))
    dout = rng.standard_normal(out.shape)
    dq, dk, dv = an.sdpa_backward(dout, cache)
    targs = itorch.to_torch_sdpa(q, k, v, enable_gqa=True)
    leaves = [targs[n].requires_grad_() for n in ("query", "key", "value")]
    t_out = F.scaled_dot_product_attention(**targs)
    t_out.backward(torch.from_numpy(dout))
    assert max_abs_diff(t_out.detach(), out) < 1e-12
    for leaf, g in zip(leaves, (dq, dk, dv), strict=True):
        assert max_abs_diff(leaf.grad, g) < 1e-12


# ---------------------------------------------------------------- compare_mha

def test_compare_mha_agrees_on_a_float64_module_in_two_lines():
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    report = compare_mha(module, torch.randn(2, 5, 8, dtype=torch.float64))
    assert report.ok, str(report)
    names = [c.name for c in report.checks]
    assert names[:5] == ["out", "weights", "dquery", "dkey", "dvalue"] and "dW_o" in names
    assert all(c.tol == pytest.approx(1e-10 * max(1, c.size)) for c in report.checks)
    assert "AGREE" in str(report)


def test_compare_mha_float32_cross_attention_sequence_first_with_padding():
    torch.manual_seed(1)
    module = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=4, dropout=0.1)   # (L, N, E) layout
    kpm = torch.zeros(2, 7, dtype=torch.bool)
    kpm[1, 5:] = True
    grads_before = [p.grad for p in module.parameters()]
    report = compare_mha(module, torch.randn(5, 2, 8), torch.randn(7, 2, 6), torch.randn(7, 2, 4),
                         key_padding_mask=kpm, average_attn_weights=False)
    assert report.ok, str(report)
    assert any(c.name == "ours dW_k" for c in report.checks)       # ours judged in turn
    assert module.training and [p.grad for p in module.parameters()] == grads_before
    assert any("dropout" in n for n in report.notes)


def test_compare_mha_reports_a_module_that_computes_something_else():
    class Drifting(torch.nn.MultiheadAttention):
        def forward(self, *args, **kwargs):
            out, weights = super().forward(*args, **kwargs)
            return out * (1 + 1e-7), weights

    torch.manual_seed(2)
    module = Drifting(8, 2, batch_first=True, dtype=torch.float64)
    report = compare_mha(module, torch.randn(2, 5, 8, dtype=torch.float64))
    failed = {c.name for c in report.checks if not c.ok}
    assert not report.ok and "out" in failed and "weights" not in failed
    assert "MISMATCH" in str(report)


def test_compare_mha_explains_fully_masked_rows_as_known_difference():
    torch.manual_seed(3)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    attn_mask = torch.zeros(5, 5, dtype=torch.bool)
    attn_mask[2] = True                                    # query 2 may attend to nothing
    report = compare_mha(module, torch.randn(2, 5, 8, dtype=torch.float64), attn_mask=attn_mask)
    assert not report.ok                                   # torch gives NaN there, we give 0
    assert np.isnan(next(c.err for c in report.checks if c.name == "out"))
    assert any("4 (batch, head, query) row(s)" in n and "NaN" in n for n in report.notes)


def test_torch_mha_fully_masked_row_spreads_nan_into_the_gradients(rng):
    params = _params(rng)
    x, dout = rng.standard_normal((2, 2, 5, 8))
    blocked = np.zeros((5, 5), dtype=bool)
    blocked[2] = True                                      # query 2 may attend to nothing
    out, weights, (dquery, dkey, dvalue), grads = itorch.mha_forward_backward(
        itorch.params_to_torch_mha(params, 2), x, x, x, dout, attn_mask=torch.from_numpy(blocked))
    row_is_nan = np.array([False, False, True, False, False])
    for a in (out, weights, dquery):                       # NaN in query 2's row only
        np.testing.assert_array_equal(np.isnan(a).any(axis=-1), np.broadcast_to(row_is_nan, (2, 5)))
        assert not np.isnan(a[:, ~row_is_nan]).any()
    assert np.isnan(dkey).all() and np.isnan(dvalue).all()   # every key and value row
    assert all(np.isnan(g).all() for n, g in grads.items() if n != "b_o")
    assert np.isfinite(grads["b_o"]).all()                 # out_proj.bias: the sum of dout


def test_compare_mha_counts_fully_padded_sequences_as_masked_rows():
    torch.manual_seed(5)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    kpm = torch.zeros(3, 4, dtype=torch.bool)
    kpm[1] = True                                          # sequence 1 is all padding
    report = compare_mha(module, torch.randn(3, 4, 8, dtype=torch.float64), key_padding_mask=kpm)
    assert any("8 (batch, head, query) row(s)" in n for n in report.notes)   # 2 heads x 4 queries


def test_compare_mha_refuses_other_modules():
    with pytest.raises(TypeError, match="MultiheadAttention"):
        compare_mha(torch.nn.Linear(2, 2), np.zeros((1, 2)))


def test_torch_mha_is_causal_hint_replaces_attn_mask_when_weights_are_not_needed(rng):
    params = _params(rng)
    x = rng.standard_normal((2, 5, 8))
    block_key_0 = np.ones((5, 5), dtype=bool)
    block_key_0[:, 0] = False                      # a mask that is not causal
    with_mask, _ = an.mha_forward(x, x, x, params, num_heads=2, mask=block_key_0)
    causal, _ = an.mha_forward(x, x, x, params, num_heads=2, mask=an.causal_mask(5))
    module = itorch.params_to_torch_mha(params, 2)
    xt = torch.from_numpy(x)
    kw = itorch.masks_to_torch_mha(block_key_0, num_heads=2)
    fast, _ = module(xt, xt, xt, is_causal=True, need_weights=False, **kw)
    slow, _ = module(xt, xt, xt, is_causal=True, need_weights=True, **kw)
    assert max_abs_diff(fast.detach(), causal) < 1e-12          # attn_mask ignored
    assert max_abs_diff(slow.detach(), with_mask) < 1e-12       # attn_mask used
    assert max_abs_diff(causal, with_mask) > 1e-2               # and the two differ


def test_compare_mha_notes_is_causal_only_when_attn_mask_is_not_causal():
    torch.manual_seed(4)
    module = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)     # (L, N, E)
    x = torch.randn(5, 1, 8, dtype=torch.float64)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)          # True = blocked
    report = compare_mha(module, x, attn_mask=causal, is_causal=True, need_weights=False)
    assert report.ok and not report.notes
    other = torch.zeros(5, 5, dtype=torch.bool)
    other[:, 0] = True
    report = compare_mha(module, x, attn_mask=other, is_causal=True, need_weights=False)
    assert not report.ok and any("ignores this attn_mask" in n for n in report.notes)


def test_compare_mha_takes_torchs_float_causal_mask_as_causal():
    torch.manual_seed(6)
    module = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)     # (L, N, E)
    x = torch.randn(5, 1, 8, dtype=torch.float64)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)  # 0 / -inf
    report = compare_mha(module, x, attn_mask=causal, is_causal=True, need_weights=False)
    assert report.ok and not report.notes, str(report)


def test_torch_sdpa_backends_disagree_on_mask_with_is_causal_so_we_fold_it(rng):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k = torch.from_numpy(rng.standard_normal((2, 1, 1, 4, 8)))
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[:, 1] = False
    default = F.scaled_dot_product_attention(q, k, k, attn_mask=mask, is_causal=True)
    folded = F.scaled_dot_product_attention(**itorch.to_torch_sdpa(q.numpy(), k.numpy(), k.numpy(),
                                                                   mask.numpy(), is_causal=True))
    assert max_abs_diff(default, folded) < 1e-15                  # the default backend ANDs them
    with sdpa_kernel(SDPBackend.MATH), pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=mask, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):                             # the folded call runs anywhere
        F.scaled_dot_product_attention(**itorch.to_torch_sdpa(q.numpy(), k.numpy(), k.numpy(),
                                                              mask.numpy(), is_causal=True))


# ---- compare_mha checks its inputs before torch runs, and says when it casts ----

def _module64():
    torch = require("torch")
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(8, 2, batch_first=True).double()


@pytest.mark.parametrize("bad, exc, names", [
    (lambda x: x.astype(np.int64), TypeError, "query must be a floating-point array, got dtype int64"),
    (lambda x: x > 0, TypeError, "query must be a floating-point array, got dtype bool"),
    (lambda x: x[..., :7], ValueError, "query must be (L, 8) or (N, L, E)"),
    (lambda x: x[0, 0], ValueError, "got shape (8,)"),
])
def test_compare_mha_refuses_bad_input_by_name_before_torch_runs(bad, exc, names):
    module = _module64()
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    with pytest.raises(exc) as info:
        compare_mha(module, bad(x))
    assert names in str(info.value)


def test_compare_mha_refuses_key_and_value_that_disagree():
    module = _module64()
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    with pytest.raises(ValueError, match="key and value must agree"):
        compare_mha(module, x, x, x[:, :2])
    with pytest.raises(ValueError, match="query has batch 2 but key has batch 1"):
        compare_mha(module, x, x[:1])


def test_compare_mha_says_when_it_casts_to_the_modules_dtype():
    module = _module64()
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    assert not compare_mha(module, x).notes
    report = compare_mha(module, x.astype(np.float32))
    assert "query float32 cast to the module's float64 before both ran" in report.notes


@pytest.mark.parametrize("kw, exc, names", [
    (dict(key_padding_mask=np.ones((5, 5), bool)), ValueError,
     "key_padding_mask must have shape (2, 3) for these inputs"),
    (dict(key_padding_mask=np.ones((2, 3), int)), TypeError, "key_padding_mask must be bool"),
    (dict(attn_mask=np.ones((4, 4), bool)), ValueError, "attn_mask must have shape (3, 3) or (4, 3, 3)"),
    (dict(attn_mask=np.ones((3, 3, 3), bool)), ValueError, "attn_mask must have shape"),
    (dict(is_causal="no"), TypeError, "is_causal must be True or False"),
    (dict(is_causal=True), ValueError, "is_causal=True needs attn_mask"),
    (dict(need_weights=1), TypeError, "need_weights must be True or False"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed=1.5), TypeError, "seed"), (dict(seed=True), TypeError, "seed"),
    (dict(static_k=np.ones((3, 3))), ValueError, "static_k must be (N*num_heads, S, head_dim) = (4, S, 4)"),
    (dict(static_k=np.ones((4, 3, 4), int)), TypeError, "static_k must be a floating-point array"),
])
def test_compare_mha_checks_masks_flags_and_static_heads_before_torch_runs(kw, exc, names):
    module = _module64()
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    with pytest.raises(exc) as info:
        compare_mha(module, x, **kw)
    assert names in str(info.value)


def test_compare_mha_takes_numpy_masks():
    """A NumPy mask was a TypeError from inside torch; it is now converted (bool as torch's
    True = blocked, float in the module's dtype)."""
    module = _module64()
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    kpm = np.array([[False, False, True], [False, False, False]])
    report = compare_mha(module, x, key_padding_mask=kpm)
    assert report.ok, str(report)
    float_mask = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0.0).astype(np.float32)
    report = compare_mha(module, x, attn_mask=float_mask)
    assert report.ok, str(report)
