r"""One decoder layer, §3.1: three sub-layers, each wrapped as ``LayerNorm(y + Dropout(Sublayer(y)))``.

1) masked multi-head self-attention over the target: position ``i`` sees positions ``j <= i``
   ("masking ... ensures that the predictions for position i can depend only on the known
   outputs at positions less than i", §3.1)
2) encoder-decoder attention: queries from the decoder, keys and values from the encoder
   output ``memory`` (§3.2.3, "every position in the decoder [can] attend over all positions
   in the input sequence")
3) the position-wise feed-forward network, Eq. (2)

Post-LN, as the paper and ``torch.nn.TransformerDecoderLayer(norm_first=False)``. Params are a
flat dict with the prefixes ``self_attn.``, ``ln1.``, ``cross_attn.``, ``ln2.``, ``ffn.``, ``ln3.``.
Residual dropout (§5.4, ``P_drop``) is optional; ``dropout_p=0`` (the default) is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_generator,
    check_array,
    check_cache,
    check_choice,
    check_count,
    check_dout,
    check_flag,
    check_float_dtype,
    check_number,
    check_probability,
    check_rng,
)
from attention_np.compose.mha import MHACache, init_mha_params, mha_backward, mha_forward
from attention_np.nn.encoder import check_layer_params, sub
from attention_np.nn.feedforward import ACTIVATIONS, FFNCache, ffn_backward, ffn_forward, init_ffn_params
from attention_np.nn.layernorm import LayerNormCache, layernorm_backward, layernorm_forward


def init_decoder_layer_params(d_model: int, num_heads: int, d_ff: int, *, rng=None,
                              dtype=np.float64) -> dict:
    """Glorot-uniform attention and FFN matrices, zero biases, LN gamma=1, beta=0."""
    check_count(d_model, "d_model")
    check_count(num_heads, "num_heads")
    check_count(d_ff, "d_ff")
    if d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model} (d_k = d_model / h)")
    check_rng(rng)
    dtype = check_float_dtype(dtype)
    rng = as_generator(rng)
    p = {}
    for prefix in ("self_attn", "cross_attn"):
        p.update({f"{prefix}.{k}": v for k, v in init_mha_params(d_model, num_heads, rng=rng).items()})
    p.update({f"ffn.{k}": v for k, v in init_ffn_params(d_model, d_ff, rng=rng).items()})
    for ln in ("ln1", "ln2", "ln3"):
        p[f"{ln}.gamma"], p[f"{ln}.beta"] = np.ones(d_model), np.zeros(d_model)
    return {k: v.astype(dtype) for k, v in p.items()}


def dropout_forward(x: np.ndarray, p: float, rng):
    """Inverted dropout: ``(x * keep / (1 - p), keep)``; ``keep`` is None when ``p == 0``."""
    x = check_array(x, "x")
    p = check_probability(p, "p", high_open=True)
    check_rng(rng)
    if not p:
        return x, None
    keep = as_generator(rng).random(x.shape) >= p                     # (..., L, d_model) bool
    return x * keep * x.dtype.type(1.0 / (1.0 - p)), keep


def dropout_backward(dy: np.ndarray, keep, p: float) -> np.ndarray:
    """forward: y = x * keep / (1 - p)  ->  dx = dy * keep / (1 - p)."""
    dy = check_array(dy, "dy")
    p = check_probability(p, "p", high_open=True)
    if keep is not None:
        keep = check_array(keep, "keep", kind="bool", shape=dy.shape, layout="the shape of dy")
    return dy if keep is None else dy * keep * dy.dtype.type(1.0 / (1.0 - p))


@dataclass(frozen=True)
class DecoderLayerCache:
    self_attn: MHACache
    ln1: LayerNormCache
    cross_attn: MHACache
    ln2: LayerNormCache
    ffn: FFNCache
    ln3: LayerNormCache
    keeps: tuple            # the three dropout masks (None without dropout)
    dropout_p: float


def decoder_layer_forward(y: np.ndarray, memory: np.ndarray, params: dict, *, num_heads: int,
                          tgt_mask=None, memory_mask=None, is_causal: bool = True,
                          dropout_p: float = 0.0, rng=None, activation: str = "relu",
                          eps: float = 1e-5):
    """``y (..., T, d_model), memory (..., S, d_model) -> (..., T, d_model)``.

    Parameters
    ----------
    y : (..., T, d_model)
        The target-side input (shifted right embeddings, or the previous layer's output).
    memory : (..., S, d_model)
        The encoder's output.
    params : dict from :func:`init_decoder_layer_params`
    num_heads : int
    tgt_mask : bool, broadcastable to (..., h, T, T), optional
        True = may attend; ANDed with the causal mask when ``is_causal``.
    memory_mask : bool, broadcastable to (..., h, T, S), optional
        E.g. ``(B, 1, 1, S)`` to hide the source's padding.
    is_causal : bool
        The mask of §3.2.3; ``False`` only for the causality probe.
    dropout_p, rng : residual dropout on each sub-layer's output (§5.4)

    Returns
    -------
    out : (..., T, d_model)
    cache : DecoderLayerCache
    """
    y = check_array(y, "y", min_ndim=2, layout="(..., T, d_model)")
    memory = check_array(memory, "memory", min_ndim=2, layout="(..., S, d_model)")
    if memory.shape[-1] != y.shape[-1] or memory.dtype != y.dtype:
        raise ValueError(f"memory {memory.shape} {memory.dtype} must have the d_model and dtype of "
                         f"y {y.shape} {y.dtype}")
    check_layer_params(params, y.shape[-1], y.dtype, ("self_attn", "cross_attn"), ("ln1", "ln2", "ln3"),
                       "init_decoder_layer_params")
    check_count(num_heads, "num_heads")
    check_flag(is_causal, "is_causal")
    check_probability(dropout_p, "dropout_p", high_open=True)
    check_rng(rng)
    check_choice(activation, "activation", sorted(ACTIVATIONS))
    check_number(eps, "eps", low=0)
    # 1) masked self-attention: query = key = value = y
    a1, sa = mha_forward(y, y, y, sub(params, "self_attn"), num_heads=num_heads, mask=tgt_mask,
                         is_causal=is_causal)
    a1, k1 = dropout_forward(a1, dropout_p, rng)
    y1, ln1 = layernorm_forward(y + a1, params["ln1.gamma"], params["ln1.beta"], eps=eps)
    # 2) encoder-decoder attention: query = y1, key = value = memory
    a2, ca = mha_forward(y1, memory, memory, sub(params, "cross_attn"), num_heads=num_heads,
                         mask=memory_mask)
    a2, k2 = dropout_forward(a2, dropout_p, rng)
    y2, ln2 = layernorm_forward(y1 + a2, params["ln2.gamma"], params["ln2.beta"], eps=eps)
    # 3) feed-forward
    f, ffn = ffn_forward(y2, sub(params, "ffn"), activation=activation)
    f, k3 = dropout_forward(f, dropout_p, rng)
    y3, ln3 = layernorm_forward(y2 + f, params["ln3.gamma"], params["ln3.beta"], eps=eps)
    return y3, DecoderLayerCache(sa, ln1, ca, ln2, ffn, ln3, (k1, k2, k3), dropout_p)


def decoder_layer_backward(dy3: np.ndarray, cache: DecoderLayerCache):
    """Backward of :func:`decoder_layer_forward`: ``(dy, dmemory, grads)``, grads keyed as the params."""
    check_cache(cache, DecoderLayerCache, "decoder_layer_forward")
    c, grads, p = cache, {}, cache.dropout_p
    dy3 = check_dout(dy3, c.ln3.xhat.shape, c.ln3.xhat.dtype, "dy3", "the output of decoder_layer_forward")
    k1, k2, k3 = c.keeps
    # 3) forward: y3 = LN3(y2 + dropout(f)), f = FFN(y2)
    dsum3, grads["ln3.gamma"], grads["ln3.beta"] = layernorm_backward(dy3, c.ln3)
    dy2, g = ffn_backward(dropout_backward(dsum3, k3, p), c.ffn)
    dy2 = dy2 + dsum3                                    # the residual carries dsum3 unchanged
    grads.update({f"ffn.{k}": v for k, v in g.items()})
    # 2) forward: y2 = LN2(y1 + dropout(a2)), a2 = MHA(y1, memory, memory)
    dsum2, grads["ln2.gamma"], grads["ln2.beta"] = layernorm_backward(dy2, c.ln2)
    dquery, dkey, dvalue, g = mha_backward(dropout_backward(dsum2, k2, p), c.cross_attn)
    dy1 = dquery + dsum2
    dmemory = dkey + dvalue                              # memory feeds both keys and values
    grads.update({f"cross_attn.{k}": v for k, v in g.items()})
    # 1) forward: y1 = LN1(y + dropout(a1)), a1 = MHA(y, y, y): four paths into y add
    dsum1, grads["ln1.gamma"], grads["ln1.beta"] = layernorm_backward(dy1, c.ln1)
    dquery, dkey, dvalue, g = mha_backward(dropout_backward(dsum1, k1, p), c.self_attn)
    dy = dquery + dkey + dvalue + dsum1
    grads.update({f"self_attn.{k}": v for k, v in g.items()})
    return dy, dmemory, grads
