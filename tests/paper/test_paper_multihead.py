"""attention_np.paper.multihead, §3.2.2: against torch.nn.MultiheadAttention (the API.md layout),
the fast path ``attention_np.mha_forward``, finite differences; masks on the right axis.
"""

import warnings

import numpy as np
import pytest

import attention_np as an
from attention_np import paper
from tests import torch_ref
from tests.helpers import assert_float32_within_framework, randn

NAMES = ("out", "weights", "dquery", "dkey", "dvalue")


def random_params(rng, *args, **kwargs):
    """init_mha_params with random biases (zero biases would hide a bias bug)."""
    p = paper.init_mha_params(*args, rng=rng, bias=True, **kwargs)
    return {n: (randn(rng, *a.shape, dtype=a.dtype) * 0.5 if n[0] == "b" else a) for n, a in p.items()}


def paper_mha(query, key, value, params, h, dout, mask=None, is_causal=False):
    out, cache = paper.mha_forward(query, key, value, params, mask, num_heads=h, is_causal=is_causal)
    return (out, cache.weights, *paper.mha_backward(dout, cache))


def assert_all_close(ours, theirs, rtol=1e-11, atol=1e-12):
    for name, a, b in zip(NAMES, ours[:5], theirs[:5], strict=True):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)
    assert list(ours[5]) == list(theirs[5]) or set(ours[5]) == set(theirs[5])
    for name in ours[5]:
        np.testing.assert_allclose(ours[5][name], theirs[5][name], rtol=rtol, atol=atol, err_msg=name)


# ------------------------------------------------------------------------------------ against torch

def test_self_attention_matches_torch(rng):
    p, x = random_params(rng, 12, 3), randn(rng, 2, 5, 12)
    dout = randn(rng, 2, 5, 12)
    assert_all_close(paper_mha(x, x, x, p, 3, dout), torch_ref.mha(x, x, x, p, 3, dout))


def test_cross_attention_with_kdim_vdim_and_no_bias_matches_torch(rng):
    for params in (random_params(rng, 8, 2, kdim=5, vdim=3),
                   paper.init_mha_params(8, 2, kdim=5, vdim=3, bias=False, rng=rng)):
        query, key, value = randn(rng, 2, 4, 8), randn(rng, 2, 6, 5), randn(rng, 2, 6, 3)
        dout = randn(rng, 2, 4, 8)
        assert_all_close(paper_mha(query, key, value, params, 2, dout),
                         torch_ref.mha(query, key, value, params, 2, dout))


def test_causal_and_padding_masks_match_torch_in_its_polarity(rng):
    p, x, dout = random_params(rng, 8, 2), randn(rng, 3, 5, 8), randn(rng, 3, 5, 8)
    ours = paper_mha(x, x, x, p, 2, dout, is_causal=True)
    assert_all_close(ours, torch_ref.mha(x, x, x, p, 2, dout, attn_mask=~paper.causal_mask(5)))
    keys = paper.padding_mask(np.array([5, 2, 4]))                  # (B, 1, S)
    ours = paper_mha(x, x, x, p, 2, dout, mask=keys[:, None])       # (B, 1, 1, S)
    assert_all_close(ours, torch_ref.mha(x, x, x, p, 2, dout, key_padding_mask=~keys[:, 0]))


def test_a_per_head_mask_reaches_its_head_as_in_torch(rng):
    B, h, L, S = 2, 3, 4, 5
    p, query, kv = random_params(rng, 6, h), randn(rng, B, L, 6), randn(rng, B, S, 6)
    mask = rng.random((B, h, L, S)) < 0.7
    mask[..., 0] = True                                            # torch gives NaN on an empty row
    dout = randn(rng, B, L, 6)
    # torch's 3-D attn_mask is (B*h, L, S), batch-major
    assert_all_close(paper_mha(query, kv, kv, p, h, dout, mask=mask),
                     torch_ref.mha(query, kv, kv, p, h, dout, attn_mask=~mask.reshape(B * h, L, S)))


@pytest.mark.float32
def test_float32_in_float32_out_within_the_float32_rule(rng):
    p64 = random_params(rng, 8, 2)
    p = {n: a.astype(np.float32) for n, a in p64.items()}
    x, dout = randn(rng, 2, 5, 8, dtype=np.float32), randn(rng, 2, 5, 8, dtype=np.float32)
    ours = paper_mha(x, x, x, p, 2, dout, is_causal=True)
    assert all(a.dtype == np.float32 for a in (*ours[:5], *ours[5].values()))
    up = lambda a: a.astype(np.float64)  # noqa: E731
    oracle = paper_mha(up(x), up(x), up(x), {n: up(a) for n, a in p.items()}, 2, up(dout), is_causal=True)
    theirs = torch_ref.mha(x, x, x, p, 2, dout, attn_mask=~paper.causal_mask(5))
    for name, a, b, c in zip(NAMES, ours[:5], theirs[:5], oracle[:5], strict=True):
        assert_float32_within_framework(a, b, c, name=f"paper mha {name}")
    for name in p:
        assert_float32_within_framework(ours[5][name], theirs[5][name], oracle[5][name],
                                        name=f"paper mha {name}")


