r"""The paper's whole model, §3: an encoder-decoder Transformer.

    src (B, S) -> embed · sqrt(d_model) + PE -> N × encoder layer             -> memory (B, S, d)
    tgt_in (B, T) -> embed · sqrt(d_model) + PE -> N × decoder layer(memory)  -> h (B, T, d)
    logits = h @ W_out + b_out                                                      (B, T, V)

``tgt_in`` is the target shifted right (``<bos>`` first); the logits at position ``i``
predict target token ``i``. §3.4: "we share the same weight matrix between the two embedding
layers and the pre-softmax linear transformation": ``share_embeddings`` uses one ``"embed"``
for source and target (one vocabulary), ``tie_output`` makes ``W_out = embed.T``.

Params are one flat dict: ``"src_embed"``, ``"tgt_embed"`` (or ``"embed"`` when shared),
``"encoder.{n}.attn.W_q"`` ..., ``"decoder.{n}.self_attn.W_q"`` ..., ``"W_out"`` (unless tied),
``"b_out"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_bool_mask,
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
    check_probability,
    check_rng,
    check_str,
)
from attention_np.compose.mha import init_mha_params
from attention_np.kernels.fast_linear import linear_backward, linear_forward
from attention_np.nn.decoder import (
    decoder_layer_backward,
    decoder_layer_forward,
    dropout_backward,
    dropout_forward,
    init_decoder_layer_params,
)
from attention_np.nn.embedding import EmbeddingCache, embedding_backward, embedding_forward
from attention_np.nn.encoder import encoder_layer_backward, encoder_layer_forward, sub
from attention_np.nn.feedforward import ACTIVATIONS, init_ffn_params
from attention_np.nn.model import layer_shapes
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.paper.params import glorot_uniform


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes of the encoder-decoder (the defaults learn the dates task, see :mod:`.dates`)."""

    src_vocab: int
    tgt_vocab: int
    max_src_len: int = 32
    max_tgt_len: int = 16
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    share_embeddings: bool = False
    tie_output: bool = False
    dropout_p: float = 0.0
    activation: str = "relu"

    def __post_init__(self):
        check_fields(self, {"src_vocab": check_count, "tgt_vocab": check_count,
                            "max_src_len": check_count, "max_tgt_len": check_count,
                            "d_model": check_count, "num_heads": check_count, "d_ff": check_count,
                            "num_encoder_layers": check_count, "num_decoder_layers": check_count,
                            "share_embeddings": check_flag, "tie_output": check_flag,
                            "dropout_p": lambda p, name: check_probability(p, name, high_open=True),
                            "activation": lambda a, name: check_choice(a, name, sorted(ACTIVATIONS))})
        if self.d_model % 2:
            raise ValueError(f"Seq2SeqConfig.d_model must be even (the §3.5 sinusoids come in "
                             f"sin/cos pairs), got {self.d_model}")
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"share_embeddings needs src_vocab == tgt_vocab, got "
                             f"{self.src_vocab} and {self.tgt_vocab}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")


def embed_names(config: Seq2SeqConfig) -> tuple[str, str]:
    """The param names of the source and target embeddings (the same one when shared)."""
    check_instance(config, Seq2SeqConfig, "config")
    return ("embed", "embed") if config.share_embeddings else ("src_embed", "tgt_embed")


def init_seq2seq(config: Seq2SeqConfig, *, rng=None, dtype=np.float64) -> dict:
    """Random params: Glorot-uniform matrices, N(0, d_model^-1/2) embeddings, LN gamma=1, beta=0.

    Parameters
    ----------
    config : Seq2SeqConfig
    rng : int seed or np.random.Generator, optional
    dtype : float dtype of every array
    """
    check_instance(config, Seq2SeqConfig, "config")
    check_rng(rng)
    dtype = check_float_dtype(dtype)
    rng, c = as_generator(rng), config
    src, tgt = embed_names(c)
    params = {src: rng.normal(0.0, c.d_model ** -0.5, size=(c.src_vocab, c.d_model))}
    if tgt not in params:
        params[tgt] = rng.normal(0.0, c.d_model ** -0.5, size=(c.tgt_vocab, c.d_model))
    for n in range(c.num_encoder_layers):
        params.update({f"encoder.{n}.attn.{k}": v
                       for k, v in init_mha_params(c.d_model, c.num_heads, rng=rng).items()})
        params.update({f"encoder.{n}.ffn.{k}": v
                       for k, v in init_ffn_params(c.d_model, c.d_ff, rng=rng).items()})
        for ln in ("ln1", "ln2"):
            params[f"encoder.{n}.{ln}.gamma"] = np.ones(c.d_model)
            params[f"encoder.{n}.{ln}.beta"] = np.zeros(c.d_model)
    for n in range(c.num_decoder_layers):
        params.update({f"decoder.{n}.{k}": v for k, v in
                       init_decoder_layer_params(c.d_model, c.num_heads, c.d_ff, rng=rng).items()})
    if not c.tie_output:
        params["W_out"] = glorot_uniform(rng, c.d_model, c.tgt_vocab)
    params["b_out"] = np.zeros(c.tgt_vocab)
    return {k: v.astype(dtype) for k, v in params.items()}


