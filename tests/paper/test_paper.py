"""attention_np.paper, §3.2 alone: softmax, masks, projections, heads, Eq. (1), params, gradcheck.

Each backward against central finite differences (float64, random upstream gradients); Eq. (1)
against torch.nn.functional.scaled_dot_product_attention (float64 to ~1e-12, float32 to the
project's rule) and against the fast path ``attention_np.sdpa_forward`` (float64 rounding).
The multi-head layer is in tests/paper/test_paper_multihead.py.
"""

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_np as an
from attention_np import paper
from attention_np.compose.mha_params import init_mha_params as core_init_mha_params
from tests import torch_ref
from tests.helpers import assert_float32_within_framework, max_abs_diff, randn

PAPER = Path(paper.__file__).parent


def check(forward, backward, inputs, **kw):
    result = paper.gradcheck(forward, backward, inputs, **kw)
    assert result.ok, str(result)
    return result


# ---------------------------------------------------------------------------------------- layering

def test_paper_imports_numpy_and_itself_only():
    allowed = {"__future__", "numpy", "dataclasses", "inspect"}
    for path in PAPER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed or name.startswith("attention_np.paper"), \
                    f"{path.name} imports {name}"


def test_no_paper_function_has_more_than_eight_parameters():
    # init_mha_params has the nine of API.md's contract (d_model, num_heads and seven options)
    for path in PAPER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                limit = 9 if node.name == "init_mha_params" else 8
                assert n <= limit, f"{path.name}:{node.name} has {n} parameters"


# ----------------------------------------------------------------------------------------- softmax