# ------------------------------------------------------------------------ against the fast path, FD

def test_equals_the_fast_path_to_float64_rounding(rng):
    p = random_params(rng, 8, 4, kdim=6, vdim=6)
    query, kv, dout = randn(rng, 3, 5, 8), randn(rng, 3, 7, 6), randn(rng, 3, 5, 8)
    mask = paper.padding_mask(np.array([7, 3, 0]))[:, None]        # sequence 2 sees no key at all
    out, cache = paper.mha_forward(query, kv, kv, p, mask, num_heads=4, is_causal=True, scale=0.4)
    fast_out, fast_cache = an.mha_forward(query, kv, kv, p, mask, num_heads=4, is_causal=True, scale=0.4)
    ours = (out, cache.weights, *paper.mha_backward(dout, cache))
    fast = (fast_out, fast_cache.weights, *an.mha_backward(dout, fast_cache))
    assert_all_close(ours, fast, rtol=1e-13, atol=1e-14)


def test_backward_matches_finite_differences_for_inputs_and_params(rng):
    p = random_params(rng, 4, 2, kdim=3, vdim=5)
    query, key, value = randn(rng, 2, 3, 4), randn(rng, 2, 4, 3), randn(rng, 2, 4, 5)
    mask = rng.random((2, 1, 3, 4)) < 0.7
    result = paper.gradcheck(lambda q, k, v, p: paper.mha_forward(q, k, v, p, mask, num_heads=2),
                             paper.mha_backward, (query, key, value, p),
                             names=("query", "key", "value", "params"))
    assert result.ok, str(result)
    assert set(result.errors) == {"query", "key", "value"} | {f"params.{n}" for n in p}


def test_unbatched_query_against_batched_keys_sums_its_gradient_back(rng):
    p = random_params(rng, 4, 2)
    query, kv = randn(rng, 3, 4), randn(rng, 2, 5, 4)             # query shared by both sequences
    out, cache = paper.mha_forward(query, kv, kv, p, num_heads=2)
    assert out.shape == (2, 3, 4) and cache.weights.shape == (2, 2, 3, 5)
    result = paper.gradcheck(lambda q, k, v, p: paper.mha_forward(q, k, v, p, num_heads=2),
                             paper.mha_backward, (query, kv, kv, p))
    assert result.ok, str(result)


def test_self_attention_gradient_is_the_sum_of_the_three(rng):
    p, x, dout = random_params(rng, 4, 2), randn(rng, 3, 4), randn(rng, 3, 4)
    out, cache = paper.mha_forward(x, x, x, p, num_heads=2, is_causal=True)
    dq, dk, dv, _ = paper.mha_backward(dout, cache)
    loss = lambda: float(np.sum(paper.mha_forward(x, x, x, p, num_heads=2, is_causal=True)[0] * dout))  # noqa: E731
    np.testing.assert_allclose(dq + dk + dv, paper.numerical_gradient(loss, x), atol=1e-8)


def test_fully_masked_row_attends_nothing_and_passes_no_gradient(rng):
    p, x, dout = random_params(rng, 8, 2), randn(rng, 2, 4, 8), randn(rng, 2, 4, 8)
    mask = np.ones((2, 1, 4, 4), bool)
    mask[1, :, 2] = False                                          # query 2 of sequence 1: every key masked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = paper.mha_forward(x, x, x, p, mask, num_heads=2)
        dquery, *_ = paper.mha_backward(dout, cache)
    assert np.all(cache.weights[1, :, 2] == 0) and np.all(cache.attention.weights[1, :, 2] == 0)
    np.testing.assert_allclose(out[1, 2], p["b_o"], rtol=1e-15)    # heads 0: out = 0 @ W_o + b_o
    assert np.all(dquery[1, 2] == 0)


# ---------------------------------------------------------------------- masks on the right axis

def test_padding_mask_with_batch_equal_to_heads_is_refused_with_the_fix(rng):
    """The newcomer's trap: (B, 1, S) with B == h would align the batch with the heads."""
    p, x = paper.init_mha_params(8, 4, rng=0), randn(rng, 4, 6, 8)
    lengths = np.array([6, 3, 5, 1])
    with pytest.raises(ValueError, match=r"pass mask\[:, None\], of shape \(B, 1, 1, S\); for a per-head "
                                         r"\(h, L, S\) mask pass mask\[None\]"):
        paper.mha_forward(x, x, x, p, paper.padding_mask(lengths), num_heads=4)
    out, cache = paper.mha_forward(x, x, x, p, paper.padding_mask(lengths)[:, None], num_heads=4)
    assert np.all(cache.weights[1, :, :, 3:] == 0) and np.all(cache.weights[0] > 0)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 1, 6\) is ambiguous"):   # batch != heads too
        paper.mha_forward(x[:2], x[:2], x[:2], paper.init_mha_params(8, 2, rng=0),
                          paper.padding_mask(lengths), num_heads=2)