def seq2seq_param_shapes(config: Seq2SeqConfig) -> dict:
    """``{key: shape}`` of the params :func:`init_seq2seq` makes for ``config``."""
    c = check_instance(config, Seq2SeqConfig, "config")
    src, tgt = embed_names(c)
    shapes = {src: (c.src_vocab, c.d_model), tgt: (c.tgt_vocab, c.d_model)}
    for n in range(c.num_encoder_layers):
        shapes.update(layer_shapes(f"encoder.{n}", c.d_model, c.d_ff))
    for n in range(c.num_decoder_layers):
        shapes.update(layer_shapes(f"decoder.{n}", c.d_model, c.d_ff, ("self_attn", "cross_attn"),
                                   ("ln1", "ln2", "ln3")))
    if not c.tie_output:
        shapes["W_out"] = (c.d_model, c.tgt_vocab)
    shapes["b_out"] = (c.tgt_vocab,)
    return shapes


def check_model(params, config) -> Seq2SeqConfig:
    """``config`` is a :class:`Seq2SeqConfig` and ``params`` are its params (keys, shapes, one dtype)."""
    c = check_instance(config, Seq2SeqConfig, "config")
    check_params_shapes(params, seq2seq_param_shapes(c), against="config")
    return c


def _check_tokens(tokens, name, max_len, vocab):
    tokens = check_ids(tokens, name, vocab, ndim=2, layout="(B, L)", what=f"vocabulary of {vocab}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} has length {tokens.shape[1]} > max length {max_len}")
    if tokens.shape[1] < 1:
        raise ValueError(f"{name} must have at least one position, got shape {tokens.shape}")
    return tokens


def check_src_mask(src_mask, src: np.ndarray):
    """``src_mask`` is None or a bool ``(B, S)`` of the shape of ``src``; returned as ``(B, 1, 1, S)``."""
    if src_mask is None:
        return None
    src_mask = as_bool_mask(src_mask, "src_mask")
    if src_mask.shape != src.shape:
        raise ValueError(f"src_mask must have the shape of src {src.shape}, got {src_mask.shape}")
    return src_mask[:, None, None, :]


def embed(params: dict, tokens: np.ndarray, name: str, config: Seq2SeqConfig, offset: int = 0):
    """``embed[tokens] * sqrt(d_model) + PE`` (§3.4, §3.5), positions from ``offset``."""
    check_instance(config, Seq2SeqConfig, "config")
    check_str(name, "name")
    if not isinstance(params, dict) or name not in params:
        raise ValueError(f"params has no embedding {name!r} (expected one of {list(embed_names(config))})")
    check_count(offset, "offset", minimum=0)
    x, cache = embedding_forward(tokens, params[name], scale=np.sqrt(config.d_model))  # (B, L, d)
    L = tokens.shape[-1]
    x += sinusoidal_encoding(offset + L, config.d_model, dtype=x.dtype)[offset:]
    return x, cache


def encode(params: dict, src, config: Seq2SeqConfig, *, src_mask=None, rng=None):
    """``src (B, S) -> memory (B, S, d_model)``, and the per-layer caches.

    ``src_mask`` is ``(B, S)`` bool, True at real tokens (False at padding).
    """
    c = check_model(params, config)
    src = _check_tokens(src, "src", c.max_src_len, c.src_vocab)
    mask = check_src_mask(src_mask, src)                                          # (B, 1, 1, S)
    check_rng(rng)
    x, emb = embed(params, src, embed_names(c)[0], c)
    x, keep = dropout_forward(x, c.dropout_p, rng)
    layers = []
    for n in range(c.num_encoder_layers):
        x, cache = encoder_layer_forward(x, sub(params, f"encoder.{n}"), num_heads=c.num_heads,
                                         mask=mask, activation=c.activation)
        layers.append(cache)
    return x, (emb, keep, layers)


@dataclass(frozen=True)
class Seq2SeqCache:
    enc: tuple              # (EmbeddingCache, dropout keep, [EncoderLayerCache])
    tgt_embedding: EmbeddingCache
    tgt_keep: object
    layers: list            # one DecoderLayerCache per decoder layer
    h: np.ndarray           # (B, T, d_model) the last decoder layer's output
    W_out: np.ndarray       # (d_model, V)
    config: Seq2SeqConfig

    @property
    def attention_weights(self) -> dict:
        """``{"encoder": [(B, h, S, S)], "decoder_self": [(B, h, T, T)], "cross": [(B, h, T, S)]}``."""
        return {"encoder": [layer.attn.weights for layer in self.enc[2]],
                "decoder_self": [layer.self_attn.weights for layer in self.layers],
                "cross": [layer.cross_attn.weights for layer in self.layers]}