def test_softmax_is_exp_over_its_sum_and_survives_huge_scores(rng):
    x = randn(rng, 3, 5)
    want = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    np.testing.assert_allclose(paper.softmax(x), want, rtol=1e-14)
    np.testing.assert_allclose(paper.softmax(x, axis=0), (np.exp(x) / np.exp(x).sum(0)), rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = paper.softmax(np.array([1e5, 1e5 - 1.0, -1e5]))
    np.testing.assert_allclose(p, [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0.0], rtol=1e-14)


def test_softmax_where_gives_zero_and_a_slice_with_nothing_allowed_is_all_zero(rng):
    x = randn(rng, 3, 4)
    where = np.array([[True, False, True, True], [False] * 4, [True] * 4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = paper.softmax(x, where=where)
    assert np.all(p[~where] == 0) and np.all(p[1] == 0)
    np.testing.assert_allclose(p[0, [0, 2, 3]], paper.softmax(x[0, [0, 2, 3]]), rtol=1e-15)
    np.testing.assert_allclose(p[2], paper.softmax(x[2]), rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_keeps_dtype(rng, dtype):
    x = randn(rng, 2, 3, dtype=dtype)
    assert paper.softmax(x, where=x > 0).dtype == dtype
    assert paper.softmax_backward(x, paper.softmax(x)).dtype == dtype


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_backward_matches_finite_differences_and_the_jacobian(rng, axis):
    x = randn(rng, 4, 3)
    check(lambda x: paper.softmax(x, axis),
          lambda dp, _: paper.softmax_backward(dp, paper.softmax(x, axis), axis), (x,))
    p, dp = paper.softmax(x[:, 0]), randn(rng, 4)
    jacobian = np.diag(p) - np.outer(p, p)                    # dp_i / dx_j, symmetric
    np.testing.assert_allclose(paper.softmax_backward(dp, p), jacobian @ dp, rtol=1e-13, atol=1e-15)


def test_softmax_bad_inputs_are_named():
    with pytest.raises(TypeError, match="x must be a floating-point array, got dtype int64"):
        paper.softmax(np.arange(3))
    with pytest.raises(TypeError, match="where must be a bool array"):
        paper.softmax(np.zeros(3), where=np.ones(3))
    with pytest.raises(ValueError, match=r"where of shape \(2,\) does not broadcast to x of shape \(3,\)"):
        paper.softmax(np.zeros(3), where=np.ones(2, bool))
    with pytest.raises(ValueError, match="axis must be an int in"):
        paper.softmax(np.zeros(3), axis=1)
    with pytest.raises(ValueError, match=r"dp has shape \(2,\) but p has shape \(3,\)"):
        paper.softmax_backward(np.zeros(2), np.zeros(3))


# ------------------------------------------------------------------------------------------- masks

@pytest.mark.parametrize("L, S", [(3, 3), (2, 5), (5, 2), (0, 3)])
def test_causal_mask_both_alignments_by_definition(L, S):
    i, j = np.meshgrid(np.arange(L), np.arange(S), indexing="ij")
    np.testing.assert_array_equal(paper.causal_mask(L, S), j <= i)
    np.testing.assert_array_equal(paper.causal_mask(L, S, align="bottom_right"), j <= i + S - L)
    assert paper.causal_mask(L, S).shape == (L, S) and paper.causal_mask(L, S).dtype == bool
    with pytest.raises(ValueError, match="align must be one of"):
        paper.causal_mask(L, S, align="top-left")


def test_padding_mask_marks_real_keys_and_has_shape_b_1_s():
    m = paper.padding_mask(np.array([3, 0, 1]), 4)
    assert m.shape == (3, 1, 4)
    np.testing.assert_array_equal(m[:, 0].astype(int), [[1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
    assert paper.padding_mask([2, 1]).shape == (2, 1, 2)
    with pytest.raises(ValueError, match="lengths has a sequence of length 3 but S=2"):
        paper.padding_mask([3], 2)
    with pytest.raises(ValueError, match="lengths must be a 1-D int array"):
        paper.padding_mask([1.5])


def test_mask_from_blocked_flips_torch_polarity():
    np.testing.assert_array_equal(paper.mask_from_blocked(np.array([True, False])), [False, True])


# ---------------------------------------------------------------------------- projections and heads

@pytest.mark.parametrize("bias", [True, False])
def test_linear_backward_matches_finite_differences(rng, bias):
    x, W, b = randn(rng, 2, 3, 4), randn(rng, 4, 5), randn(rng, 5)
    np.testing.assert_allclose(paper.linear_forward(x, W, b if bias else None),
                               np.einsum("bli,io->blo", x, W) + (b if bias else 0), rtol=1e-13)

    def backward(dy, _):
        dx, dW, db = paper.linear_backward(dy, x, W, bias)
        return (dx, dW, db) if bias else (dx, dW)

    if bias:
        check(lambda x, W, b: paper.linear_forward(x, W, b), backward, (x, W, b))
    else:
        check(lambda x, W: paper.linear_forward(x, W), backward, (x, W))
        assert paper.linear_backward(randn(rng, 2, 3, 5), x, W, False)[2] is None


def test_linear_bad_shapes_are_named(rng):
    with pytest.raises(ValueError, match=r"W must have shape \(d_in, d_out\) = \(4, d_out\)"):
        paper.linear_forward(randn(rng, 3, 4), randn(rng, 5, 2))
    with pytest.raises(TypeError, match="x, W must share one dtype: x is float32; W is float64"):
        paper.linear_forward(randn(rng, 3, 4, dtype=np.float32), randn(rng, 4, 2))


def test_head_i_is_feature_columns_i_d_and_merge_is_split_s_adjoint(rng):
    x = randn(rng, 2, 5, 12)
    heads = paper.split_heads(x, 3)                                # (2, 3, 5, 4)
    assert heads.shape == (2, 3, 5, 4)
    for i in range(3):
        np.testing.assert_array_equal(heads[:, i], x[..., 4 * i:4 * (i + 1)])
    np.testing.assert_array_equal(paper.merge_heads(heads), x)
    g = randn(rng, 2, 3, 5, 4)                                     # <split(x), g> = <x, merge(g)>
    np.testing.assert_allclose(np.sum(heads * g), np.sum(x * paper.merge_heads(g)), rtol=1e-13)
    with pytest.raises(ValueError, match="x has 12 features, not divisible by num_heads=5"):
        paper.split_heads(x, 5)


# ------------------------------------------------------------------------------------------ Eq. (1)

CASES = {  # name: (q shape, k shape, v shape, mask shape or None, is_causal)
    "plain": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 3), None, False),
    "mask_per_sequence": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 3), (2, 1, 1, 6), False),
    "mask_every_head": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 3), (2, 3, 4, 6), False),
    "causal_and_mask": ((2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 2), (5, 5), True),
    "causal_L_ne_S": ((2, 4, 3), (2, 6, 3), (2, 6, 4), None, True),
    "unbatched": ((4, 3), (5, 3), (5, 2), (4, 5), False),
}


def torch_sdpa(q, k, v, dout, mask, is_causal):
    """torch refuses attn_mask with is_causal=True: the causal mask is ANDed in here instead."""
    if mask is not None and is_causal:
        mask, is_causal = mask & paper.causal_mask(q.shape[-2], k.shape[-2]), False
    return torch_ref.sdpa(q, k, v, dout, mask=mask, is_causal=is_causal)


def make_case(rng, name):
    qs, ks, vs, ms, is_causal = CASES[name]
    mask = None
    if ms is not None:
        mask = rng.random(ms) < 0.7
        mask[..., 0] = True                    # every row keeps a key (torch gives NaN otherwise)
    return randn(rng, *qs), randn(rng, *ks), randn(rng, *vs), mask, is_causal


@pytest.mark.parametrize("name", sorted(CASES))
def test_sdpa_matches_torch_in_float64(rng, name):
    q, k, v, mask, is_causal = make_case(rng, name)
    out, cache = paper.sdpa_forward(q, k, v, mask, is_causal=is_causal)
    dout = randn(rng, *out.shape)
    want = torch_sdpa(q, k, v, dout, mask, is_causal)
    for label, ours, theirs in zip(("out", "dq", "dk", "dv"), (out, *paper.sdpa_backward(dout, cache)),
                                   want, strict=True):
        assert ours.shape == theirs.shape, label
        np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-12, err_msg=label)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sdpa_equals_the_fast_path_to_float64_rounding(rng, name):
    q, k, v, mask, is_causal = make_case(rng, name)
    out, cache = paper.sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=0.3)
    fast_out, fast_cache = an.sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=0.3)
    dout = randn(rng, *out.shape)
    ours = (out, cache.weights, *paper.sdpa_backward(dout, cache))
    fast = (fast_out, fast_cache.weights, *an.sdpa_backward(dout, fast_cache))
    for label, a, b in zip(("out", "weights", "dq", "dk", "dv"), ours, fast, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, label
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14, err_msg=label)


