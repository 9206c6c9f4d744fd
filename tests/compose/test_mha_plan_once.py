"""One description of a call: ``mha_forward`` builds its plan, checks its kernel's support, builds
its mask and drops the masked inputs once each, whatever the options.

Counted by spies on every reference the package holds to each function (a module that imported
it by name holds its own), so a second call from anywhere below ``mha_forward`` is seen.
"""

import sys

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import guard, plan, registry
from attention_np.paper import masks
from attention_np.variants import window
from tests.helpers import randn

COUNTED = {
    "plan_from": plan.plan_from,
    "check_supports": registry.check_supports,
    "whole_mask": guard.whole_mask,           # the one builder of a call's mask
    "mask_and_bias": guard.mask_and_bias,     # the kernels' own builder: not run on a built plan
    "drop_masked": guard.drop_masked,
    "causal_mask": masks.causal_mask,
    "window_mask": window.window_mask,
}


@pytest.fixture
def calls(monkeypatch):
    counts = dict.fromkeys(COUNTED, 0)
    for name, fn in COUNTED.items():
        def spy(*args, _name=name, _fn=fn, **kw):
            counts[_name] += 1
            return _fn(*args, **kw)
        for module in list(sys.modules.values()):
            ours = getattr(module, "__name__", "").startswith("attention_np")
            if ours and getattr(module, name, None) is fn:
                monkeypatch.setattr(module, name, spy)
    return counts


B, L, d_model, h = 2, 6, 8, 2


def case(name, rng):
    """``(params, kwargs, built)``: a call of mha_forward on x (B, L, d_model), and which of the
    causal and window masks it builds."""
    params = an.init_mha_params(d_model, h, rng=0)
    if name == "causal":
        return params, dict(is_causal=True), {"causal_mask"}
    if name == "window":
        return params, dict(spec=an.AttentionSpec(window=(2, 0))), {"window_mask"}
    if name == "causal + window":
        return params, dict(is_causal=True, spec=an.AttentionSpec(window=(2, 0))), {"causal_mask",
                                                                                      "window_mask"}
    if name == "padding mask":
        return params, dict(mask=an.padding_mask(np.array([6, 3]))[:, None]), set()
    if name == "-inf bias":
        bias = randn(rng, h, L, L)
        bias[..., 4:] = -np.inf
        return params, dict(bias=bias), set()
    if name == "GQA, causal":
        return an.init_mha_params(d_model, 4, num_kv_heads=2, rng=0), dict(is_causal=True), {"causal_mask"}
    if name == "sinks, padding":
        return (an.init_mha_params(d_model, h, sinks=True, rng=0),
                dict(mask=an.padding_mask(np.array([6, 2]))[:, None]), set())
    raise KeyError(name)


CASES = ["causal", "window", "causal + window", "padding mask", "-inf bias", "GQA, causal",
         "sinks, padding"]


def by_hand(name):
    """The (L, L) mask of the case, written out: query i sees key j when ..."""
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    return {"causal": j <= i, "window": (i - 2 <= j) & (j <= i),
            "causal + window": (i - 2 <= j) & (j <= i)}.get(name)


def kernels_for(name):
    """The kernels that can run the case (the reference kernel does neither GQA nor sinks)."""
    return ["fused", "tiled"] + (["reference"] if "GQA" not in name and "sinks" not in name else [])


@pytest.mark.parametrize("name, kernel", [(n, k) for n in CASES for k in kernels_for(n)])
def test_mha_forward_builds_its_plan_and_mask_once(rng, calls, name, kernel):
    params, kw, built = case(name, rng)
    heads = params["W_q"].shape[1] // (d_model // h)
    spec = an.AttentionSpec(window=kw.pop("spec", an.AttentionSpec()).window, kernel=kernel)
    x = randn(rng, B, L, d_model)
    want = {"plan_from": 1, "check_supports": 1, "whole_mask": 1, "mask_and_bias": 0, "drop_masked": 1,
            "causal_mask": int("causal_mask" in built), "window_mask": int("window_mask" in built)}
    out, _ = an.mha_forward(x, x, x, params, num_heads=heads, spec=spec, **kw)
    assert calls == want
    # the kernel took the mask as built: the numbers are the paper's with that mask written out
    mask = kw.get("mask", by_hand(name))
    if mask is not None and "sinks" not in params:
        want_out, _ = an.paper.mha_forward(x, x, x, params, mask, num_heads=heads)
        np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["fused", "tiled", "reference"])
def test_masked_garbage_is_dropped_once_and_kept_out(rng, calls, kernel):
    """A NaN in the key and value inputs at padded positions: dropped once, before the
    projections, and out of every output and gradient (the kernel does not drop it again)."""
    params, kw, _ = case("padding mask", rng)
    x, memory = randn(rng, B, L, d_model), randn(rng, B, L, d_model)
    memory[1, 3:] = np.nan                                  # sequence 1 has 3 real keys
    spec = an.AttentionSpec(kernel=kernel)
    out, cache = an.mha_forward(x, memory, memory, params, num_heads=h, spec=spec, **kw)
    assert calls["drop_masked"] == 1 and calls["whole_mask"] == 1
    dquery, dkey, dvalue, grads = an.mha_backward(np.ones_like(out), cache)
    clean = np.where(np.isnan(memory), 0.0, memory)
    want, _ = an.paper.mha_forward(x, clean, clean, params, kw["mask"], num_heads=h)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert all(np.isfinite(g).all() for g in (dquery, dkey, dvalue, *grads.values()))
    assert not dkey[1, 3:].any() and not dvalue[1, 3:].any()


