"""attention_np.interop.flax: MultiHeadDotProductAttention kernels ⇄ our W_*, diffed against
mha_forward / mha_backward with jax.vjp (inputs and parameters) and random upstream gradients."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.interop import flax as iflax
from attention_np.interop import jax as ijax
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, mha_params, require, rounded

jax = require("jax")
require("flax")
jnp = jax.numpy


def _params(rng, d_model=8, h=2, kdim=None, vdim=None, bias=True, d_k=None):
    return mha_params(rng, d_model, h, kdim=kdim, vdim=vdim, bias=bias, d_k=d_k, d_v=d_k)


def test_kernels_hold_one_head_per_middle_index(rng):
    params = _params(rng, kdim=6, vdim=4)
    p = iflax.params_to_flax(params, 2)["params"]
    assert p["query"]["kernel"].shape == (8, 2, 4) and p["key"]["kernel"].shape == (6, 2, 4)
    assert p["value"]["kernel"].shape == (4, 2, 4) and p["out"]["kernel"].shape == (2, 4, 8)
    # head 1 is columns [4, 8) of W_q and rows [4, 8) of W_o
    np.testing.assert_array_equal(p["query"]["kernel"][:, 1, :], params["W_q"][:, 4:8])
    np.testing.assert_array_equal(p["out"]["kernel"][1], params["W_o"][4:8])
    np.testing.assert_array_equal(p["query"]["bias"][1], params["b_q"][4:8])


@pytest.mark.parametrize("bias", [True, False])
def test_params_roundtrip_through_flax_layout_is_exact(rng, bias):
    params = _params(rng, kdim=6, vdim=4, bias=bias)
    back, h = iflax.params_from_flax(iflax.params_to_flax(params, 2))
    assert h == 2 and set(back) == set(params)
    for name in params:
        np.testing.assert_array_equal(back[name], params[name])


@pytest.mark.parametrize("source", ["numpy", "jax"])
def test_params_read_from_flax_are_writeable_copies(rng, source):
    """``params_from_flax`` copies: of jax arrays (read-only through NumPy) a trainer could not
    update the params in place, and of NumPy variables every update would write into them."""
    params = _params(rng, kdim=6, vdim=4)
    variables = iflax.params_to_flax(params, 2)
    if source == "jax":
        variables = jax.tree_util.tree_map(jnp.asarray, variables)
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(variables)]
    back, _ = iflax.params_from_flax(variables)
    for name, a in back.items():
        assert a.flags.writeable, name
        assert not any(np.shares_memory(a, x) for x in leaves), name


def test_flax_refuses_different_query_and_value_head_widths_and_partial_biases(rng):
    params = an.init_mha_params(8, 2, d_k=4, d_v=3, rng=rng)
    with pytest.raises(ValueError, match="one head width"):
        iflax.params_to_flax(params, 2)
    params = _params(rng)
    del params["b_k"]
    with pytest.raises(ValueError, match="all four biases"):
        iflax.params_to_flax(params, 2)


def _flax_forward_backward(params, h, query, key, value, dout, mask=None):
    module, variables = iflax.flax_mha(params, h)
    return iflax.forward_backward(module, variables, query, key, value, dout, mask)


CASES = {
    "self": dict(),
    "cross kdim/vdim L!=S": dict(kdim=6, vdim=4, S=7),
    "padding mask": dict(S=7, mask="padding"),
    "causal mask": dict(mask="causal"),
    "no bias": dict(bias=False),
    "d_k=6": dict(d_k=6),
}


def _case_inputs(rng, case):
    L, S = 5, case.get("S", 5)
    params = _params(rng, kdim=case.get("kdim"), vdim=case.get("vdim"),
                     bias=case.get("bias", True), d_k=case.get("d_k"))
    query = rng.standard_normal((2, L, 8))
    key = rng.standard_normal((2, S, case.get("kdim", 8)))
    value = rng.standard_normal((2, S, case.get("vdim", 8)))
    mask = {"padding": an.padding_mask([S, S - 2])[:, None], "causal": an.causal_mask(L, S),
            None: None}[case.get("mask")]
    return params, query, key, value, mask


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_flax_module_matches_mha_forward_and_vjp_in_float64(rng, case):
    params, query, key, value, mask = _case_inputs(rng, case)
    out, cache = an.mha_forward(query, key, value, params, num_heads=2, mask=mask)
    dout = rng.standard_normal(out.shape)
    *dinputs, grads = an.mha_backward(dout, cache)
    with ijax.x64():   # float64 in Flax needs x64; its softmax then runs in float64 too
        f_out, f_dinputs, f_grads = _flax_forward_backward(params, 2, query, key, value, dout, mask)
    assert f_out.dtype == np.float64
    assert max_abs_diff(f_out, out) < 1e-12
    for got, want in zip(f_dinputs, dinputs, strict=True):
        assert max_abs_diff(got, want) < 1e-12
    assert set(f_grads) == set(grads)
    for name in grads:
        assert max_abs_diff(f_grads[name], grads[name]) < 1e-12, name


@pytest.mark.float32
def test_flax_module_matches_within_float32_error(rng):
    params, query, key, value, mask = _case_inputs(rng, CASES["cross kdim/vdim L!=S"])
    names = list(params)
    f32, f64 = rounded(*params.values(), query, key, value)
    params32, params64 = dict(zip(names, f32, strict=False)), dict(zip(names, f64, strict=False))
    x32, x64 = f32[len(names):], f64[len(names):]
    dout = rng.standard_normal((*query.shape[:-1], params["W_o"].shape[1])).astype(np.float32)
    # the float64 oracle: torch's nn.MultiheadAttention in float64 (independent of ours and flax)
    o = torch_ref.mha(*x64, params64, 2, dout.astype(np.float64))
    f_out, f_dinputs, f_grads = _flax_forward_backward(params32, 2, *x32, dout)
    out32, cache32 = an.mha_forward(*x32, params32, num_heads=2)
    *dinputs32, grads32 = an.mha_backward(dout, cache32)
    assert_float32_all(["out", "dq", "dk", "dv", *f_grads],
                       [out32, *dinputs32, *(grads32[n] for n in f_grads)],
                       [f_out, *f_dinputs, *f_grads.values()],
                       [o[0], *o[2:5], *(o[5][n] for n in f_grads)], framework="flax")


def test_fully_masked_row_gives_projected_mean_of_values_in_flax_and_b_o_here(rng):
    params = _params(rng)
    x = rng.standard_normal((1, 4, 8))
    mask = np.ones((4, 4), dtype=bool)
    mask[3] = False
    ours, _ = an.mha_forward(x, x, x, params, num_heads=2, mask=mask)
    with ijax.x64():
        module, variables = iflax.flax_mha(params, 2)
        theirs = np.asarray(module.apply(variables, x, x, x, mask=mask))
    expected = (x[0] @ params["W_v"] + params["b_v"]).mean(axis=0) @ params["W_o"] + params["b_o"]
    assert max_abs_diff(theirs[0, 3], expected) < 1e-12
    assert max_abs_diff(ours[0, 3], params["b_o"]) < 1e-15        # attention 0, then W_o, b_o
    assert max_abs_diff(theirs[0, :3], ours[0, :3]) < 1e-12


# ---------------------------------------------------------------- compare_flax_mha

def _flax_module_and_variables(rng, dtype=np.float32, **module_kwargs):
    import flax.linen as nn

    x = rng.standard_normal((2, 5, 8)).astype(dtype)
    kv = rng.standard_normal((2, 7, 6)).astype(dtype)
    with ijax.x64(dtype == np.float64):
        module = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8, dtype=dtype,
                                                 param_dtype=dtype, **module_kwargs)
        variables = module.init(jax.random.PRNGKey(0), x, kv)
    return module, variables, x, kv


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compare_flax_mha_agrees_on_a_cross_attention_module(rng, dtype):
    from attention_np.interop import compare_flax_mha

    module, variables, x, kv = _flax_module_and_variables(rng, dtype)
    report = compare_flax_mha(module, variables, x, kv)
    assert report.ok, str(report)
    assert report.dtype == np.dtype(dtype).name
    assert {"out", "dquery", "dkey", "dW_q", "db_o"} <= {c.name for c in report.checks}


def test_compare_flax_mha_reports_an_attention_fn_without_the_scale(rng):
    import flax.linen as nn

    from attention_np.interop import compare_flax_mha

    def unscaled(query, key, value, **kwargs):   # Eq. (1) without 1/sqrt(d_k)
        return nn.dot_product_attention(query * np.sqrt(query.shape[-1]), key, value, **kwargs)

    module, variables, x, kv = _flax_module_and_variables(rng, attention_fn=unscaled)
    report = compare_flax_mha(module, variables, x, kv)
    assert not report.ok and not next(c for c in report.checks if c.name == "out").ok


def test_compare_flax_mha_notes_fully_masked_rows(rng):
    from attention_np.interop import compare_flax_mha

    module, variables, x, kv = _flax_module_and_variables(rng)
    mask = np.ones((2, 1, 5, 7), dtype=bool)
    mask[0, :, 2] = False
    report = compare_flax_mha(module, variables, x, kv, mask=mask)
    assert not report.ok and any("2 (batch, head, query) row(s)" in n for n in report.notes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normalize_qk_is_a_bias_free_layer_norm_and_agrees_rms_norm_does_not(rng, dtype):
    """Flax's normalize_qk: LayerNorm over each head's d features, no bias, eps 1e-6, as
    AttentionSpec(qk_norm="layer"); the RMSNorm QK-norm (not mean-centred) is another
    function (its output differs by far more than rounding)."""
    import attention_np as an
    from attention_np.interop import compare_flax_mha
    from attention_np.interop import flax as iflax

    module, variables, x, kv = _flax_module_and_variables(rng, dtype, normalize_qk=True)
    p = jax.tree_util.tree_map(np.asarray, variables)["params"]
    for ln in ("query_ln", "key_ln"):                   # scales away from their init of 1
        p[ln]["scale"] = (1 + 0.5 * rng.standard_normal(p[ln]["scale"].shape)).astype(dtype)
    variables = {"params": p}
    report = compare_flax_mha(module, variables, x, kv)
    assert report.ok, str(report)
    assert {"dq_norm", "dk_norm"} <= {c.name for c in report.checks}
    params, h = iflax.params_from_flax(variables)
    with ijax.x64(dtype == np.float64):
        theirs = np.asarray(module.apply(variables, x, kv))
    p64 = {n: a.astype(np.float64) for n, a in params.items()}
    x64, kv64 = x.astype(np.float64), kv.astype(np.float64)
    rms = an.mha_forward(x64, kv64, kv64, p64, num_heads=h)[0]      # params' norms: RMSNorm
    assert np.abs(rms - theirs).max() > 1e-3


# ---- compare_flax_mha checks its inputs before Flax runs, and says when it casts ----

@pytest.mark.parametrize("which, bad, exc, names", [
    (0, lambda a: a.astype(np.int64), TypeError, "inputs_q must be a floating-point array, got dtype int64"),
    (0, lambda a: a > 0, TypeError, "inputs_q must be a floating-point array, got dtype bool"),
    (0, lambda a: "abc", TypeError, "inputs_q must be a floating-point array"),
    (0, lambda a: a[0, 0], ValueError, "inputs_q must be (..., L, 8)"),
    (0, lambda a: a[..., :7], ValueError, "inputs_q must be (..., L, 8)"),
    (1, lambda a: a[..., :5], ValueError, "inputs_k must be (..., S, 6)"),
    (1, lambda a: a[:1], ValueError, "must have the same batch dims"),
    (2, lambda a: a[:, :3], ValueError, "inputs_k has S=7 positions but inputs_v has S=3"),
])
def test_compare_flax_mha_refuses_bad_input_by_name_before_flax_runs(rng, which, bad, exc, names):
    from attention_np.interop import compare_flax_mha

    module, variables, x, kv = _flax_module_and_variables(rng)
    inputs = [x, kv, kv]
    inputs[which] = bad(inputs[which])
    with pytest.raises(exc) as info:
        compare_flax_mha(module, variables, *inputs)
    assert names in str(info.value)


@pytest.mark.parametrize("kw, exc, names", [
    (dict(mask=np.ones((5, 5), bool)), ValueError, "mask of shape (5, 5) does not broadcast to "
                                                   "(..., num_heads, L, S) = (2, 2, 5, 7)"),
    (dict(mask=np.ones((5, 7))), TypeError, "mask must be a bool array"),
    (dict(seed=-1), ValueError, "seed"),
])
def test_compare_flax_mha_checks_the_mask_and_the_seed(rng, kw, exc, names):
    from attention_np.interop import compare_flax_mha

    module, variables, x, kv = _flax_module_and_variables(rng)
    with pytest.raises(exc) as info:
        compare_flax_mha(module, variables, x, kv, **kw)
    assert names in str(info.value)


def test_compare_flax_mha_says_when_it_casts_to_the_variables_dtype(rng):
    from attention_np.interop import compare_flax_mha

    module, variables, x, kv = _flax_module_and_variables(rng)
    assert not compare_flax_mha(module, variables, x, kv).notes
    report = compare_flax_mha(module, variables, x.astype(np.float64), kv)
    assert report.ok, str(report)
    assert report.notes == ["inputs_q float64 cast to the module's float32 before both ran"]
