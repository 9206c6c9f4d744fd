"""The matrix of cases that ``python -m attention_np diff`` runs against each framework.

Each case draws float64 inputs from a seeded generator; the runner casts them to the dtype
under test. ``kind`` says which call is diffed: ``"sdpa"`` (Eq. (1) on ``(B, H, L, d)`` arrays:
torch's ``scaled_dot_product_attention``, ``jax.nn.dot_product_attention``) or ``"mha"``
(§3.2.2 with weights: torch's ``nn.MultiheadAttention``, Flax's ``MultiHeadDotProductAttention``).
No case has a fully masked query row: that is a known difference, shown on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attention_np.compose.mha import init_mha_params
from attention_np.paper.masks import causal_mask, padding_mask


@dataclass(frozen=True)
class Case:
    name: str
    kind: str                        # "sdpa" or "mha"
    frameworks: tuple                # the frameworks that can express it
    build: Callable                  # rng -> dict of float64 inputs and options
    cannot: tuple = ()               # (framework, why) for the frameworks that cannot express it


def _qkv(rng, B=2, H=2, L=6, S=6, d_k=8, d_v=8, H_kv=None):
    H_kv = H if H_kv is None else H_kv
    return {"q": rng.standard_normal((B, H, L, d_k)), "k": rng.standard_normal((B, H_kv, S, d_k)),
            "v": rng.standard_normal((B, H_kv, S, d_v))}


def _random_mask(rng, shape):
    mask = rng.random(shape) < 0.6
    mask[..., 0] = True              # every query keeps at least one key: no fully masked row
    return mask


def _sdpa(**options):
    def build(rng):
        shape = {k: options[k] for k in ("B", "H", "L", "S", "d_k", "d_v", "H_kv") if k in options}
        inputs = _qkv(rng, **shape)
        L, S = inputs["q"].shape[-2], inputs["k"].shape[-2]
        inputs.update(mask=None, bias=None, is_causal=options.get("is_causal", False),
                      align=options.get("align"))
        if options.get("align") == "bottom_right":
            inputs["mask"] = causal_mask(L, S, align="bottom_right")
        if options.get("mask") == "random":
            inputs["mask"] = _random_mask(rng, (inputs["q"].shape[0], 1, L, S))
        if options.get("mask") == "padding":
            inputs["mask"] = padding_mask([S, S - 2])[:, None]            # (B, 1, 1, S)
        if options.get("bias"):
            inputs["bias"] = rng.standard_normal((1, inputs["q"].shape[1], L, S))
        return inputs
    return build


def _mha(d_model=8, num_heads=2, L=5, S=5, kdim=None, vdim=None, d_k=None, bias=True, mask=None):
    def build(rng):
        B = 2
        params = init_mha_params(d_model, num_heads, d_k=d_k, d_v=d_k, kdim=kdim, vdim=vdim,
                                 bias=bias, rng=rng)
        for name in params:
            if name.startswith("b"):             # zero biases would hide a mis-placed bias
                params[name] = 0.1 * rng.standard_normal(params[name].shape)
        query = rng.standard_normal((B, L, d_model))
        if kdim is None and vdim is None and L == S:
            key = value = query                  # self-attention: one array, three roles
        else:
            key = rng.standard_normal((B, S, kdim or d_model))
            value = rng.standard_normal((B, S, vdim or d_model))
        m = None
        if mask == "padding":
            m = padding_mask([S, S - 2])[:, None]                          # (B, 1, 1, S)
        elif mask == "causal":
            m = causal_mask(L, S)
        return {"query": query, "key": key, "value": value, "params": params,
                "num_heads": num_heads, "mask": m}
    return build


SDPA = ("torch", "jax")
MHA = ("torch", "flax")

CASES = (
    Case("sdpa self-attention", "sdpa", SDPA, _sdpa()),
    Case("sdpa cross L=5 S=7", "sdpa", SDPA, _sdpa(L=5, S=7)),
    Case("sdpa d_k=8 d_v=6", "sdpa", ("torch",), _sdpa(L=5, S=7, d_v=6),
         cannot=(("jax", "jax.nn.dot_product_attention needs d_k == d_v"),)),
    Case("sdpa bool mask", "sdpa", SDPA, _sdpa(L=5, S=7, mask="random")),
    Case("sdpa causal top-left L<S", "sdpa", SDPA, _sdpa(L=5, S=7, is_causal=True)),
    Case("sdpa causal top-left L>S", "sdpa", SDPA, _sdpa(L=7, S=5, is_causal=True)),
    Case("sdpa causal bottom-right", "sdpa", SDPA, _sdpa(L=5, S=7, align="bottom_right")),
    Case("sdpa bias + padding", "sdpa", SDPA, _sdpa(L=5, S=7, mask="padding", bias=True)),
    Case("sdpa GQA 4q/2kv heads", "sdpa", SDPA, _sdpa(H=4, H_kv=2, L=5, S=7)),
    Case("mha self-attention", "mha", MHA, _mha()),
    Case("mha cross kdim/vdim L!=S", "mha", MHA, _mha(L=5, S=7, kdim=6, vdim=4)),
    Case("mha key padding", "mha", MHA, _mha(L=5, S=7, kdim=8, vdim=8, mask="padding")),
    Case("mha causal", "mha", MHA, _mha(mask="causal")),
    Case("mha no bias", "mha", MHA, _mha(bias=False)),
    Case("mha d_k=6 != d_model/h", "mha", ("flax",), _mha(d_k=6),
         cannot=(("torch", "nn.MultiheadAttention's head width is embed_dim // num_heads"),)),
)