@pytest.mark.parametrize("name", ["plain", "causal_and_mask", "causal_L_ne_S"])
def test_sdpa_backward_matches_finite_differences(rng, name):
    q, k, v, mask, is_causal = make_case(rng, name)
    q, k, v = q[..., :3, :], k, v                          # few queries: few central differences
    mask = None if mask is None else mask[..., :3, :]
    check(lambda q, k, v: paper.sdpa_forward(q, k, v, mask, is_causal=is_causal), paper.sdpa_backward,
          (q, k, v), seed=1)


def test_broadcast_batch_dims_are_summed_back_to_each_input(rng):
    q, k, v = randn(rng, 2, 1, 3, 4), randn(rng, 1, 3, 5, 4), randn(rng, 5, 2)
    mask = rng.random((3, 1, 5)) < 0.8
    mask[..., 0] = True
    out, cache = paper.sdpa_forward(q, k, v, mask)
    assert out.shape == (2, 3, 3, 2)
    grads = paper.sdpa_backward(randn(rng, *out.shape), cache)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    check(lambda q, k, v: paper.sdpa_forward(q, k, v, mask), paper.sdpa_backward, (q, k, v))


def test_fully_masked_row_gives_zero_output_weights_and_gradients(rng):
    q, k, v = randn(rng, 2, 4, 3), randn(rng, 2, 5, 3), randn(rng, 2, 5, 2)
    mask = rng.random((2, 4, 5)) < 0.6
    mask[0, 1] = False                                     # query 1 of sequence 0 attends nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = paper.sdpa_forward(q, k, v, mask)
        dq, dk, dv = paper.sdpa_backward(randn(rng, *out.shape), cache)
    assert np.all(out[0, 1] == 0) and np.all(cache.weights[0, 1] == 0) and np.all(dq[0, 1] == 0)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(dk)) and np.all(np.isfinite(dv))
    keys_nobody_sees = ~mask[1].any(axis=0)               # no gradient reaches a key nobody attends
    assert np.all(dk[1, keys_nobody_sees] == 0) and np.all(dv[1, keys_nobody_sees] == 0)


def test_nan_in_a_masked_value_is_not_isolated_here_as_the_docstring_says(rng):
    q, k, v = randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 3)
    mask = np.ones((3, 4), bool)
    mask[:, 2] = False
    v[2] = np.nan                                          # garbage in a key nobody attends
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                    # 0 * NaN may warn on some CPUs
        out, _ = paper.sdpa_forward(q, k, v, mask)
    assert np.isnan(out).any()                             # the paper assumes finite inputs
    assert np.isfinite(an.sdpa_forward(q, k, v, mask)[0]).all()   # the fast path isolates it


