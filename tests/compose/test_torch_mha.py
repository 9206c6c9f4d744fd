"""mha_forward/mha_backward against torch.nn.MultiheadAttention (batch_first=True).

Mapping (API.md): in_proj_weight = [W_q.T; W_k.T; W_v.T] (or q/k/v_proj_weight = W.T when kdim/vdim
differ), out_proj.weight = W_o.T; torch's masks are True = blocked, so attn_mask = ~mask.
"""

import numpy as np
import pytest

import attention_np as an
from tests import torch_ref
from tests.helpers import assert_float32_all, mha_params, randn, require, rounded

NAMES = ("out", "weights", "dquery", "dkey", "dvalue")


def params_with_random_biases(rng, *args, **kwargs):
    return mha_params(rng, *args, bias_scale=0.5, **kwargs)


def ours(query, key, value, params, h, dout, mask=None):
    out, cache = an.mha_forward(query, key, value, params, num_heads=h, mask=mask)
    dq, dk, dv, grads = an.mha_backward(dout, cache)
    return out, cache.weights, dq, dk, dv, grads


def assert_matches(a, b, rtol=1e-10, atol=1e-12):
    for name, x, y in zip(NAMES, a[:5], b[:5], strict=True):
        assert x.shape == y.shape, name
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=name)
    assert set(a[5]) == set(b[5])
    for name in a[5]:
        np.testing.assert_allclose(a[5][name], b[5][name], rtol=rtol, atol=atol, err_msg=name)


def test_self_attention_matches_torch(rng):
    p = params_with_random_biases(rng, 12, 3)
    x = randn(rng, 2, 5, 12)
    dout = randn(rng, 2, 5, 12)
    assert_matches(ours(x, x, x, p, 3, dout), torch_ref.mha(x, x, x, p, 3, dout))


def test_cross_attention_with_kdim_vdim_matches_torch(rng):
    p = params_with_random_biases(rng, 8, 2, kdim=5, vdim=3)
    query, key, value = randn(rng, 2, 4, 8), randn(rng, 2, 6, 5), randn(rng, 2, 6, 3)
    dout = randn(rng, 2, 4, 8)
    assert_matches(ours(query, key, value, p, 2, dout), torch_ref.mha(query, key, value, p, 2, dout))


def test_without_bias_matches_torch(rng):
    p = an.init_mha_params(8, 4, bias=False, rng=rng)
    query, kv = randn(rng, 3, 2, 8), randn(rng, 3, 7, 8)
    dout = randn(rng, 3, 2, 8)
    assert_matches(ours(query, kv, kv, p, 4, dout), torch_ref.mha(query, kv, kv, p, 4, dout))


def test_causal_attn_mask_converted_to_torch_polarity(rng):
    p = params_with_random_biases(rng, 8, 2)
    x, dout = randn(rng, 2, 5, 8), randn(rng, 2, 5, 8)
    mask = an.causal_mask(5)
    assert_matches(ours(x, x, x, p, 2, dout, mask=mask),
                   torch_ref.mha(x, x, x, p, 2, dout, attn_mask=~mask))


def test_padding_and_attn_mask_together_match_torch(rng):
    p = params_with_random_biases(rng, 8, 2)
    query, kv = randn(rng, 3, 4, 8), randn(rng, 3, 6, 8)
    dout = randn(rng, 3, 4, 8)
    pad = an.padding_mask([6, 4, 2])                 # (B, 1, S), True = real key
    attn = rng.random((4, 6)) > 0.3
    attn[:, 0] = True                                # no fully masked row: torch MHA gives NaN there
    mask = pad[:, None] & attn                       # (B, 1, L, S) broadcasts over heads
    assert_matches(ours(query, kv, kv, p, 2, dout, mask=mask),
                   torch_ref.mha(query, kv, kv, p, 2, dout, attn_mask=~attn,
                                 key_padding_mask=~pad[:, 0]))


def test_self_attention_input_gradient_matches_torch_with_one_tensor(rng):
    # torch sees one tensor used three times; our three gradients must add up to its one.
    torch = require("torch")
    p = params_with_random_biases(rng, 6, 2)
    x, dout = randn(rng, 2, 3, 6), randn(rng, 2, 3, 6)
    _, _, dq, dk, dv, _ = ours(x, x, x, p, 2, dout)
    module = torch_ref.mha_module(p, 2)
    tx = torch.tensor(x, requires_grad=True)
    module(tx, tx, tx, need_weights=False)[0].backward(torch.tensor(dout))
    np.testing.assert_allclose(dq + dk + dv, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.float32
def test_float32_error_is_within_torchs_own(rng):
    p64 = params_with_random_biases(rng, 16, 4, kdim=8, vdim=12)
    names = list(p64)
    f32, f64 = rounded(*p64.values(), randn(rng, 2, 6, 16), randn(rng, 2, 9, 8),
                       randn(rng, 2, 9, 12), randn(rng, 2, 6, 16))
    p32, p64 = dict(zip(names, f32, strict=False)), dict(zip(names, f64, strict=False))
    query32, key32, value32, dout32 = f32[len(names):]
    oracle = torch_ref.mha(*f64[len(names):len(names) + 3], p64, 4, f64[-1])   # torch, float64
    mine = ours(query32, key32, value32, p32, 4, dout32)
    theirs = torch_ref.mha(query32, key32, value32, p32, 4, dout32)
    assert_float32_all(NAMES, mine[:5], theirs[:5], oracle[:5], framework="torch")
    assert_float32_all(names, [mine[5][n] for n in names], [theirs[5][n] for n in names],
                       [oracle[5][n] for n in names], framework="torch")
