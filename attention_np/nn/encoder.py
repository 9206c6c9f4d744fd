r"""One encoder layer, §3.1: two sub-layers, each wrapped as ``LayerNorm(x + Sublayer(x))``.

1) multi-head self-attention, §3.2.2 (:func:`attention_np.mha_forward`)
2) the position-wise feed-forward network, Eq. (2)

This "post-LN" arrangement is the paper's and BERT's. Params are a flat dict with the
prefixes ``attn.`` (keys of :func:`attention_np.init_mha_params`), ``ln1.``, ``ffn.``, ``ln2.``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    check_array,
    check_cache,
    check_choice,
    check_count,
    check_dout,
    check_number,
    check_params_dict,
    check_str,
)
from attention_np.compose.mha import MHACache, mha_backward, mha_forward
from attention_np.nn.feedforward import ACTIVATIONS, FFNCache, check_ffn_params, ffn_backward, ffn_forward
from attention_np.nn.layernorm import LayerNormCache, layernorm_backward, layernorm_forward


def sub(params: dict, prefix: str) -> dict:
    """The entries of a flat dict under ``prefix.``, with the prefix removed."""
    check_params_dict(params)
    check_str(prefix, "prefix")
    n = len(prefix) + 1
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix + ".")}


def check_layer_params(params, d_model: int, dtype, attns: tuple, norms: tuple, maker: str) -> None:
    """The params of one layer, before any work: the projections of each attention in ``attns``
    (``{a}.W_q`` ...; their shapes are checked by :func:`attention_np.mha_forward`), the FFN
    (``ffn.W_1 (d_model, d_ff)`` ...) and ``{n}.gamma, {n}.beta (d_model,)`` for each of ``norms``,
    all of ``dtype`` (the input's)."""
    check_params_dict(params)
    needed = [f"{a}.W_{w}" for a in attns for w in "qkvo"] + [
        f"{n}.{g}" for n in norms for g in ("gamma", "beta")]
    missing = [k for k in needed if k not in params]
    if missing:
        raise ValueError(f"params is missing {missing[:4]} (the layer's params come from {maker})")
    for key in needed:
        if key.split(".")[0] in norms and params[key].shape != (d_model,):
            raise ValueError(f"params[{key!r}] has shape {params[key].shape}, expected ({d_model},) "
                             f"(d_model from the input)")
        if params[key].dtype != dtype:
            raise TypeError(f"params[{key!r}] has dtype {params[key].dtype} but the input has dtype {dtype}")
    check_ffn_params(sub(params, "ffn"), d_model, dtype, name="params['ffn.*']")


@dataclass(frozen=True)
class EncoderLayerCache:
    attn: MHACache
    ln1: LayerNormCache
    ffn: FFNCache
    ln2: LayerNormCache


def encoder_layer_forward(x: np.ndarray, params: dict, *, num_heads: int, mask=None,
                          activation: str = "relu", eps: float = 1e-5):
    """``(..., L, d_model) -> (..., L, d_model)``.

    ``mask`` is the bool attention mask of :func:`attention_np.mha_forward` (True = attend),
    e.g. ``(B, 1, 1, L)`` for key padding.
    """
    x = check_array(x, "x", min_ndim=2, layout="(..., L, d_model)")
    check_layer_params(params, x.shape[-1], x.dtype, ("attn",), ("ln1", "ln2"), "init_mha_params, "
                       "init_ffn_params and LN gamma, beta")
    check_count(num_heads, "num_heads")
    check_choice(activation, "activation", sorted(ACTIVATIONS))
    check_number(eps, "eps", low=0)
    # 1) self-attention: query = key = value = x
    a, attn = mha_forward(x, x, x, sub(params, "attn"), num_heads=num_heads, mask=mask)
    x1, ln1 = layernorm_forward(x + a, params["ln1.gamma"], params["ln1.beta"], eps=eps)
    # 2) feed-forward, applied to every position alike
    f, ffn = ffn_forward(x1, sub(params, "ffn"), activation=activation)
    x2, ln2 = layernorm_forward(x1 + f, params["ln2.gamma"], params["ln2.beta"], eps=eps)
    return x2, EncoderLayerCache(attn, ln1, ffn, ln2)


def encoder_layer_backward(dx2: np.ndarray, cache: EncoderLayerCache):
    """Backward of :func:`encoder_layer_forward`: ``(dx, grads)``, grads keyed as the params."""
    check_cache(cache, EncoderLayerCache, "encoder_layer_forward")
    c, grads = cache, {}
    dx2 = check_dout(dx2, c.ln2.xhat.shape, c.ln2.xhat.dtype, "dx2", "the output of encoder_layer_forward")
    # forward: x2 = LN2(x1 + f)
    dsum2, grads["ln2.gamma"], grads["ln2.beta"] = layernorm_backward(dx2, c.ln2)
    # forward: f = FFN(x1); the residual carries dsum2 to x1 unchanged
    dx1, g = ffn_backward(dsum2, c.ffn)
    dx1 = dx1 + dsum2
    grads.update({f"ffn.{k}": v for k, v in g.items()})
    # forward: x1 = LN1(x + a)
    dsum1, grads["ln1.gamma"], grads["ln1.beta"] = layernorm_backward(dx1, c.ln1)
    # forward: a = MHA(x, x, x); x feeds query, key and value and the residual: four paths add
    dquery, dkey, dvalue, g = mha_backward(dsum1, c.attn)
    dx = dquery + dkey + dvalue + dsum1
    grads.update({f"attn.{k}": v for k, v in g.items()})
    return dx, grads