def test_scaled_dot_product_attention_returns_the_weights(rng):
    q, k, v = randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 5)
    out, weights = paper.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
    scores = q @ k.T
    scores[np.triu_indices(3, 1, 4)] = -np.inf
    want = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)   # Eq. (1) by hand, scale 1
    np.testing.assert_allclose(weights, want, rtol=1e-14)
    np.testing.assert_allclose(out, want @ v, rtol=1e-13)


@pytest.mark.float32
@pytest.mark.parametrize("name", ["mask_per_sequence", "causal_and_mask"])
def test_float32_in_float32_out_within_the_float32_rule(rng, name):
    q, k, v, mask, is_causal = make_case(rng, name)
    q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
    out, cache = paper.sdpa_forward(q32, k32, v32, mask, is_causal=is_causal)
    dout32 = randn(rng, *out.shape, dtype=np.float32)
    grads = paper.sdpa_backward(dout32, cache)
    assert out.dtype == cache.weights.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)
    out64, cache64 = paper.sdpa_forward(q32.astype(np.float64), k32.astype(np.float64),
                                        v32.astype(np.float64), mask, is_causal=is_causal)
    oracle = (out64, *paper.sdpa_backward(dout32.astype(np.float64), cache64))
    theirs = torch_sdpa(q32, k32, v32, dout32, mask, is_causal)
    for label, a, b, c in zip(("out", "dq", "dk", "dv"), (out, *grads), theirs, oracle, strict=True):
        assert_float32_within_framework(a, b, c, name=f"paper {name} {label}")


def test_sdpa_bad_inputs_are_named_before_any_work(rng):
    q, k, v = randn(rng, 2, 4, 4), randn(rng, 2, 5, 6), randn(rng, 2, 5, 3)
    with pytest.raises(ValueError, match=r"q has d_k=4 but k has d_k=6"):
        paper.sdpa_forward(q, k, v)
    with pytest.raises(ValueError, match=r"k has S=5 positions but v has S=3"):
        paper.sdpa_forward(q, randn(rng, 2, 5, 4), randn(rng, 2, 3, 3))
    with pytest.raises(TypeError, match="q must be a floating-point array, got dtype int64"):
        paper.sdpa_forward(np.ones((4, 4), int), k, v)
    with pytest.raises(TypeError, match="q, k, v must share one dtype: q is float32; k, v are float64"):
        paper.sdpa_forward(q.astype(np.float32), k[..., :4], v)
    with pytest.raises(TypeError, match="a float array is not a mask"):
        paper.sdpa_forward(q, k[..., :4], v, np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 4\) does not broadcast to scores"):
        paper.sdpa_forward(q, k[..., :4], v, np.ones((5, 4), bool))
    with pytest.raises(ValueError, match=r"batch dims do not broadcast: q \(2,\), k \(2,\), v \(2,\), "
                                         r"mask \(3,\)"):
        paper.sdpa_forward(q, k[..., :4], v, np.ones((3, 4, 5), bool))
    with pytest.raises(ValueError, match="scale must be finite"):
        paper.sdpa_forward(q, k[..., :4], v, scale=np.inf)
    out, cache = paper.sdpa_forward(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"dout has shape \(4, 3\) but out has shape \(2, 4, 3\)"):
        paper.sdpa_backward(out[0], cache)
    with pytest.raises(TypeError, match="dout has dtype float32 but out has dtype float64"):
        paper.sdpa_backward(out.astype(np.float32), cache)
    _, fast_cache = an.sdpa_forward(q, k[..., :4], v)
    with pytest.raises(TypeError, match=r"cache must be the AttentionCache returned by "
                                        r"attention_np.paper.sdpa_forward, got attention_np\..*SDPACache"):
        paper.sdpa_backward(out, fast_cache)


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 5), S=st.integers(1, 6), d=st.integers(1, 4), causal=st.booleans(),
       seed=st.integers(0, 2**16))
def test_sdpa_equals_fast_path_on_random_shapes(L, S, d, causal, seed):
    rng = np.random.default_rng(seed)
    q, k, v = randn(rng, 2, L, d), randn(rng, 2, S, d), randn(rng, 2, S, d + 1)
    mask = rng.random((2, 1, S)) < 0.7
    out, cache = paper.sdpa_forward(q, k, v, mask, is_causal=causal)
    fast, fast_cache = an.sdpa_forward(q, k, v, mask, is_causal=causal)
    dout = randn(rng, *out.shape)
    for a, b in zip((out, *paper.sdpa_backward(dout, cache)), (fast, *an.sdpa_backward(dout, fast_cache)),
                    strict=True):
        assert max_abs_diff(a, b) <= 1e-13


