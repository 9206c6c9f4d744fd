"""Attention sinks (core/sinks.py): against transformers' gpt-oss eager attention with torch autograd
on its ``sinks`` parameter (GQA, causal, sliding window, float64, random upstream gradients), and by
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.core.gradcheck import numerical_gradient
from tests.helpers import max_abs_diff, randn, require

R = np.random.default_rng(1260)


@pytest.mark.parametrize("window", [None, (2, 0)])
def test_sinks_equal_gpt_oss_forward_and_every_gradient(window):
    torch = require("torch")
    gpt_oss = require("transformers.models.gpt_oss.modeling_gpt_oss")
    B, H, H_KV, L, D = 2, 4, 2, 5, 6
    q, k, v = randn(R, B, H, L, D), randn(R, B, H_KV, L, D), randn(R, B, H_KV, L, D)
    sinks = randn(R, H)
    mask = an.causal_mask(L) if window is None else an.sliding_window_mask(L, L, *window)
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = H // H_KV, False
    module.sinks = torch.nn.Parameter(torch.tensor(sinks))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    additive = torch.zeros(L, L, dtype=torch.float64).masked_fill(~torch.tensor(mask), float("-inf"))
    theirs, _ = gpt_oss.eager_attention_forward(module, tq, tk, tv, additive, scaling=D ** -0.5)
    dout = randn(R, B, L, H, D)                                   # gpt-oss returns (B, L, h, d)
    theirs.backward(torch.tensor(dout))
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, is_causal=True, window=window,
                                       enable_gqa=True)
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
    from attention_np.interop.tolerance import check_float32
    q, k, v = (randn(R, 2, 4, 6, 8).astype(np.float32) for _ in range(3))
    sinks = randn(R, 4).astype(np.float32)
    dout = randn(R, 2, 4, 6, 8).astype(np.float32)
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks)
    ours = [out, *an.sdpa_sinks_backward(dout, cache)]
    f64 = [a.astype(np.float64) for a in (q, k, v, sinks, dout)]
    o64, c64 = an.sdpa_sinks_forward(*f64[:4])
    oracle = [o64, *an.sdpa_sinks_backward(f64[4], c64)]
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = 1, False
    module.sinks = torch.nn.Parameter(torch.tensor(sinks))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_out, _ = gpt_oss.eager_attention_forward(module, tq, tk, tv, None, scaling=8 ** -0.5)
    t_out.backward(torch.tensor(np.swapaxes(dout, 1, 2)))
    theirs = [np.swapaxes(t_out.detach().numpy(), 1, 2), tq.grad.numpy(), tk.grad.numpy(),
              tv.grad.numpy(), module.sinks.grad.numpy()]
    for name, a, o, t in zip(("out", "dq", "dk", "dv", "dsinks"), ours, oracle, theirs, strict=True):
        assert a.dtype == np.float32 and check_float32(name, a, o, peer=t).ok, name
