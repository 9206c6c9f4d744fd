"""sdpa_forward/sdpa_backward against torch.nn.functional.scaled_dot_product_attention.

float64: outputs and every gradient to 1e-10 relative (measured ~1e-15). float32: our error against
a float64 oracle is held to torch's own float32 error against the same oracle.

Every test runs twice, through the ``sdpa`` fixture: on the reference Eq. (1)
(``attention_np.kernels.reference``) and on the fused path that ``attention_np.sdpa_forward`` runs
(``attention_np.kernels.fused``). Grouped-query attention, fused only, is diffed against torch's
``enable_gqa`` in tests/variants/test_gqa.py; dropout, fused only, draws its own keep-mask and is checked
by finite differences with a replayed mask in tests/kernels/test_sdpa.py.
"""

import numpy as np
import pytest

import attention_np as an
from tests import torch_ref
from tests.helpers import assert_float32_all, randn, require, rounded

B, H, L, S, D_K, D_V = 2, 3, 4, 6, 5, 3


def diff_against_torch(sdpa, rng, q, k, v, mask=None, bias=None, is_causal=False, scale=None):
    out, cache = sdpa.sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)
    dout = randn(rng, *out.shape)
    grads = sdpa.sdpa_backward(dout, cache)
    want = torch_ref.sdpa(q, k, v, dout, mask=mask, bias=bias, is_causal=is_causal, scale=scale)
    for name, ours, theirs in zip(("out", "dq", "dk", "dv"), (out, *grads), want, strict=True):
        assert ours.shape == theirs.shape, name
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=name)
    return out, cache


def qkv(rng, L=L, S=S):
    return randn(rng, B, H, L, D_K), randn(rng, B, H, S, D_K), randn(rng, B, H, S, D_V)


def test_plain_attention_matches_torch(sdpa, rng):
    diff_against_torch(sdpa, rng, *qkv(rng))


@pytest.mark.parametrize("mask_shape", [(L, S), (1, 1, L, S), (B, 1, 1, S), (B, H, L, S),
                                        (H, L, S), (B, 1, L, S)])
def test_bool_mask_of_every_broadcast_shape_matches_torch(sdpa, rng, mask_shape):
    mask = rng.random(mask_shape) > 0.35
    diff_against_torch(sdpa, rng, *qkv(rng), mask=mask)


def test_float_bias_matches_torch_float_attn_mask(sdpa, rng):
    diff_against_torch(sdpa, rng, *qkv(rng), bias=randn(rng, B, 1, L, S))


@pytest.mark.parametrize("L_q,S_k", [(3, 7), (7, 3), (5, 5)])
def test_is_causal_matches_torch_top_left_when_L_differs_from_S(sdpa, rng, L_q, S_k):
    diff_against_torch(sdpa, rng, *qkv(rng, L_q, S_k), is_causal=True)


def test_bottom_right_causal_mask_matches_torch_causal_lower_right(sdpa, rng):
    torch = require("torch")
    from torch.nn.attention.bias import causal_lower_right
    q, k, v = qkv(rng, 3, 7)
    theirs = causal_lower_right(3, 7)._materialize(device=torch.device("cpu")).numpy()
    np.testing.assert_array_equal(an.causal_mask(3, 7, align="bottom_right"), theirs)
    diff_against_torch(sdpa, rng, q, k, v, mask=an.causal_mask(3, 7, align="bottom_right"))


@pytest.mark.parametrize("scale", [1.0, 0.1, 2.5])
def test_custom_scale_matches_torch(sdpa, rng, scale):
    diff_against_torch(sdpa, rng, *qkv(rng), scale=scale)


def test_fully_masked_rows_are_zero_in_both(sdpa, rng):
    mask = rng.random((B, H, L, S)) > 0.3
    mask[0, 1, 2] = False
    mask[1, :, 0] = False
    out, cache = diff_against_torch(sdpa, rng, *qkv(rng), mask=mask)
    assert np.all(cache.weights[0, 1, 2] == 0) and np.all(out[1, :, 0] == 0)


def test_huge_scores_match_torch(sdpa, rng):
    q, k, v = qkv(rng)
    diff_against_torch(sdpa, rng, q * 100, k * 100, v)            # |scores| ~ 1e4: fully saturated


# --- float32: both sides held to each other's error against torch's own float64 ---------------

@pytest.mark.float32
@pytest.mark.parametrize("case", ["plain", "mask", "causal", "bias", "large"])
def test_float32_error_is_within_torchs_own(sdpa, rng, case):
    q, k, v = qkv(rng, 16, 24)
    kwargs = {"mask": dict(mask=rng.random((16, 24)) > 0.3), "causal": dict(is_causal=True),
              "bias": dict(bias=randn(rng, 16, 24)), "plain": {}, "large": {}}[case]
    if case == "large":
        q, k = q * 3, k * 3                                  # |scores| ~ 10-20
    bias = kwargs.pop("bias", None)
    dout = randn(rng, B, H, 16, D_V)
    (q32, k32, v32, dout32, *b32), (q64, k64, v64, dout64, *b64) = rounded(
        q, k, v, dout, *([] if bias is None else [bias]))
    kw32 = dict(kwargs, bias=b32[0] if b32 else None)
    kw64 = dict(kwargs, bias=b64[0] if b64 else None)
    oracle = torch_ref.sdpa(q64, k64, v64, dout64, **kw64)    # torch in float64: independent of ours
    out32, c32 = sdpa.sdpa_forward(q32, k32, v32, **kw32)
    ours = (out32, *sdpa.sdpa_backward(dout32, c32))
    theirs = torch_ref.sdpa(q32, k32, v32, dout32, **kw32)
    assert_float32_all(("out", "dq", "dk", "dv"), ours, theirs, oracle, framework="torch")
