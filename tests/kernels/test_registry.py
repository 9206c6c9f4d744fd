"""One case matrix, every kernel of the registry: each computation of Eq. (1) against
the paper's code for what the paper has, and against a by-definition oracle written here (torch
float64 autograd) for every variant the kernel claims. A kernel refuses what it cannot do, by name.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attention_np import paper
from attention_np.kernels import tiled
from attention_np.kernels.plan import Plan
from attention_np.kernels.registry import KERNELS, attend, attend_backward, check_supports
from attention_np.variants.spec import KERNEL_NAMES
from tests.helpers import assert_float32_within_framework, max_abs_diff, randn, require

# the registry's kernels, and the tiled one again with tiles smaller than the sequences
RUNS = dict(KERNELS)
RUNS["tiled-3"] = dataclasses.replace(KERNELS["tiled"], forward=lambda q, k, v, p: tiled.tiled_plan(
    q, k, v, p, block_size=3))


def test_the_spec_names_every_registered_kernel():
    assert sorted(KERNEL_NAMES) == sorted(KERNELS)


# --- the paper's options: every kernel equals attention_np.paper to float64 rounding -----------

def _paper_case(rng, name):
    """q, k, v and the paper's options (mask, is_causal, scale) of one case."""
    B, H, L, S, d_k, d_v = 2, 3, 5, 7, 4, 6
    q, k, v = randn(rng, B, H, L, d_k), randn(rng, B, H, S, d_k), randn(rng, B, H, S, d_v)
    opts = {}
    if name == "mask":
        mask = rng.random((B, 1, L, S)) > 0.4
        mask[0, 0, 2] = False                                 # a fully masked query row
        opts["mask"] = mask
    elif name == "causal":
        opts["is_causal"] = True
    elif name == "causal_L_gt_S":
        q = randn(rng, B, H, 9, d_k)
        opts["is_causal"] = True                              # rows 7, 8 see keys 0..6; none empty
    elif name == "scale":
        opts["scale"] = 0.37
    elif name == "broadcast_batch":
        k, v = randn(rng, 1, H, S, d_k), randn(rng, S, d_v)   # batch dims broadcast, summed back
    elif name == "one_query":
        q = randn(rng, B, H, 1, d_k)
    elif name == "mask_and_causal":
        opts.update(mask=rng.random((L, S)) > 0.3, is_causal=True)
    return q, k, v, opts


PAPER_CASES = ["plain", "mask", "causal", "causal_L_gt_S", "scale", "broadcast_batch", "one_query",
               "mask_and_causal"]


@pytest.mark.parametrize("case", PAPER_CASES)
@pytest.mark.parametrize("kernel", sorted(RUNS))
def test_every_kernel_equals_the_paper(rng, kernel, case):
    q, k, v, opts = _paper_case(rng, case)
    want, cache = paper.sdpa_forward(q, k, v, opts.get("mask"), is_causal=opts.get("is_causal", False),
                                     scale=opts.get("scale"))
    dout = randn(rng, *want.shape)
    want_grads = paper.sdpa_backward(dout, cache)
    kern = RUNS[kernel]
    out, kcache = kern.forward(q, k, v, Plan(**opts))
    got_grads = kern.backward(dout, kcache).qkv
    assert max_abs_diff(out, want) < 1e-13 * max(1.0, np.abs(want).max())
    for name, got, w, x in zip("qkv", got_grads, want_grads, (q, k, v), strict=True):
        assert got.shape == x.shape, name
        assert max_abs_diff(got, w) < 1e-12, f"d{name}"


@pytest.mark.float32
@pytest.mark.parametrize("case", ["mask", "causal", "broadcast_batch"])
@pytest.mark.parametrize("kernel", sorted(RUNS))
def test_every_kernel_in_float32_is_held_to_the_rule_against_torch(rng, kernel, case):
    torch = require("torch")
    q, k, v, opts = _paper_case(rng, case)
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    dout = randn(rng, *(q.shape[:-1] + (v.shape[-1],)), dtype=np.float32)
    kern = RUNS[kernel]
    out, kcache = kern.forward(q, k, v, Plan(**opts))
    assert out.dtype == np.float32
    ours = (out, *kern.backward(dout, kcache).qkv)
    oracle = _torch_oracle(torch, q, k, v, dout, opts, torch.float64)
    theirs = _torch_oracle(torch, q, k, v, dout, opts, torch.float32)
    for name, o, t, w in zip(("out", "dq", "dk", "dv"), ours, theirs, oracle, strict=True):
        assert_float32_within_framework(o, t, w, name=f"{kernel} {case} {name}")


# --- the variants: every kernel that claims one equals a by-definition oracle -----------------

