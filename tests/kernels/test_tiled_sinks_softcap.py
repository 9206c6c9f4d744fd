"""Soft-capping and attention sinks in the tiled path (kernels/tiled*.py): equal to the dense paths
(sdpa_forward with spec.softcap, sdpa_sinks_forward) to float64 rounding with masks, windows, GQA and biases,
checked by finite differences, and in float32 against the formula in torch (the float32 rule of
tests/helpers.py)."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, rounded

R = np.random.default_rng(1280)
B, H, L, S, D = 2, 4, 6, 9, 5


def _in_spec(kw: dict) -> dict:
    """``kw`` with ``window``, ``softcap`` and ``enable_gqa`` moved into ``spec`` (their home)."""
    moved = {n: kw.pop(n) for n in ("window", "softcap", "enable_gqa") if n in kw}
    return {**kw, "spec": an.AttentionSpec(**moved)}


def _dense(q, k, v, sinks, dout, **kw):
    """out, dq, dk, dv[, dsinks], dbias from the dense path (the reference)."""
    if sinks is None:
        out, cache = an.sdpa_forward(q, k, v, **_in_spec(kw))
        return [out, *an.sdpa_backward(dout, cache, return_dbias=True)]
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, **_in_spec(kw))
    return [out, *an.sdpa_sinks_backward(dout, cache, return_dbias=True)]


def _tiled(q, k, v, sinks, dout, block_size, **kw):
    out, cache = an.flash_attention_forward(q, k, v, sinks=sinks, block_size=block_size, **_in_spec(kw))
    return [out, *an.flash_attention_backward(dout, cache, return_dbias=True)]


CASES = {
    "softcap": dict(softcap=1.5),
    "sinks": dict(sinks=True),
    "both, causal, bias": dict(softcap=2.0, sinks=True, is_causal=True, bias="heads"),
    "both, window, GQA": dict(softcap=2.0, sinks=True, window=(2, 1), gqa=True),
    "sinks, mask with empty rows, GQA, bias": dict(sinks=True, mask=True, gqa=True, bias="batch"),
    "softcap, mask, window, bias": dict(softcap=0.8, mask=True, window=(3, 0), bias="heads"),
}


@pytest.mark.parametrize("block_size", [2, 4, 128])
@pytest.mark.parametrize("case", list(CASES))
def test_tiled_softcap_and_sinks_equal_the_dense_path(case, block_size):
    c = dict(CASES[case])
    h_kv = 2 if c.pop("gqa", False) else H
    q, k, v = 2 * randn(R, B, H, L, D), 2 * randn(R, B, h_kv, S, D), randn(R, B, h_kv, S, 3)
    sinks = randn(R, H) if c.pop("sinks", False) else None
    kw = dict(c, enable_gqa=h_kv != H)
    bias = kw.pop("bias", None)
    if bias is not None:
        kw["bias"] = randn(R, H, L, S) if bias == "heads" else randn(R, B, 1, 1, S)
    if kw.pop("mask", False):
        mask = R.random((B, 1, L, S)) < 0.6
        mask[0, 0, 2] = False                                   # a query row with every key masked
        kw["mask"] = mask
    dout = randn(R, B, H, L, 3)
    want = _dense(q, k, v, sinks, dout, **kw)
    got = _tiled(q, k, v, sinks, dout, block_size, **kw)
    names = ["out", "dq", "dk", "dv"] + (["dsinks"] if sinks is not None else []) + ["dbias"]
    assert len(got) == len(want) == len(names)
    for name, a, b in zip(names, got, want, strict=True):
        if b is None:
            assert a is None, name
            continue
        assert a.shape == b.shape and max_abs_diff(a, b) < 1e-13, (name, max_abs_diff(a, b))
    if "mask" in kw:
        assert np.all(got[0][0, :, 2] == 0)                     # the empty row gives 0


def test_tiled_sink_and_softcap_gradients_match_finite_differences():
    q, k, v = 2 * randn(R, 1, 2, 4, 3), 2 * randn(R, 1, 2, 7, 3), randn(R, 1, 2, 7, 2)
    sinks, bias, dout = randn(R, 2), randn(R, 2, 4, 7), randn(R, 1, 2, 4, 2)
    mask = R.random((4, 7)) < 0.7
    mask[1] = False
    kw = dict(spec=an.AttentionSpec(softcap=1.2), block_size=3, is_causal=True)

    def loss():
        out, _ = an.flash_attention_forward(q, k, v, mask, bias=bias, sinks=sinks, **kw)
        return float(np.sum(out * dout))

    grads = an.flash_attention_backward(
        dout, an.flash_attention_forward(q, k, v, mask, bias=bias, sinks=sinks, **kw)[1],
        return_dbias=True)
    for name, x, g in zip(("q", "k", "v", "sinks", "bias"), (q, k, v, sinks, bias), grads, strict=True):
        assert g.shape == x.shape and max_abs_diff(g, numerical_gradient(loss, x)) < 1e-9, name


def test_a_very_negative_sink_is_plain_tiled_attention_and_takes_no_gradient():
    q, k, v, dout = randn(R, 2, 3, 4), randn(R, 2, 8, 4), randn(R, 2, 8, 3), randn(R, 2, 3, 3)
    plain, _ = an.flash_attention_forward(q, k, v, block_size=3)
    out, cache = an.flash_attention_forward(q, k, v, block_size=3, sinks=np.full(2, -800.0))
    assert max_abs_diff(out, plain) < 1e-15
    assert np.all(an.flash_attention_backward(dout, cache)[3] == 0)
    # without sinks the backward returns three gradients, as before
    assert len(an.flash_attention_backward(dout, an.flash_attention_forward(q, k, v)[1])) == 3


def test_the_sink_is_the_initial_state_not_a_key():
    # lse includes the sink: log(e^{s_n} + sum_j e^{scores_j}), from the (L, 1) state, no column
    q, k, v = randn(R, 2, 3, 4), randn(R, 2, 5, 4), randn(R, 2, 5, 3)
    sinks = np.array([0.3, -0.7])
    out, cache = an.flash_attention_forward(q, k, v, sinks=sinks, block_size=2)
    scores = q @ np.swapaxes(k, -1, -2) / 2
    want = np.log(np.exp(sinks)[:, None] + np.exp(scores).sum(-1))
    assert max_abs_diff(cache.lse, want) < 1e-14
    assert cache.k.shape == k.shape                               # no appended key


@pytest.mark.float32
def test_tiled_softcap_and_sinks_float32_against_torch():
    q, k, v = 2 * randn(R, B, H, L, D), 2 * randn(R, B, 2, S, D), randn(R, B, 2, S, 3)
    sinks, dout = randn(R, H), randn(R, B, H, L, 3)
    mask, cap = an.causal_mask(L, S), 1.5
    f32, f64 = rounded(q, k, v, sinks, dout)
    out, cache = an.flash_attention_forward(*f32[:3], mask, sinks=f32[3], spec=an.AttentionSpec(softcap=cap,
                                                                                                enable_gqa=True),
                                            block_size=4)
    ours = [out, *an.flash_attention_backward(f32[4], cache)]
    # the same formula in torch with autograd: float64 (the oracle) and float32 (the peer)
    oracle, theirs = (torch_ref.formula(*a[:3], a[4], mask=mask, softcap=cap, sinks=a[3], groups=2)
                      for a in (f64, f32))
    assert_float32_all(("out", "dq", "dk", "dv", "dsinks"), ours, theirs, oracle, framework="torch")