def test_a_nan_in_an_attended_padded_query_row_has_a_backward_on_every_kernel(rng):
    """A padding mask (B, 1, 1, S) masks keys, not queries: a NaN query row is attended, its
    output NaN, and the backward ran into the mask's broadcast row axis in ``masked_matmul``'s
    NaN count (a ``ValueError`` from matmul on the fused and reference kernels). Every kernel now
    gives the same gradients, NaN where IEEE arithmetic puts them."""
    params, kw, _ = case("padding mask", rng)
    x = randn(rng, B, L, d_model)
    x[1, 3:] = np.nan
    got = {}
    for kernel in ("reference", "fused", "tiled"):
        out, cache = an.mha_forward(x, x, x, params, num_heads=h, spec=an.AttentionSpec(kernel=kernel), **kw)
        got[kernel] = (out, *an.mha_backward(np.ones_like(out), cache)[:3])
    assert np.isfinite(got["fused"][0][1, :3]).all() and np.isnan(got["fused"][0][1, 3:]).all()
    for kernel in ("fused", "tiled"):
        for a, b in zip(got["reference"], got[kernel], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def decode_case(name, rng):
    """``(params, kwargs)`` of a decode step on a cache of 4 positions, 2 new ones (S = 6)."""
    params = an.init_mha_params(d_model, h, rng=0)
    if name == "causal":
        return params, {}
    if name == "window":
        return params, dict(spec=an.AttentionSpec(window=(2, 0)))
    if name == "padding mask":
        return params, dict(mask=an.padding_mask(np.array([6, 3]))[:, None])
    if name == "-inf bias":                             # (h, L, L): the step takes rows 4, 5
        bias = randn(rng, h, L, L)
        bias[..., 1] = -np.inf
        return params, dict(bias=bias)
    if name == "GQA":
        return an.init_mha_params(d_model, 4, num_kv_heads=2, rng=0), {}
    if name == "sinks, padding":
        return (an.init_mha_params(d_model, h, sinks=True, rng=0),
                dict(mask=an.padding_mask(np.array([6, 2]))[:, None]))
    raise KeyError(name)


DECODE = ["causal", "window", "padding mask", "-inf bias", "GQA", "sinks, padding"]


@pytest.mark.parametrize("name, kernel", [(n, k) for n in DECODE for k in kernels_for(n)])
def test_a_decode_step_builds_its_plan_and_mask_once_and_matches_the_full_forward(rng, calls, name,
                                                                                   kernel):
    """A decode step (T = 2 new positions on a cache of 4): one plan, one support check, one whole
    mask (the bottom-right causal mask, the window, ``mask`` and a -inf bias), one drop on the
    heads, and the kernel builds nothing again; the output is the full causal forward's last rows."""
    params, kw = decode_case(name, rng)
    heads = params["W_q"].shape[1] // (d_model // h)
    spec = an.AttentionSpec(window=kw.pop("spec", an.AttentionSpec()).window, kernel=kernel)
    x = randn(rng, B, L, d_model)
    cache = an.KVCache(L)
    first = {n: (a[..., :4, :4] if n == "bias" else a[..., :4]) for n, a in kw.items()}
    step = {n: (a[..., 4:, :] if n == "bias" else a) for n, a in kw.items()}
    an.mha_decode_step(x[:, :4], params, cache, num_heads=heads, spec=spec, **first)
    for n in calls:
        calls[n] = 0
    out = an.mha_decode_step(x[:, 4:], params, cache, num_heads=heads, spec=spec, **step)
    # (the causal mask always masks: one drop)
    assert calls == {"plan_from": 1, "check_supports": 1, "whole_mask": 1, "mask_and_bias": 0,
                     "drop_masked": 1, "causal_mask": 1, "window_mask": int(spec.window is not None)}
    want, _ = an.mha_forward(x, x, x, params, kw.get("mask"), num_heads=heads, is_causal=True,
                             spec=an.AttentionSpec(window=spec.window), bias=kw.get("bias"))
    np.testing.assert_allclose(out, want[:, 4:], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["fused", "tiled", "reference"])
def test_a_cross_decode_step_builds_its_mask_once_and_keeps_padded_memory_out(rng, calls, kernel):
    """Cross-attention decoding on a memory whose padded positions hold NaN: one whole mask, one
    drop on the heads (the cache's keys are not changed), the output that of the clean memory."""
    params = an.init_mha_params(d_model, h, rng=0)
    spec = an.AttentionSpec(kernel=kernel)
    memory = randn(rng, B, L, d_model)
    memory[1, 3:] = np.nan
    mask = an.padding_mask(np.array([6, 3]))[:, None]                  # (B, 1, 1, S)
    cache = an.cross_kv_cache(memory, params, num_heads=h, spec=spec)
    held = cache.k.copy()
    for n in calls:
        calls[n] = 0
    x = randn(rng, B, 2, d_model)
    out = an.mha_cross_decode_step(x, params, cache, num_heads=h, spec=spec, mask=mask)
    assert calls["whole_mask"] == 1 and calls["mask_and_bias"] == 0 and calls["drop_masked"] == 1
    np.testing.assert_array_equal(cache.k, held)
    clean = np.where(np.isnan(memory), 0.0, memory)
    want, _ = an.mha_forward(x, clean, clean, params, mask, num_heads=h)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
