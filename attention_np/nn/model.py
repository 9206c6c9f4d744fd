r"""A small Transformer encoder that maps a sequence of tokens to one prediction per position.

    tokens (B, L) -> embedding · sqrt(d_model) + PE      §3.4, §3.5     (B, L, d_model)
                  -> num_layers × encoder layer          §3.1, §3.2.2    (B, L, d_model)
                  -> x @ W_out + b_out                   output logits   (B, L, vocab)

Every prediction comes from the same position's vector, so the only way information can
move from position ``j`` to position ``i`` is through the attention weights: on a routing
task (reverse a sequence) the learned weights *are* the algorithm.

Params are one flat dict: ``"embed"``, ``"layers.{n}.attn.W_q"`` ..., ``"W_out"``, ``"b_out"``,
so the optimizer, the gradient check and ``np.savez`` treat every array alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_generator,
    check_cache,
    check_choice,
    check_count,
    check_dout,
    check_fields,
    check_flag,
    check_float_dtype,
    check_ids,
    check_instance,
    check_params_shapes,
    check_rng,
)
from attention_np.compose.mha import init_mha_params
from attention_np.kernels.fast_linear import linear_backward, linear_forward
from attention_np.nn.embedding import EmbeddingCache, embedding_backward, embedding_forward
from attention_np.nn.encoder import encoder_layer_backward, encoder_layer_forward, sub
from attention_np.nn.feedforward import ACTIVATIONS, init_ffn_params
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.paper.params import glorot_uniform


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the model (the defaults learn to reverse 10 digits, >= 99% held out, in ~600 steps)."""

    vocab_size: int = 10
    max_len: int = 10
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    num_layers: int = 2
    activation: str = "relu"
    positional: bool = True     # add the §3.5 sinusoids; False: order-blind (notebook 06)

    def __post_init__(self):
        check_fields(self, {"vocab_size": check_count, "max_len": check_count, "d_model": check_count,
                            "num_heads": check_count, "d_ff": check_count,
                            "num_layers": check_count,
                            "activation": lambda a, name: check_choice(a, name, sorted(ACTIVATIONS)),
                            "positional": check_flag})
        if self.d_model % self.num_heads:
            raise ValueError(f"ModelConfig.num_heads={self.num_heads} must divide "
                             f"ModelConfig.d_model={self.d_model} (d_k = d_model / h, §3.2.2)")
        if self.positional and self.d_model % 2:
            raise ValueError(f"ModelConfig.d_model must be even with positional=True (the sinusoids "
                             f"come in sin/cos pairs, §3.5), got {self.d_model}")


def layer_shapes(prefix: str, d_model: int, d_ff: int, attns=("attn",), norms=("ln1", "ln2")) -> dict:
    """``{key: shape}`` of one encoder (or decoder) layer's params under ``prefix.``, as
    :func:`attention_np.init_mha_params` and :func:`init_ffn_params` make them."""
    shapes = {}
    for a in attns:
        for w in "qkvo":
            shapes[f"{prefix}.{a}.W_{w}"] = (d_model, d_model)
            shapes[f"{prefix}.{a}.b_{w}"] = (d_model,)
    shapes.update({f"{prefix}.ffn.W_1": (d_model, d_ff), f"{prefix}.ffn.b_1": (d_ff,),
                   f"{prefix}.ffn.W_2": (d_ff, d_model), f"{prefix}.ffn.b_2": (d_model,)})
    for n in norms:
        shapes[f"{prefix}.{n}.gamma"] = shapes[f"{prefix}.{n}.beta"] = (d_model,)
    return shapes


def model_param_shapes(config: ModelConfig) -> dict:
    """``{key: shape}`` of the params :func:`init_model` makes for ``config``."""
    c = check_instance(config, ModelConfig, "config")
    shapes = {"embed": (c.vocab_size, c.d_model)}
    for n in range(c.num_layers):
        shapes.update(layer_shapes(f"layers.{n}", c.d_model, c.d_ff))
    shapes.update({"W_out": (c.d_model, c.vocab_size), "b_out": (c.vocab_size,)})
    return shapes


