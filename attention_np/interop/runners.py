"""Run one diff case forward and backward on each side, returning every array in our layout.

Every runner takes the case's inputs (already in the dtype under test) and the upstream
gradient ``dout``, and returns ``{"out": ..., "dq": ...}`` (``kind="sdpa"``) or
``{"out": ..., "dquery": ..., "dW_q": ...}`` (``kind="mha"``) as NumPy arrays, so that the
comparison never needs to know which framework produced them. Frameworks are imported inside
the runners.
"""

from __future__ import annotations

import contextlib

import numpy as np

from attention_np.compose.mha import mha_backward, mha_forward
from attention_np.interop import flax as iflax
from attention_np.interop import jax as ijax
from attention_np.interop import torch as itorch
from attention_np.kernels.fused import sdpa_backward, sdpa_forward
from attention_np.variants.spec import AttentionSpec

FLOATS = ("q", "k", "v", "bias", "query", "key", "value")


def cast(inputs: dict, dtype) -> dict:
    """The case's float arrays (and params) in ``dtype``; masks and options unchanged."""
    out = dict(inputs)
    for name in FLOATS:
        if out.get(name) is not None:
            out[name] = np.asarray(out[name]).astype(dtype)
    if "params" in out:
        out["params"] = {n: p.astype(dtype) for n, p in out["params"].items()}
    return out


def run_ours(kind: str, x: dict, dout) -> dict:
    if kind == "sdpa":
        # spec.enable_gqa for the grouped-query case (k, v with fewer heads); with as many heads
        # as q it changes nothing. Every SDPA case is (B, H, L, d), so there is a head axis.
        out, cache = sdpa_forward(x["q"], x["k"], x["v"], x["mask"], bias=x["bias"],
                                  is_causal=x["is_causal"], spec=AttentionSpec(enable_gqa=True))
        dq, dk, dv = sdpa_backward(dout, cache)
        return {"out": out, "dq": dq, "dk": dk, "dv": dv}
    out, cache = mha_forward(x["query"], x["key"], x["value"], x["params"],
                             num_heads=x["num_heads"], mask=x["mask"])
    dquery, dkey, dvalue, grads = mha_backward(dout, cache)
    return {"out": out, "dquery": dquery, "dkey": dkey, "dvalue": dvalue,
            **{f"d{name}": g for name, g in grads.items()}}


def run_torch(kind: str, x: dict, dout) -> dict:
    import torch

    if kind == "sdpa":
        from torch.nn.attention.bias import causal_lower_right

        H, H_kv = x["q"].shape[-3], x["k"].shape[-3]
        kw = itorch.to_torch_sdpa(x["q"], x["k"], x["v"], x["mask"], bias=x["bias"],
                                  is_causal=x["is_causal"], enable_gqa=H_kv != H)
        if x.get("align") == "bottom_right":         # torch's own bottom-right causal mask
            kw["attn_mask"] = causal_lower_right(x["q"].shape[-2], x["k"].shape[-2])
        leaves = [kw[n].requires_grad_() for n in ("query", "key", "value")]
        out = torch.nn.functional.scaled_dot_product_attention(**kw)
        out.backward(torch.from_numpy(np.ascontiguousarray(dout)))
        return {"out": itorch.to_numpy(out), "dq": itorch.to_numpy(leaves[0].grad),
                "dk": itorch.to_numpy(leaves[1].grad), "dv": itorch.to_numpy(leaves[2].grad)}
    module = itorch.params_to_torch_mha(x["params"], x["num_heads"], batch_first=True)
    masks = itorch.masks_to_torch_mha(x["mask"], num_heads=x["num_heads"],
                                      batch_size=x["query"].shape[0])
    # need_weights=True (torch's default path)
    out, _, (dquery, dkey, dvalue), grads = itorch.mha_forward_backward(
        module, x["query"], x["key"], x["value"], dout, **masks)
    return {"out": out, "dquery": dquery, "dkey": dkey, "dvalue": dvalue,
            **{f"d{name}": g for name, g in grads.items()}}


def _precision(dtype):
    """float64 needs JAX's x64 mode, switched on for this call only."""
    return ijax.x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


def run_jax(kind: str, x: dict, dout) -> dict:
    if kind != "sdpa":
        raise ValueError("jax has no multi-head module: diff MHA with flax")
    with _precision(x["q"].dtype):
        out, dq, dk, dv = ijax.forward_backward(x["q"], x["k"], x["v"], dout, x["mask"],
                                                bias=x["bias"], is_causal=x["is_causal"])
    return {"out": out, "dq": dq, "dk": dk, "dv": dv}


def run_flax(kind: str, x: dict, dout) -> dict:
    if kind != "mha":
        raise ValueError("flax is diffed on its multi-head module; diff SDPA with jax")
    with _precision(x["query"].dtype):
        module, variables = iflax.flax_mha(x["params"], x["num_heads"])
        out, (dquery, dkey, dvalue), grads = iflax.forward_backward(
            module, variables, x["query"], x["key"], x["value"], dout, x["mask"])
    return {"out": out, "dquery": dquery, "dkey": dkey, "dvalue": dvalue,
            **{f"d{name}": g for name, g in grads.items()}}


RUNNERS = {"torch": run_torch, "jax": run_jax, "flax": run_flax}