def seq2seq_forward(params: dict, src, tgt_in, config: Seq2SeqConfig, *, src_mask=None,
                    is_causal: bool = True, rng=None):
    """``src (B, S), tgt_in (B, T) -> logits (B, T, tgt_vocab)``, and the cache for the backward.

    Parameters
    ----------
    params : dict from :func:`init_seq2seq` for ``config`` (keys and shapes are checked)
    src : int array (B, S)
    tgt_in : int array (B, T)
        The target shifted right.
    config : Seq2SeqConfig
    src_mask : bool array (B, S), optional
        True at real source tokens.
    is_causal : bool, the decoder's mask (False only for the causality probe)
    rng : seeds dropout when ``config.dropout_p > 0``
    """
    c = check_model(params, config)
    tgt_in = _check_tokens(tgt_in, "tgt_in", c.max_tgt_len, c.tgt_vocab)
    src = _check_tokens(src, "src", c.max_src_len, c.src_vocab)
    if src.shape[0] != tgt_in.shape[0]:
        raise ValueError(f"src has batch {src.shape[0]} but tgt_in has batch {tgt_in.shape[0]}")
    mmask = check_src_mask(src_mask, src)
    check_flag(is_causal, "is_causal")
    check_rng(rng)
    rng = as_generator(rng) if c.dropout_p else None
    memory, enc = encode(params, src, c, src_mask=src_mask, rng=rng)
    y, temb = embed(params, tgt_in, embed_names(c)[1], c)
    y, tkeep = dropout_forward(y, c.dropout_p, rng)
    layers = []
    for n in range(c.num_decoder_layers):
        y, cache = decoder_layer_forward(y, memory, sub(params, f"decoder.{n}"),
                                         num_heads=c.num_heads, memory_mask=mmask,
                                         is_causal=is_causal, dropout_p=c.dropout_p, rng=rng,
                                         activation=c.activation)
        layers.append(cache)
    W_out = params[embed_names(c)[1]].T if c.tie_output else params["W_out"]   # (d, V)
    logits = linear_forward(y, W_out, params["b_out"])                          # (B, T, V)
    return logits, Seq2SeqCache(enc, temb, tkeep, layers, y, W_out, c)


def seq2seq_backward(dlogits: np.ndarray, cache: Seq2SeqCache) -> dict:
    """Gradients of every param, keyed as the params.

    Parameters
    ----------
    dlogits : (B, T, V) float array, the gradient of the logits
    cache : Seq2SeqCache from :func:`seq2seq_forward`
    """
    check_cache(cache, Seq2SeqCache, "seq2seq_forward")
    c, cfg, grads = cache, cache.config, {}
    dlogits = check_dout(dlogits, c.h.shape[:-1] + (c.W_out.shape[1],), c.h.dtype, "dlogits", "logits")
    src_name, tgt_name = embed_names(cfg)
    # forward: logits = h @ W_out + b_out (W_out = embed.T when tied)
    dy, dW_out, grads["b_out"] = linear_backward(dlogits, c.h, c.W_out, True)   # (B, T, d)
    dmemory = 0.0
    for n in reversed(range(len(c.layers))):
        dy, dmem, g = decoder_layer_backward(dy, c.layers[n])
        dmemory = dmemory + dmem                  # every decoder layer reads the same memory
        grads.update({f"decoder.{n}.{k}": v for k, v in g.items()})
    # forward: y = dropout(embed[tgt_in] * sqrt(d) + PE)
    dtgt = embedding_backward(dropout_backward(dy, c.tgt_keep, cfg.dropout_p), c.tgt_embedding)
    emb, keep, layers = c.enc
    dx = dmemory
    for n in reversed(range(len(layers))):
        dx, g = encoder_layer_backward(dx, layers[n])
        grads.update({f"encoder.{n}.{k}": v for k, v in g.items()})
    dsrc = embedding_backward(dropout_backward(dx, keep, cfg.dropout_p), emb)
    # shared embeddings: one matrix used three times (source, target, tied output): grads add
    grads[src_name] = dsrc
    grads[tgt_name] = dtgt if tgt_name != src_name else dsrc + dtgt
    if cfg.tie_output:
        grads[tgt_name] = grads[tgt_name] + dW_out.T        # forward: W_out = embed.T
    else:
        grads["W_out"] = dW_out
    return grads