def _torch_oracle(torch, q, k, v, dout, opts, dtype):
    """Eq. (1) with every variant, written from the definitions in torch (autograd for the
    gradients): scores = QKᵀ·scale, soft-capped, + bias, masked (causal, window, mask), with a
    sink column in the softmax, grouped heads by repeat_interleave; returns out and gradients."""
    t = {n: torch.tensor(np.asarray(x), dtype=dtype, requires_grad=True)
         for n, x in (("q", q), ("k", k), ("v", v), ("bias", opts.get("bias")),
                      ("sinks", opts.get("sinks"))) if x is not None}
    qt, kt, vt = t["q"], t["k"], t["v"]
    if opts.get("enable_gqa"):
        g = qt.shape[-3] // kt.shape[-3]
        kt, vt = kt.repeat_interleave(g, dim=-3), vt.repeat_interleave(g, dim=-3)
    L, S = qt.shape[-2], kt.shape[-2]
    scale = opts.get("scale") or 1 / np.sqrt(qt.shape[-1])
    scores = qt @ kt.transpose(-1, -2) * scale
    if opts.get("softcap"):
        c = opts["softcap"]
        scores = c * torch.tanh(scores / c)
    if "bias" in t:
        scores = scores + t["bias"]
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    allowed = np.ones((L, S), bool)
    if opts.get("is_causal"):
        allowed &= j <= i
    if opts.get("window"):
        left, right = opts["window"]
        allowed &= (left is None or j >= i - left) & (right is None or j <= i + right)
    if opts.get("mask") is not None:
        allowed = allowed & opts["mask"]
    scores = scores.masked_fill(~torch.tensor(np.broadcast_to(allowed, scores.shape)), float("-inf"))
    if "sinks" in t:
        sink = t["sinks"][:, None, None].expand(*scores.shape[:-1], 1)
        scores = torch.cat([scores, sink], dim=-1)
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)[..., :S]                # an empty row gives 0
    out = weights @ vt
    out.backward(torch.tensor(dout, dtype=dtype))
    grads = {n: x.grad.numpy() for n, x in t.items()}
    return (out.detach().numpy(), grads["q"], grads["k"], grads["v"]) + tuple(
        grads[n] for n in ("bias", "sinks") if n in grads)


def _variant_case(rng, variant):
    B, H, L, S, d = 2, 4, 6, 8, 4
    q, k, v = randn(rng, B, H, L, d), randn(rng, B, H, S, d), randn(rng, B, H, S, 3)
    opts = {"is_causal": variant != "bias"}
    if variant == "bias":
        opts["bias"] = randn(rng, H, L, S)
    elif variant == "window":
        opts["window"] = (2, None)
    elif variant == "softcap":
        opts["softcap"] = 1.5
        q = 3 * q                                             # scores that the cap bends
    elif variant == "gqa":
        k, v = randn(rng, B, 2, S, d), randn(rng, B, 2, S, 3)
        opts["enable_gqa"] = True
    elif variant == "sinks":
        opts["sinks"] = randn(rng, H)
    elif variant == "all":
        k, v = randn(rng, B, 2, S, d), randn(rng, B, 2, S, 3)
        opts.update(bias=randn(rng, B, 1, L, S), window=(3, 0), softcap=2.0, enable_gqa=True,
                    sinks=randn(rng, H), mask=rng.random((B, 1, 1, S)) > 0.2)
    return q, k, v, opts


VARIANTS = ["bias", "window", "softcap", "gqa", "sinks", "all"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kernel", sorted(RUNS))
def test_every_kernel_equals_the_definition_for_each_variant_it_claims(rng, kernel, variant):
    torch = require("torch")
    q, k, v, opts = _variant_case(rng, variant)
    plan, kern = Plan(**opts), RUNS[kernel]
    if not set(plan.options()) <= kern.supports:
        with pytest.raises(ValueError, match="cannot do " + next(
                n for n in plan.options() if n not in kern.supports)):
            check_supports(kern, plan)
        return
    dout = randn(rng, *(q.shape[:-1] + (v.shape[-1],)))
    want = _torch_oracle(torch, q, k, v, dout, opts, torch.float64)
    out, cache = kern.forward(q, k, v, plan)
    grads = kern.backward(dout, cache)
    got = [out, *grads.qkv] + [getattr(grads, "d" + n) for n in ("bias", "sinks")
                               if opts.get(n) is not None]
    names = ["out", "dq", "dk", "dv"] + [f"d{n}" for n in ("bias", "sinks") if opts.get(n) is not None]
    for name, g, w in zip(names, got, want, strict=True):
        assert g.shape == w.shape, name
        assert max_abs_diff(g, w) < 1e-12, name


@pytest.mark.parametrize("kernel,option", [("reference", "softcap"), ("reference", "gqa"),
                                           ("reference", "sinks"), ("reference", "dropout"),
                                           ("tiled", "dropout")])
def test_a_kernel_refuses_an_option_it_cannot_do_by_name(rng, kernel, option):
    q, k, v, _ = _variant_case(rng, "gqa" if option == "gqa" else "bias")
    plan = Plan(**{"softcap": dict(softcap=1.0), "gqa": dict(enable_gqa=True),
                   "sinks": dict(sinks=np.zeros(4)), "dropout": dict(dropout_p=0.1, rng=0)}[option])
    with pytest.raises(ValueError, match=f"kernel '{kernel}' cannot do {option}"):
        attend(kernel, q, k, v, plan)


def test_fused_refuses_sinks_with_dropout(rng):
    q, k, v, _ = _variant_case(rng, "bias")
    with pytest.raises(ValueError, match="cannot combine sinks with dropout"):
        attend("fused", q, k, v, Plan(sinks=np.zeros(4), dropout_p=0.1, rng=0))


def test_attend_keeps_its_kernel_for_the_backward(rng):
    q, k, v, opts = _paper_case(rng, "mask")
    dout = randn(rng, *(q.shape[:-1] + (v.shape[-1],)))
    by_kernel = {}
    for name in KERNELS:
        out, cache = attend(name, q, k, v, Plan(**opts))
        assert cache.kernel == name
        by_kernel[name] = (out, *attend_backward(dout, cache).qkv)
    for name in ("fused", "tiled"):
        for got, want in zip(by_kernel[name], by_kernel["reference"], strict=True):
            assert max_abs_diff(got, want) < 1e-12


