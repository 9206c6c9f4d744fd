"""Read a Hugging Face ``transformers`` attention layer: its family, what it computes, its weights.

:func:`layer_spec` gives the :class:`LayerSpec` (heads, scale, causality, RoPE, window, T5's
buckets, soft-cap, QK-norm); :func:`params_from_transformers` gives the weights, or their
gradients, in attention_np's layout (``W (d_model, h*d)``, ``x @ W + b``), from ``nn.Linear``,
GPT-2's packed ``Conv1D``, T5's bias table, the QK-norm weights and gpt-oss's sinks.
:func:`~attention_np.interop.transformers.compare_transformers_attention` diffs the layer with them.

Reads attributes only: imports neither torch nor transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers_recent import QK_NORM, recent_spec
from attention_np.interop.transformers_rope import rope_scaling_from_config
from attention_np.variants.spec import AttentionSpec, RoPE

# class name -> family; the layers compare_transformers_attention reads
SUPPORTED = {
    "BertSelfAttention": "bert", "ViTAttention": "vit", "GPT2Attention": "gpt2",
    "BartAttention": "bart", "LlamaAttention": "llama", "MistralAttention": "mistral",
    "Qwen2Attention": "qwen2", "T5Attention": "t5",
    "Qwen3Attention": "qwen3", "Gemma2Attention": "gemma2", "Gemma3Attention": "gemma3",
    "GptOssAttention": "gpt_oss",
}
ROPE = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gpt_oss")   # rotary embeddings


@dataclass(frozen=True)
class LayerSpec:
    """What a layer computes besides its weights: heads, scale, causality, RoPE, window."""

    family: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    is_causal: bool
    has_w_o: bool                    # BERT's self-attention ends before W^O
    rope_theta: float | None = None
    window: int | None = None        # keys j with i - window < j <= i (transformers' sliding_window)
    buckets: tuple | None = None     # T5: (num_buckets, max_distance, bidirectional) of its bias table
    rope_scaling: dict | None = None  # RoPE scaling type and parameters (rope_frequencies' scaling)
    softcap: float | None = None     # Gemma 2: attn_logit_softcapping, c * tanh(scores / c)
    qk_norm_eps: float | None = None  # Qwen3, Gemma 3: the eps of the q/k RMSNorm; None: no QK-norm


def _family(module) -> str:
    name = type(module).__name__
    if name not in SUPPORTED:
        raise TypeError(f"module must be one of the transformers attention layers "
                        f"{sorted(SUPPORTED)}, got {name}")
    return SUPPORTED[name]


def gpt2_cross(module) -> bool:
    return type(module).__name__ == "GPT2Attention" and bool(module.is_cross_attention)


def layer_spec(module) -> LayerSpec:
    """Read the :class:`LayerSpec` of a supported attention layer (see :data:`SUPPORTED`)."""
    family = _family(module)
    cfg = getattr(module, "config", None)
    if family == "bert":
        h, d = module.num_attention_heads, module.attention_head_size
        causal = bool(getattr(module, "is_causal", False))
        return LayerSpec(family, h, h, d, float(module.scaling), causal, False)
    if family == "vit":
        h = module.num_attention_heads
        return LayerSpec(family, h, h, module.head_dim, float(module.scaling), False, True)
    if family == "t5":
        h, d = module.n_heads, module.key_value_proj_dim
        buckets = ((module.relative_attention_num_buckets, module.relative_attention_max_distance,
                    not module.is_decoder) if module.has_relative_attention_bias else None)
        return LayerSpec(family, h, h, d, float(module.scaling), bool(module.is_decoder), True,
                         buckets=buckets)
    if family in ("gpt2", "bart"):
        h, d = module.num_heads, module.head_dim
        causal = bool(module.is_causal) and not getattr(module, "is_cross_attention", False)
        return LayerSpec(family, h, h, d, float(module.scaling), causal, True)
    h, h_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    if not getattr(module, "is_causal", True):      # Gemma 2 and 3 (EmbeddingGemma) can be
        raise ValueError(f"{type(module).__name__} is bidirectional (is_causal False, config."
                         f"use_bidirectional_attention=True): not read; only causal layers are")
    rope = getattr(cfg, "rope_parameters", None) or {}
    rope = rope.get(getattr(module, "layer_type", None), rope)     # Gemma 3: one per layer type
    theta = float(rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0)))
    window = getattr(module, "sliding_window", None)
    if family == "mistral":
        window = getattr(cfg, "sliding_window", None)
    return LayerSpec(family, h, h_kv, module.head_dim, float(module.scaling), True, True, theta,
                     window, rope_scaling=rope_scaling_from_config(rope, cfg, type(module).__name__),
                     **recent_spec(module, family))


def _linear(lin, get) -> tuple:
    """An ``nn.Linear`` (weight (out, in), ``x @ W.T + b``) as ours ``(W (in, out), b)``."""
    W = get(lin.weight).T
    return W, None if lin.bias is None else get(lin.bias)


def _tensors(module, family: str, get) -> dict:
    """Our parameter names -> arrays (values or gradients, by ``get``) in our layout."""
    out = {}
    if family == "bert":
        pairs = {"q": module.query, "k": module.key, "v": module.value}
    elif family == "gpt2":
        E = module.embed_dim
        W, b = get(module.c_attn.weight), get(module.c_attn.bias)     # Conv1D: x @ W + b
        names = "qkv"
        if gpt2_cross(module):       # q_attn (E, E) of the decoder; c_attn (E, 2E) of memory
            out["W_q"], out["b_q"] = get(module.q_attn.weight), get(module.q_attn.bias)
            names = "kv"
        for i, n in enumerate(names):                          # columns [q | k | v] or [k | v]
            out[f"W_{n}"], out[f"b_{n}"] = W[:, i * E:(i + 1) * E], b[i * E:(i + 1) * E]
        out["W_o"], out["b_o"] = get(module.c_proj.weight), get(module.c_proj.bias)
        return out
    elif family == "bart":
        pairs = {"q": module.q_proj, "k": module.k_proj, "v": module.v_proj, "o": module.out_proj}
    elif family == "t5":
        pairs = {"q": module.q, "k": module.k, "v": module.v, "o": module.o}
        if module.has_relative_attention_bias:       # nn.Embedding (num_buckets, h)
            out["bias_table"] = get(module.relative_attention_bias.weight)
    else:
        pairs = {"q": module.q_proj, "k": module.k_proj, "v": module.v_proj, "o": module.o_proj}
    for n, lin in pairs.items():
        out[f"W_{n}"], b = _linear(lin, get)
        if b is not None:
            out[f"b_{n}"] = b
    if family in QK_NORM:                           # RMSNorm weights (head_dim,)
        out["q_norm"], out["k_norm"] = get(module.q_norm.weight), get(module.k_norm.weight)
    if family == "gpt_oss":                         # one learned sink logit per head (h,)
        out["sinks"] = get(module.sinks)
    return out


def params_from_transformers(module, *, grads: bool = False) -> tuple[dict, LayerSpec]:
    """Read a transformers attention layer as ``(params, spec)`` for attention_np.

    Parameters
    ----------
    module : one of :data:`SUPPORTED`
    grads : bool
        Read the parameters' ``.grad`` instead of their values (same names and layout).

    Returns
    -------
    params : dict of float arrays, ``W_q (d_model, h*d_k)``, ``W_k``, ``W_v (.., h_kv*d)``,
        ``W_o (h*d_v, d_model)`` (absent for BERT, whose self-attention stops at the
        concatenated heads) and the biases the layer has; Qwen3 and Gemma 3 add ``q_norm``,
        ``k_norm (head_dim,)``, what their RMSNorm multiplies by (Gemma's ``1 + w``; with
        ``grads=True`` the gradient w.r.t. ``w``, the same number).
    spec : LayerSpec
    """
    spec = layer_spec(module)

    def get(t):
        a = t.grad if grads else t.data
        if a is None:
            raise ValueError(f"{type(module).__name__} has no .grad: run a backward pass first")
        return to_numpy(a).astype(np.float64)

    params = {n: np.ascontiguousarray(a) for n, a in _tensors(module, spec.family, get).items()}
    if not grads and QK_NORM.get(spec.family):      # Gemma: the norm multiplies by (1 + w)
        for n in ("q_norm", "k_norm"):              # d/dw = d/d(1 + w): gradients stay as read
            params[n] = params[n] + QK_NORM[spec.family]
    return params, spec


def attention_spec(spec) -> AttentionSpec:
    """The :class:`~attention_np.AttentionSpec` of a layer read from transformers (its
    ``LayerSpec``): one translation, so that no option is dropped on the way."""
    return AttentionSpec(
        num_heads=spec.num_heads, scale=spec.scale,
        window=None if spec.window is None else (spec.window - 1, 0),   # Mistral's W counts the query
        rope=RoPE(theta=spec.rope_theta, layout="half", scaling=spec.rope_scaling)
        if spec.family in ROPE else None,
        softcap=spec.softcap,
        qk_norm_eps=1e-6 if spec.qk_norm_eps is None else spec.qk_norm_eps)