def test_per_head_mask_unbatched_or_with_a_leading_one(rng):
    p, x = random_params(rng, 6, 3), randn(rng, 4, 6)
    mask = rng.random((3, 4, 4)) < 0.7                             # (h, L, S), unambiguous: no batch
    out, cache = paper.mha_forward(x, x, x, p, mask, num_heads=3)
    assert np.all(cache.weights[~mask] == 0)
    xb = np.stack([x, x])
    out_b, _ = paper.mha_forward(xb, xb, xb, p, mask[None], num_heads=3)
    np.testing.assert_allclose(out_b, np.stack([out, out]), rtol=1e-15)
    out_b, _ = paper.mha_forward(xb, xb, xb, p, mask, num_heads=3)  # B = 2 != h: per head, as NumPy
    np.testing.assert_allclose(out_b, np.stack([out, out]), rtol=1e-15)
    xb = np.stack([x, x, x])                                       # B == h: per head or per sequence?
    with pytest.raises(ValueError, match="ambiguous"):
        paper.mha_forward(xb, xb, xb, p, mask, num_heads=3)


def test_mha_bad_inputs_are_named(rng):
    p, x = paper.init_mha_params(8, 2, bias=True, rng=0), randn(rng, 2, 3, 8)
    with pytest.raises(ValueError, match=r"params must hold .* missing \['W_o'\]"):
        paper.mha_forward(x, x, x, {n: a for n, a in p.items() if n != "W_o"}, num_heads=2)
    with pytest.raises(ValueError, match=r"not in §3.2.2 \['sinks'\]"):
        paper.mha_forward(x, x, x, {**p, "sinks": np.zeros(2)}, num_heads=2)
    with pytest.raises(ValueError, match=r"key has 5 features but params\['W_k'\] has shape \(8, 8\)"):
        paper.mha_forward(x, randn(rng, 2, 3, 5), x, p, num_heads=2)
    with pytest.raises(ValueError, match="key has S=3 positions but value has S=4"):
        paper.mha_forward(x, x, randn(rng, 2, 4, 8), p, num_heads=2)
    with pytest.raises(ValueError, match=r"params\['W_q'\] has 8 columns, not divisible by num_heads=3"):
        paper.mha_forward(x, x, x, p, num_heads=3)
    with pytest.raises(TypeError, match="params must be a dict of arrays"):
        paper.mha_forward(x, x, x, list(p.values()), num_heads=2)
    with pytest.raises(ValueError, match=r"params\['W_o'\] has shape \(6, 8\) but the concatenated heads "
                                         r"have 8 features"):
        paper.mha_forward(x, x, x, {**p, "W_o": p["W_o"][:6]}, num_heads=2)
    with pytest.raises(ValueError, match=r"params\['W_q'\] has 6 columns but params\['W_k'\] has 8"):
        paper.mha_forward(x, x, x, {**p, "W_q": p["W_q"][:, :6], "b_q": p["b_q"][:6]}, num_heads=2)
    with pytest.raises(ValueError, match=r"params\['b_v'\] has shape \(7,\), expected \(8,\)"):
        paper.mha_forward(x, x, x, {**p, "b_v": p["b_v"][:7]}, num_heads=2)
    with pytest.raises(TypeError, match="query, key, value and params must share one dtype"):
        paper.mha_forward(x.astype(np.float32), x, x, p, num_heads=2)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\) does not broadcast to multi-head scores"):
        paper.mha_forward(x, x, x, p, np.ones((3, 4), bool), num_heads=2)
    with pytest.raises(ValueError, match=r"batch dims do not broadcast: query \(2,\), key \(2,\), "
                                         r"value \(3,\)"):
        paper.mha_forward(x, x, randn(rng, 3, 3, 8), p, num_heads=2)
    out, cache = paper.mha_forward(x, x, x, p, num_heads=2)
    with pytest.raises(ValueError, match=r"dout has shape \(3, 8\) but out has shape \(2, 3, 8\)"):
        paper.mha_backward(out[0], cache)
    _, fast_cache = an.mha_forward(x, x, x, p, num_heads=2)       # the fast path's MHACache
    with pytest.raises(TypeError, match=r"cache must be the MHACache returned by attention_np.paper."
                                        r"mha_forward, got attention_np\.(?!paper).*MHACache"):
        paper.mha_backward(out, fast_cache)