# ------------------------------------------------------------------------------------------ params

@pytest.mark.parametrize("kwargs", [{"bias": True}, {"bias": True, "d_k": 3, "d_v": 5, "kdim": 7, "vdim": 2},
                                    {"bias": False, "dtype": np.float32}])
def test_init_mha_params_draws_as_the_package_did(kwargs):
    ours, before = paper.init_mha_params(8, 2, rng=7, **kwargs), core_init_mha_params(8, 2, rng=7, **kwargs)
    assert list(ours) == list(before)
    for name in ours:
        assert ours[name].dtype == before[name].dtype
        np.testing.assert_array_equal(ours[name], before[name], err_msg=name)


def test_paper_params_have_no_biases_by_default_the_engineering_layer_keeps_torchs():
    # §3.2.2: Q W_i^Q, K W_i^K, V W_i^V, Concat(...) W^O, no biases; PyTorch's MHA has bias=True
    assert sorted(paper.init_mha_params(8, 2, rng=0)) == ["W_k", "W_o", "W_q", "W_v"]
    assert sorted(an.init_mha_params(8, 2, rng=0)) == ["W_k", "W_o", "W_q", "W_v",
                                                       "b_k", "b_o", "b_q", "b_v"]
    # the weights are the same draws either way: the switch adds zeros, nothing else
    with_b, without = paper.init_mha_params(8, 2, rng=3, bias=True), paper.init_mha_params(8, 2, rng=3)
    for name in without:
        np.testing.assert_array_equal(with_b[name], without[name], err_msg=name)


def test_init_mha_params_shapes_glorot_bound_and_errors():
    p = paper.init_mha_params(12, 3, d_k=2, d_v=5, kdim=7, vdim=4, bias=True, rng=np.random.default_rng(0))
    assert {n: a.shape for n, a in p.items()} == {
        "W_q": (12, 6), "W_k": (7, 6), "W_v": (4, 15), "W_o": (15, 12),
        "b_q": (6,), "b_k": (6,), "b_v": (15,), "b_o": (12,)}
    assert np.abs(p["W_o"]).max() <= np.sqrt(6 / (15 + 12))
    assert all(np.all(p[b] == 0) for b in p if b[0] == "b")
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3; pass d_k and d_v"):
        paper.init_mha_params(10, 3)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        paper.init_mha_params(4, 2, dtype=int)


# --------------------------------------------------------------------------------------- gradcheck

def test_gradcheck_catches_a_wrong_backward_and_names_the_input(rng):
    q, k, v = randn(rng, 3, 2), randn(rng, 4, 2), randn(rng, 4, 3)

    def no_scale_on_dq(dout, cache):                      # a classic bug: forgot "* scale" in dq
        dq, dk, dv = paper.sdpa_backward(dout, cache)
        return dq / cache.scale, dk, dv

    result = paper.gradcheck(paper.sdpa_forward, no_scale_on_dq, (q, k, v))
    assert not result.ok and result.failed == ["q"]
    assert "q: max abs error" in str(result) and "<-- FAILED" in str(result)


def test_gradcheck_reports_the_same_for_the_paper_and_the_fused_path(rng):
    q, k, v = randn(rng, 2, 3, 2), randn(rng, 2, 4, 2), randn(rng, 2, 4, 3)
    ours = paper.gradcheck(paper.sdpa_forward, paper.sdpa_backward, (q, k, v), seed=3)
    before = paper.gradcheck(an.sdpa_forward, an.sdpa_backward, (q, k, v), seed=3)
    assert ours.ok and list(ours.errors) == list(before.errors) == ["q", "k", "v"]
    assert str(ours).splitlines()[0] == str(before).splitlines()[0]
    for name in ours.errors:                              # the same numerical gradient, same analytic
        assert abs(ours.errors[name][1] - before.errors[name][1]) <= 1e-8   # forward rounding / eps
    with pytest.raises(TypeError, match="gradcheck needs float64 inputs.*input k is float32"):
        paper.gradcheck(paper.sdpa_forward, paper.sdpa_backward, (q, k.astype(np.float32), v))


def test_numerical_gradient_of_a_known_function(rng):
    x = randn(rng, 3, 2)
    np.testing.assert_allclose(paper.numerical_gradient(lambda: float(np.sum(np.sin(x))), x),
                               np.cos(x), atol=1e-9)
