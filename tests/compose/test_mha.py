"""Multi-head attention, §3.2.2: parameters, forward against the paper's per-head formula, backward."""

import dataclasses
import re

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused
from tests import oracles
from tests.helpers import max_abs_diff, mha_params, randn


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


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def _mha_by_hand(x, params, h, mask=None, **sdpa_kw):
    """Self-attention of §3.2.2 step by step: project, split heads, fused Eq. (1), concat, W_o."""
    B, L, _ = x.shape

    def heads(W, b):                                    # (B, L, h*d) -> (B, h, L, d)
        return (x @ params[W] + params[b]).reshape(B, L, h, -1).transpose(0, 2, 1, 3)
    o, _ = fused.sdpa_forward(heads("W_q", "b_q"), heads("W_k", "b_k"), heads("W_v", "b_v"),
                              mask, **sdpa_kw)
    return o.transpose(0, 2, 1, 3).reshape(B, L, -1) @ params["W_o"] + params["b_o"]


def test_mha_cache_is_frozen(rng):
    """Kills ``frozen=True`` dropped from ``MHACache``: the backward reads it."""
    x = randn(rng, 3, 4)
    _, cache = an.mha_forward(x, x, x, an.init_mha_params(4, 2, rng=0), num_heads=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.concat = np.zeros_like(cache.concat)


def test_mha_takes_array_likes_and_names_each_bad_input(rng):
    """Kills the deleted ``as_float_array`` or ``check_min_ndim`` of ``query``, ``key`` or
    ``value`` in ``check_mha_inputs``: nested lists work as arrays; an int or 1-D input is
    refused by name."""
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


def test_mha_names_a_mask_that_does_not_fit_and_a_bad_dropout_p(rng):
    """Kills the deleted mask check of ``_drop_masked_inputs`` or ``check_dropout_p`` on the
    way to the kernel: the error names the argument (not NumPy's, not the path's)."""
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
    """Kills the deleted ``W_k`` width check for ``num_kv_heads`` (or ``d_k`` computed with
    ``/``: the message would say ``d_k=2.0``): h=2, H_kv=1, d_k=2 need W_k with 2 columns; the
    width of W_k decides the key heads, and 3 columns fit no number of them."""
    params = an.init_mha_params(4, 2, num_kv_heads=1, rng=0)
    params["W_k"], params["b_k"] = np.zeros((4, 3)), np.zeros(3)
    x = randn(rng, 3, 4)
    with pytest.raises(ValueError, match=r"params\['W_q'\] has 4 columns but params\['W_k'\] has 3"):
        an.mha_forward(x, x, x, params, num_heads=2)


@pytest.mark.parametrize("mask_ndim", [3, 4])
def test_mha_per_head_mask_over_a_batch_as_long_as_the_heads(rng, mask_ndim):
    """Kills ``m.ndim >= 3`` -> ``> 3`` and a deleted ``m.any(axis=-3)`` (which would line the
    head axis up with the batch): a per-head mask (h, L, S) (or (B, h, L, S)) over query (B, L,
    d_model) with B = h = 2, key 1 masked for head 0 only, so the inputs dropped before the
    projections must be those dead for *every* head. Oracle: the steps of §3.2.2 by hand."""
    B, h, L, d_model = 2, 2, 3, 4
    params = an.init_mha_params(d_model, h, rng=0)
    x = randn(rng, B, L, d_model)
    mask = np.ones((h, L, L), bool)
    mask[0, :, 1] = False
    if mask_ndim == 3:
        # B == h: per head or per sequence? mha_forward refuses to guess and names the fix
        with pytest.raises(ValueError, match=re.escape("mask[None]")):
            an.mha_forward(x, x, x, params, mask, num_heads=h)
        mask = mask[None]
    else:
        mask = np.broadcast_to(mask, (B, h, L, L))
    out, _ = an.mha_forward(x, x, x, params, mask, num_heads=h)
    np.testing.assert_allclose(out, _mha_by_hand(x, params, h, mask), rtol=1e-12, atol=1e-14)


def test_mha_passes_dropout_and_its_rng_to_the_attention(rng):
    """Kills ``mha_forward`` dropping ``spec.dropout_p`` or ``rng=`` on the way to Eq. (1): the
    output is that of the same steps by hand with the same dropout draw."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 2, 3, 4)
    out, _ = an.mha_forward(x, x, x, params, spec=an.AttentionSpec(dropout_p=0.5), rng=3, num_heads=2)
    want = _mha_by_hand(x, params, 2, spec=an.AttentionSpec(dropout_p=0.5), rng=3)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)
    assert max_abs_diff(out, _mha_by_hand(x, params, 2)) > 1e-3        # dropout did something


def test_mha_passes_bias_to_the_attention(rng):
    """Kills ``mha_forward`` dropping ``bias=`` on the way to Eq. (1)."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 2, 3, 4)
    bias = randn(rng, 2, 3, 3)                                 # (h, L, S)
    out, _ = an.mha_forward(x, x, x, params, num_heads=2, bias=bias)
    np.testing.assert_allclose(out, _mha_by_hand(x, params, 2, bias=bias), rtol=1e-12, atol=1e-14)


def test_init_mha_params_refuses_a_default_width_that_does_not_divide():
    """Kills ``(d_k is None or d_v is None)`` -> ``and``: d_model=5, h=2 with only d_k given
    leaves d_v to the default d_model / h, which does not divide."""
    for kw in (dict(d_k=3), dict(d_v=3)):
        with pytest.raises(ValueError, match="d_model=5 is not divisible by num_heads=2"):
            an.init_mha_params(5, 2, **kw)


def test_mha_params_width_messages_name_the_right_count(rng):
    """Kills ``num_kv_heads is None`` -> ``is not None`` in the message's name, and ``//`` ->
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


def test_mha_key_dead_only_under_mask_and_causal(rng):
    """Kills a dropped ``m & causal_mask`` or ``mask is not None`` -> ``is None``: key 2 is seen
    only by query 2 under the causal mask, and the mask blocks (2, 2), so it is dead only for
    ``mask & causal``; a NaN in its input must not reach the answer."""
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


@pytest.mark.parametrize("kernel", ["fused", "reference"])
def test_mha_sinks_of_the_wrong_length_are_refused(rng, kernel):
    """Kills the deleted ``raise`` for ``params["sinks"]`` of the wrong length: one logit per
    head."""
    params = an.init_mha_params(8, 2, sinks=True, rng=0)
    params["sinks"] = np.zeros(3)
    x = randn(rng, 3, 8)
    with pytest.raises(ValueError, match=re.escape("params['sinks'] has shape (3,), expected "
                                                   "(num_heads,) = (2,)")):
        an.mha_forward(x, x, x, params, spec=an.AttentionSpec(kernel=kernel), num_heads=2)


@pytest.mark.parametrize("what", ["params", "input"])
def test_a_cache_holds_the_forwards_arrays_so_an_update_in_place_before_the_backward_shows(rng, what):
    """docs/api.md (Pairs): the cache keeps the forward's arrays and params, not copies. Scaling
    W_o (or the key input) in place between forward and backward changes the gradients that read
    it, with no error."""
    params = an.init_mha_params(8, 2, rng=0)
    x, memory = randn(rng, 2, 5, 8), randn(rng, 2, 6, 8)
    out, cache = an.mha_forward(x, memory, memory, params, num_heads=2)
    dout = randn(rng, *out.shape)
    before = an.mha_backward(dout, cache)
    target = params["W_o"] if what == "params" else memory
    target *= 2.0
    after = an.mha_backward(dout, cache)
    if what == "params":                                 # dconcat = dout @ W_o.T, then everything
        assert not np.allclose(before[0], after[0])
    else:                                                # dW_k = key.T @ dk (dquery reads the heads)
        assert not np.allclose(before[3]["W_k"], after[3]["W_k"])
        np.testing.assert_array_equal(before[0], after[0])
