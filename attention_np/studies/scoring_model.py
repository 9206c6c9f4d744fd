r"""The encoder of :mod:`attention_np.nn.model` with a pluggable attention scoring function.

    tokens (B, L) -> embedding · sqrt(d_model) + PE                         (B, L, d_model)
                  -> num_layers × [LN(x + MHA_scoring(x)), LN(x + FFN(x))]   (B, L, d_model)
                  -> x @ W_out + b_out                                       (B, L, vocab)

The same layers as :mod:`attention_np.nn.encoder` (post-LN, §3.1), except that self-attention is
:func:`~attention_np.studies.scoring_attention.scoring_mha_forward`, whose ``scoring`` is
``"scaled"``, ``"unscaled"`` or ``"additive"`` and whose ``d_k`` is free of ``d_model``.
Params are one flat dict, ``"layers.{n}.attn.W_q"`` ..., as in :mod:`attention_np.nn.model`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import as_generator, check_count, check_fields, check_instance
from attention_np.nn.embedding import embedding_backward, embedding_forward
from attention_np.nn.encoder import sub
from attention_np.nn.feedforward import ffn_backward, ffn_forward, init_ffn_params
from attention_np.nn.layernorm import layernorm_backward, layernorm_forward
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.paper.linear import linear_backward, linear_forward
from attention_np.studies.scoring_attention import (
    check_scoring,
    init_scoring_mha_params,
    scoring_mha_backward,
    scoring_mha_forward,
)


@dataclass(frozen=True)
class ScoringConfig:
    """Sizes of the model and its scoring function; ``d_k`` is the width of each head's q, k."""

    scoring: str = "scaled"
    d_k: int = 16
    vocab_size: int = 10
    max_len: int = 10
    d_model: int = 32
    num_heads: int = 2
    d_ff: int = 64
    num_layers: int = 2

    def __post_init__(self):
        check_scoring(self.scoring)
        check_fields(self, {f: check_count for f in ("d_k", "vocab_size", "max_len", "d_model",
                                                     "num_heads", "d_ff", "num_layers")})


def init_scoring_model(config: ScoringConfig, *, rng=None) -> dict:
    """Random float64 params: attention as :func:`init_scoring_mha_params`, the FFN and
    output Glorot-uniform, embeddings N(0, d_model^-1/2), LayerNorm gamma = 1, beta = 0."""
    check_instance(config, ScoringConfig, "config", maker="ScoringConfig(...)")
    rng, c = as_generator(rng), config
    params = {"embed": rng.normal(0.0, c.d_model ** -0.5, size=(c.vocab_size, c.d_model))}
    for n in range(c.num_layers):
        attn = init_scoring_mha_params(c.d_model, c.num_heads, c.d_k, c.scoring, rng=rng)
        params.update({f"layers.{n}.attn.{name}": p for name, p in attn.items()})
        ffn = init_ffn_params(c.d_model, c.d_ff, rng=rng)
        params.update({f"layers.{n}.ffn.{name}": p for name, p in ffn.items()})
        for ln in ("ln1", "ln2"):
            params[f"layers.{n}.{ln}.gamma"] = np.ones(c.d_model)
            params[f"layers.{n}.{ln}.beta"] = np.zeros(c.d_model)
    params["W_out"] = rng.uniform(-1, 1, (c.d_model, c.vocab_size)) * np.sqrt(
        6.0 / (c.d_model + c.vocab_size))                                 # Glorot-uniform
    params["b_out"] = np.zeros(c.vocab_size)
    return params


def scoring_model_forward(params: dict, tokens, config: ScoringConfig):
    """``tokens (B, L) int -> logits (B, L, vocab_size)``, and the cache (a dict)."""
    c, tokens = config, np.asarray(tokens)
    if tokens.ndim < 1 or tokens.shape[-1] > c.max_len:
        raise ValueError(f"tokens must be (..., L) with L <= max_len={c.max_len}, "
                         f"got shape {tokens.shape}")
    x, emb = embedding_forward(tokens, params["embed"], scale=np.sqrt(c.d_model))  # (B, L, d)
    x += sinusoidal_encoding(tokens.shape[-1], c.d_model)                        # §3.5
    layers = []
    for n in range(c.num_layers):
        p = sub(params, f"layers.{n}")
        # 1) self-attention with the chosen scoring, in LN(x + Sublayer(x))
        a, attn = scoring_mha_forward(x, sub(p, "attn"), num_heads=c.num_heads,
                                      scoring=c.scoring)
        x1, ln1 = layernorm_forward(x + a, p["ln1.gamma"], p["ln1.beta"])
        # 2) the position-wise feed-forward network, Eq. (2)
        f, ffn = ffn_forward(x1, sub(p, "ffn"))
        x, ln2 = layernorm_forward(x1 + f, p["ln2.gamma"], p["ln2.beta"])
        layers.append((attn, ln1, ffn, ln2))
    logits = linear_forward(x, params["W_out"], params["b_out"])                 # (B, L, V)
    return logits, {"embedding": emb, "layers": layers, "h": x, "W_out": params["W_out"]}


def scoring_model_backward(dlogits, cache: dict) -> dict:
    """Gradients of every param of :func:`scoring_model_forward`, keyed as the params."""
    grads = {}
    # forward: logits = h @ W_out + b_out
    dx, grads["W_out"], grads["b_out"] = linear_backward(dlogits, cache["h"], cache["W_out"], True)
    for n in reversed(range(len(cache["layers"]))):
        attn, ln1, ffn, ln2 = cache["layers"][n]
        pre = f"layers.{n}."
        # forward: x2 = LN2(x1 + f), f = FFN(x1); the residual carries dsum2 to x1 unchanged
        dsum2, grads[pre + "ln2.gamma"], grads[pre + "ln2.beta"] = layernorm_backward(dx, ln2)
        dx1, g = ffn_backward(dsum2, ffn)
        grads.update({f"{pre}ffn.{k}": v for k, v in g.items()})
        # forward: x1 = LN1(x + a), a = MHA(x); x feeds the attention and the residual
        dsum1, grads[pre + "ln1.gamma"], grads[pre + "ln1.beta"] = layernorm_backward(
            dx1 + dsum2, ln1)
        dx, g = scoring_mha_backward(dsum1, attn)
        dx = dx + dsum1
        grads.update({f"{pre}attn.{k}": v for k, v in g.items()})
    # forward: x = embed[tokens] * sqrt(d_model) + PE; PE is a constant
    grads["embed"] = embedding_backward(dx, cache["embedding"])
    return grads