def init_model(config: ModelConfig, *, rng=None, dtype=np.float64) -> dict:
    """Random params: Glorot-uniform matrices, N(0, d_model^-1/2) embeddings, LN gamma=1, beta=0.

    Parameters
    ----------
    config : ModelConfig
    rng : int seed or np.random.Generator, optional
    dtype : float dtype of every array
    """
    check_instance(config, ModelConfig, "config")
    check_rng(rng)
    dtype = check_float_dtype(dtype)
    rng = as_generator(rng)
    c = config
    params = {"embed": rng.normal(0.0, c.d_model ** -0.5, size=(c.vocab_size, c.d_model))}
    for n in range(c.num_layers):
        for name, p in init_mha_params(c.d_model, c.num_heads, rng=rng).items():
            params[f"layers.{n}.attn.{name}"] = p
        for name, p in init_ffn_params(c.d_model, c.d_ff, rng=rng).items():
            params[f"layers.{n}.ffn.{name}"] = p
        for ln in ("ln1", "ln2"):
            params[f"layers.{n}.{ln}.gamma"] = np.ones(c.d_model)
            params[f"layers.{n}.{ln}.beta"] = np.zeros(c.d_model)
    params["W_out"] = glorot_uniform(rng, c.d_model, c.vocab_size)
    params["b_out"] = np.zeros(c.vocab_size)
    return {k: v.astype(dtype) for k, v in params.items()}


@dataclass(frozen=True)
class ModelCache:
    embedding: EmbeddingCache
    layers: list            # one EncoderLayerCache per layer
    h: np.ndarray           # (B, L, d_model) the last layer's output
    W_out: np.ndarray       # (d_model, vocab_size)
    config: ModelConfig

    @property
    def attention_weights(self) -> list:
        """One (B, num_heads, L, L) weight array per layer."""
        return [layer.attn.weights for layer in self.layers]


def model_forward(params: dict, tokens, config: ModelConfig):
    """``tokens (B, L) int -> logits (B, L, vocab_size)``, and the cache for the backward.

    Parameters
    ----------
    params : dict from :func:`init_model` for ``config`` (keys and shapes are checked)
    tokens : int array (..., L), usually (B, L)
        Ids in ``[0, vocab_size)``, ``1 <= L <= max_len``; any leading batch dims.
    config : ModelConfig
    """
    c = check_instance(config, ModelConfig, "config")
    check_params_shapes(params, model_param_shapes(c), against="config")
    tokens = check_ids(tokens, "tokens", c.vocab_size, min_ndim=1, layout="(..., L)",
                       what=f"vocabulary of vocab_size={c.vocab_size}")
    if tokens.shape[-1] > c.max_len or tokens.shape[-1] < 1:
        raise ValueError(f"tokens must be (..., L) with 1 <= L <= max_len={c.max_len}, "
                         f"got shape {tokens.shape}")
    L, dtype = tokens.shape[-1], params["embed"].dtype
    x, emb = embedding_forward(tokens, params["embed"], scale=np.sqrt(c.d_model))  # (B, L, d)
    if c.positional:
        x += sinusoidal_encoding(L, c.d_model, dtype=dtype)                       # §3.5
    layers = []
    for n in range(c.num_layers):
        x, cache = encoder_layer_forward(x, sub(params, f"layers.{n}"), num_heads=c.num_heads,
                                         activation=c.activation)
        layers.append(cache)
    logits = linear_forward(x, params["W_out"], params["b_out"])                  # (B, L, V)
    return logits, ModelCache(emb, layers, x, params["W_out"], c)


def model_backward(dlogits: np.ndarray, cache: ModelCache) -> dict:
    """Gradients of every param, keyed as the params.

    Parameters
    ----------
    dlogits : (B, L, V) float array, the gradient of the logits
    cache : ModelCache from :func:`model_forward`
    """
    check_cache(cache, ModelCache, "model_forward")
    c, grads = cache, {}
    dlogits = check_dout(dlogits, c.h.shape[:-1] + (c.W_out.shape[1],), c.h.dtype, "dlogits", "logits")
    # forward: logits = h @ W_out + b_out  ->  dh = dlogits @ W_out.T, dW_out = h.T @ dlogits
    dx, grads["W_out"], grads["b_out"] = linear_backward(dlogits, c.h, c.W_out, True)  # (B, L, d)
    for n in reversed(range(len(c.layers))):
        dx, g = encoder_layer_backward(dx, c.layers[n])
        grads.update({f"layers.{n}.{k}": v for k, v in g.items()})
    # forward: x = embed[tokens] * sqrt(d) + PE; PE is a constant, its gradient goes nowhere
    grads["embed"] = embedding_backward(dx, c.embedding)
    return grads

