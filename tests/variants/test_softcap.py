"""Logit soft-capping (scores -> c tanh(scores / c), Gemma 2): the fused path and mha_forward against
the formula written in PyTorch with autograd (random upstream gradients, float64), finite
differences, GQA, the bias gradient, and Gemma 2's own attention function."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded

R = np.random.default_rng(1250)


def test_softcap_equals_the_formula_in_torch_with_bias_mask_and_gqa():
    q, k, v = 3 * randn(R, 2, 4, 5, 6), 3 * randn(R, 2, 2, 7, 6), randn(R, 2, 2, 7, 3)
    bias, mask = randn(R, 4, 5, 7), an.causal_mask(5, 7)
    out, cache = an.sdpa_forward(q, k, v, mask, bias=bias, spec=an.AttentionSpec(softcap=2.0,
                                                                                 enable_gqa=True))
    dout = randn(R, *out.shape)
    ours = [out, *an.sdpa_backward(dout, cache, return_dbias=True)]
    theirs = torch_ref.formula(q, k, v, dout, mask=mask, bias=bias, softcap=2.0, groups=2)
    for name, a, b in zip(("out", "dq", "dk", "dv", "dbias"), ours, theirs, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-12, name
    # the cap changes the answer: the scores reach |s| > 2
    assert max_abs_diff(out, an.sdpa_forward(q, k, v, mask, bias=bias,
                                             spec=an.AttentionSpec(enable_gqa=True))[0]) > 1e-2


def test_softcap_gradients_match_finite_differences():
    q, k, v = 2 * randn(R, 3, 4), 2 * randn(R, 5, 4), randn(R, 5, 2)
    dout = randn(R, 3, 2)
    spec = an.AttentionSpec(softcap=1.5)
    grads = an.sdpa_backward(dout, an.sdpa_forward(q, k, v, spec=spec)[1])
    for x, g in zip((q, k, v), grads, strict=True):
        num = numerical_gradient(lambda: float(np.sum(an.sdpa_forward(q, k, v, spec=spec)[0] * dout)), x)
        assert max_abs_diff(g, num) < 1e-9


def test_softcap_equals_gemma2_eager_attention_in_float64():
    torch = require("torch")
    gemma2 = require("transformers.models.gemma2.modeling_gemma2")
    q, k, v = 3 * randn(R, 1, 2, 4, 8), 3 * randn(R, 1, 2, 4, 8), randn(R, 1, 2, 4, 8)
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = 1, False
    theirs, _ = gemma2.eager_attention_forward(module, *(torch.tensor(a) for a in (q, k, v)),
                                               attention_mask=None, dropout=0.0, scaling=0.25,
                                               softcap=5.0)
    ours, _ = an.sdpa_forward(q, k, v, scale=0.25, spec=an.AttentionSpec(softcap=5.0))
    # Gemma 2's eager attention returns (B, L, h, d) and runs its softmax in float32
    assert 1e-10 < max_abs_diff(ours, np.swapaxes(theirs.numpy(), 1, 2)) < 1e-6


def test_mha_softcap_and_bad_values():
    x = randn(R, 4, 8)
    params = an.init_mha_params(8, 2, rng=0)
    spec = an.AttentionSpec(softcap=0.5)
    out, cache = an.mha_forward(x, x, x, params, spec=spec, num_heads=2)
    dout = randn(R, 4, 8)
    g = an.mha_backward(dout, cache)[3]["W_q"]
    num = numerical_gradient(lambda: float(np.sum(
        an.mha_forward(x, x, x, params, spec=spec, num_heads=2)[0] * dout)), params["W_q"])
    assert max_abs_diff(g, num) < 1e-8
    with pytest.raises(ValueError, match="softcap"):
        an.mha_forward(x, x, x, params, spec=spec.replace(kernel="reference"), num_heads=2)
    for bad, exc in ((0.0, ValueError), (-1.0, ValueError), (np.inf, ValueError), ("1", TypeError)):
        with pytest.raises(exc, match="softcap"):
            an.AttentionSpec(softcap=bad)


@pytest.mark.float32
def test_softcap_float32():
    (q, k, v, dout), f64 = rounded(*(3 * randn(R, 2, 3, n, 8) for n in (5, 7, 7)), randn(R, 2, 3, 5, 8))
    out, cache = an.sdpa_forward(q, k, v, spec=an.AttentionSpec(softcap=2.0))
    ours = [out, *an.sdpa_backward(dout, cache)]
    oracle = torch_ref.formula(*f64, softcap=2.0)                 # torch, float64: not ours
    theirs = torch_ref.formula(q, k, v, dout, softcap=2.0)
    assert_float32_all(("out", "dq", "dk", "dv"), ours, theirs, oracle, framework="torch")
