"""Read a Hugging Face ``transformers`` attention layer by what it computes, not by its class name.

:func:`layer_spec` is the one place a layer is read: its projections (separate, GPT-2's packed
``Conv1D``, a fused ``qkv`` Linear in any of its three layouts, torch's ``nn.MultiheadAttention``
and CTRL's layer taking query, key and value as three inputs), head counts, scale, causality,
RoPE (rotated width, pair layout, probed from the family's ``rotate_half``), sliding window,
soft-cap, QK-norm (its kind probed: RMSNorm, ``(1 + w)`` RMSNorm or mean-centred LayerNorm,
shared or one per head, or over all heads at once as OLMo 2's), sinks, T5's bucketed bias,
2-D relative position bias tables (Data2VecVision, Swin's windows), ALBERT's residual
LayerNorm. Any
``nn.Module`` whose computation these describe is accepted, subclasses and unknown classes
included; one that adds what they cannot describe is refused with the feature named
(:class:`UnsupportedLayer`). :func:`params_from_transformers` gives the weights, or their
gradients, in attention_np's layout (:mod:`~attention_np.interop.transformers.weights`).

The :class:`LayerSpec` is what ``attention_np.AttentionSpec`` will describe; every consumer
(``compare_transformers_attention``, the ``generate()`` replay, the whole-model diff, the
attention-interface diff) takes its keyword arguments from :func:`mha_options` only.

What a layer computes is read by subject: :mod:`.reading_heads` (heads, widths, score and value
scales), :mod:`.reading_rope` (RoPE), :mod:`.reading_scores` (causal mask, window, soft-cap, ALiBi,
2-D bias tables), :mod:`.weights` (projections, QK-norms); what it adds that the spec cannot express
is refused by :mod:`.algorithm_refusals` (other algorithms, other inputs) and
:mod:`.feature_refusals` (one ordered table of features), both before anything else is read.

Reads attributes (and probes two small functions of the layer's family): imports neither torch
nor transformers itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_np._checks import check_array, check_flag
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.algorithm_refusals import (
    refuse_other_algorithm,
    refuse_other_inputs,
    refuse_torch_mha_options,
    refuse_unread_projections,
)
from attention_np.interop.transformers.feature_refusals import refuse_features
from attention_np.interop.transformers.layer_source import (
    forward_parameters,
    forward_source,
)
from attention_np.interop.transformers.reading_heads import read_heads, score_scale, value_scale
from attention_np.interop.transformers.reading_rope import (
    read_rope,
    refuse_rope_only_in_self_attention,
)
from attention_np.interop.transformers.reading_scores import (
    bias_table_owner,
    causal_band,
    read_alibi,
    read_grid_table,
    read_softcap,
    read_window,
    tril_weights,
)
from attention_np.interop.transformers.refusal import UnsupportedLayer, check_module, refuse
from attention_np.interop.transformers.weights import (
    QK_NORMS,
    find_projections,
    float64_view,
    linear_tensors,
    norm_tensors,
    qkv_columns,
    read_qk_norm,
    torch_mha,
)
from attention_np.variants.spec import AttentionSpec, RoPE

# the families the docs list by name (a tag for messages and family-specific traps; a subclass
# gets the tag of its nearest listed base). Support does not depend on it.
SUPPORTED = {
    "BertSelfAttention": "bert", "ViTAttention": "vit", "GPT2Attention": "gpt2",
    "BartAttention": "bart", "LlamaAttention": "llama", "MistralAttention": "mistral",
    "Qwen2Attention": "qwen2", "T5Attention": "t5",
    "Qwen3Attention": "qwen3", "Gemma2Attention": "gemma2", "Gemma3Attention": "gemma3",
    "GptOssAttention": "gpt_oss",
}


@dataclass(frozen=True)
class LayerSpec:
    """What a layer computes besides its weights (one description; ``AttentionSpec`` to be)."""

    family: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    is_causal: bool
    has_w_o: bool                    # BERT's self-attention ends before W^O
    rope_theta: float | None = None  # None: no rotary embedding
    window: int | None = None        # keys j with i - window < j <= i (transformers' sliding_window);
    #                                  a bidirectional layer (ModernBERT): i - window < j < i + window
    buckets: tuple | None = None     # T5: (num_buckets, max_distance, bidirectional) of its bias table
    rope_scaling: dict | None = None  # RoPE scaling type and parameters (rope_frequencies' scaling)
    softcap: float | None = None     # Gemma 2: attn_logit_softcapping, c * tanh(scores / c)
    qk_norm_eps: float | None = None  # the eps of the QK-norm; None: no QK-norm
    qk_norm: str | None = None       # "rms" or "layer" (AttentionSpec.qk_norm)
    qk_norm_scope: str = "head"      # "all": over all heads' features at once (OLMo 2)
    rotary_dim: int | None = None    # RoPE on the first rotary_dim features (None: all)
    rope_layout: str = "half"        # "half" (rotate_half) or "interleaved" (Cohere)
    sinks: bool = False              # gpt-oss: a learned sink logit per head
    post_norm_eps: float | None = None  # ALBERT: LayerNorm(x + out) inside the layer
    cross: bool = False              # keys and values from another sequence (encoder output)
    alibi: tuple | None = None       # ALiBi: per-head slopes m_n of the bias -m_n |j - i| added
    #                                  to the scaled scores (BLOOM, MPT; Falcon's times the scale)
    adds_residual: bool = False      # BLOOM: the layer returns out + its ``residual`` argument
    bool_mask_masks: bool = False    # MPT: a bool attention_mask is True where a key is masked
    rope_sin_first: bool = False     # GPT-J: position_embeddings are (sin, cos) of the r/2 angles
    grid_table: tuple | None = None  # a 2-D relative position bias table (height, width, cls) of
    #                                  its grid of patches: Data2VecVision (a class token first),
    #                                  Swin (each window; cls False); variants.grid_relative_index
    rope_angles_layout: str | None = None  # how position_embeddings repeat the r/2 angles, if
    #                                  not as rope_layout pairs them (GLM: concatenated, "half")
    rope_in_layer: bool = False      # the layer turns q, k itself, its own rotary_emb run on
    #                                  its position_ids argument (IDEFICS), not given cos, sin
    rope_table: str | None = None    # the layer turns q, k itself from its own buffer of that
    #                                  name, rows [sin | cos] indexed by its position_ids
    #                                  argument (GPT-J in transformers 5.15-5.17: embed_positions)
    rope_sections: bool = False      # position_embeddings are multimodal RoPE's three sections
    #                                  (3, B, L, r) the layer interleaves itself (Qwen2-VL's text
    #                                  layers in transformers 5.15, 5.16; text-only: alike)

    @property
    def has_rope(self) -> bool:
        return self.rope_theta is not None


def check_layer_spec(spec) -> None:
    """``spec`` is a :class:`LayerSpec` (a ``TypeError`` naming it otherwise)."""
    if not isinstance(spec, LayerSpec):
        raise TypeError(f"spec must be a LayerSpec (layer_spec reads one from a layer), got "
                        f"{type(spec).__name__} ({spec!r:.40})")


def attention_spec(spec: LayerSpec, *, window: bool = False) -> AttentionSpec:
    """The :class:`~attention_np.AttentionSpec` of a layer read from transformers:
    RoPE (theta, layout, rotated width, scaling), soft-cap, QK-norm kind and eps, and with
    ``window=True`` the sliding window (``(W - 1, 0)``: transformers' ``W`` counts the query;
    ``(W - 1, W - 1)`` for a bidirectional layer; the full forward takes the window in its mask
    instead). Grouped-query attention, the
    QK-norm weights and the sinks are in the parameters, which decide them.

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    window : bool
        Also the sliding window of a windowed layer.
    """
    check_layer_spec(spec)
    check_flag(window, "window")
    rope = None
    if spec.has_rope:
        r = spec.rotary_dim if spec.rotary_dim not in (None, spec.head_dim) else None
        rope = RoPE(theta=spec.rope_theta, layout=spec.rope_layout, rotary_dim=r,
                    scaling=spec.rope_scaling)
    return AttentionSpec(
        rope=rope, softcap=spec.softcap,
        window=None if not window or spec.window is None else
        (spec.window - 1, 0 if spec.is_causal else spec.window - 1),
        qk_norm=spec.qk_norm or "rms", qk_norm_scope=spec.qk_norm_scope,
        qk_norm_eps=1e-6 if spec.qk_norm_eps is None else spec.qk_norm_eps)


def mha_options(spec: LayerSpec, positions=None, *, window: bool = False) -> dict:
    """The keyword arguments of :func:`attention_np.mha_forward` (and the decode step) that
    ``spec`` implies: ``num_heads=``, ``scale=``, ``spec=`` (:func:`attention_spec`) and, with
    RoPE, ``positions=``. The
    only translation of a layer into keyword arguments (masks and biases are the caller's:
    they depend on the call).

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    positions : int array (L,) or (..., L), or a pair ``(q_positions, kv_positions)``, optional
        The positions RoPE rotates by (with RoPE: passed on to the forward).
    window : bool
        As in :func:`attention_spec`.
    """
    check_layer_spec(spec)
    check_flag(window, "window")
    if positions is not None:              # an int array, or a pair of them (q, kv)
        for i, pos in enumerate(positions if isinstance(positions, tuple) else (positions,)):
            check_array(pos, "positions" if not isinstance(positions, tuple) else f"positions[{i}]",
                        kind="int", min_ndim=1, layout="(L,) or (..., L)")
        if isinstance(positions, tuple) and len(positions) != 2:
            raise ValueError(f"positions must be one int array or a pair (q_positions, kv_positions), "
                             f"got a tuple of {len(positions)}")
    kw = {"num_heads": spec.num_heads, "scale": spec.scale, "spec": attention_spec(spec, window=window)}
    if spec.has_rope:
        kw["positions"] = positions
    return kw


def _family(module) -> str:
    for cls in type(module).__mro__:
        if cls.__name__ in SUPPORTED:
            return SUPPORTED[cls.__name__]
    return type(module).__name__.replace("Attention", "").lower() or type(module).__name__


def gpt2_cross(module) -> bool:
    return _family(module) == "gpt2" and bool(getattr(module, "is_cross_attention", False))


def qkv_inputs(module) -> dict | None:
    """``{"q": name, "k": name, "v": name}``: the ``forward`` parameters of a layer that takes
    its query, key and value inputs separately and projects each itself (torch's
    ``nn.MultiheadAttention``: ``query, key, value``; CTRL: ``v, k, q``), else None. Self-
    attention passes one tensor as all three; a pooling head (SigLIP's) a learned probe as the
    query and the hidden states as key and value (cross-attention).

    Parameters
    ----------
    module : torch.nn.Module
        An attention layer.
    """
    check_module(module)
    first = forward_parameters(module)[:3]
    if torch_mha(module) and first == ("query", "key", "value"):
        return dict(zip("qkv", first, strict=True))
    if set(first) == set("qkv") and hasattr(module, "Wq"):                       # CTRL
        return {n: n for n in "qkv"}
    return None


def layer_spec(module) -> LayerSpec:
    """Read the :class:`LayerSpec` of an attention layer by its modules and config.

    Raises :class:`UnsupportedLayer` (a ``TypeError``) naming the feature the spec cannot
    express, or why the module is not an attention layer. A bfloat16 or float16 layer is read
    from its float64 copy (:func:`~attention_np.interop.transformers.weights.float64_view`).

    Parameters
    ----------
    module : torch.nn.Module
        A transformers attention layer (or ``torch.nn.MultiheadAttention``).
    """
    check_module(module)
    module = float64_view(module)
    cfg = getattr(module, "config", None)
    family = _family(module)
    refuse_other_algorithm(module)                   # by name, before what it would trip on
    refuse_torch_mha_options(module)
    projections = find_projections(module)           # refuses a module without q, k, v
    refuse_other_inputs(module, qkv_inputs(module) is not None)
    refuse_features(module, cfg)                     # then the feature, before heads and scale
    refuse_unread_projections(module, projections)   # (no W^O known: not read as BERT's)
    h, h_kv, d = read_heads(module, cfg, projections)
    if h_kv == 0 or h % h_kv:
        refuse(module, f"{h} query heads over {h_kv} key/value heads (not a whole number of "
                        "groups)")
    cross = bool(getattr(module, "is_cross_attention", False)) or (   # T5Gemma, Canary, Dia
        "Cross" in type(module).__name__ and
        bool({"encoder_hidden_states", "cross_attention_states"} & set(forward_parameters(module))))
    causal = (bool(getattr(module, "is_causal", False)) or causal_band(module) is not None
              or tril_weights(module)) and not cross    # (ImageGPT, GPT-1: by their own buffer)
    if family in SUPPORTED.values() and family not in ("bert", "vit", "gpt2", "bart", "t5") \
            and not getattr(module, "is_causal", True):    # Gemma 2 / 3 bidirectional
        raise ValueError(f"{type(module).__name__} is bidirectional (is_causal False, config."
                         f"use_bidirectional_attention=True): not read; only causal layers are")
    buckets = None
    if getattr(module, "has_relative_attention_bias", False):       # T5: nn.Embedding (buckets, h)
        buckets = (module.relative_attention_num_buckets, module.relative_attention_max_distance,
                   not module.is_decoder)
        causal = bool(module.is_decoder)
    norm = read_qk_norm(module, h, h_kv, d)
    post = getattr(module, "LayerNorm", None)                          # ALBERT
    scale = score_scale(module, d)
    alibi = read_alibi(module, cfg, h, scale)
    rope = read_rope(module, cfg, family, d, alibi, projections)
    refuse_rope_only_in_self_attention(module, rope)
    return LayerSpec(
        family, h, h_kv, d, scale, causal, projections.has_o,
        window=read_window(module, cfg), buckets=buckets, softcap=read_softcap(module),
        qk_norm=None if norm is None else norm.kind,
        qk_norm_eps=None if norm is None else norm.eps,
        qk_norm_scope="head" if norm is None else norm.scope,
        sinks=getattr(module, "sinks", None) is not None,
        post_norm_eps=None if post is None else float(post.eps), cross=cross, alibi=alibi,
        adds_residual="residual" in forward_parameters(module),
        bool_mask_masks="masked_fill(attention_mask," in forward_source(module),
        grid_table=read_grid_table(module),
        **rope)


def no_causal(spec: LayerSpec) -> LayerSpec:
    """Cross-attention: every query sees every (unpadded) key.

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    """
    check_layer_spec(spec)
    return replace(spec, is_causal=False, window=None)


def params_from_transformers(module, *, grads: bool = False) -> tuple:
    """Read a transformers attention layer as ``(params, spec)`` for attention_np.

    Parameters
    ----------
    module : torch.nn.Module, an attention layer :func:`layer_spec` accepts
    grads : bool
        Read the parameters' ``.grad`` instead of their values (same names and layout).

    Returns
    -------
    params : dict of float arrays, ``W_q (d_model, h*d_k)``, ``W_k``, ``W_v (.., h_kv*d)``,
        ``W_o (h*d_v, d_model)`` (absent for BERT, whose self-attention stops at the
        concatenated heads) and the biases the layer has; a QK-norm adds ``q_norm``,
        ``k_norm`` (``(head_dim,)``, per head ``(h, head_dim)`` or over all heads
        ``(h*head_dim,)``, OLMo 2; an RMSNorm by ``1 + w``
        gives ``1 + w``, its gradient stays the gradient w.r.t. ``w``, the same number) and a
        LayerNorm's ``q_norm_bias``, ``k_norm_bias``; T5 ``bias_table (num_buckets, h)``,
        Data2VecVision and Swin ``bias_table ((2H-1)(2W-1) [+ 3], h)``;
        gpt-oss ``sinks (h,)``; ALBERT ``post_norm_w``, ``post_norm_b`` (its residual
        LayerNorm). MiMo-V2-Flash's value scale is folded into ``W_v`` and ``b_v`` (their
        gradients are then w.r.t. the folded weights: the layer's own divided by the scale).
    spec : LayerSpec
    """
    check_module(module)
    check_flag(grads, "grads")
    module = float64_view(module)          # bf16, fp16: the stored values, upcast exactly
    spec = layer_spec(module)

    def get(t):
        a = t.grad if grads else t.data
        if a is None:
            raise ValueError(f"{type(module).__name__} has no .grad: run a backward pass first")
        return np.array(to_numpy(a, np.float64))      # a copy: a float64 tensor's .numpy() is a view

    out = _projection_params(module, spec, get, grads)
    out.update(_extra_params(module, spec, get, grads))
    return {n: np.ascontiguousarray(a) for n, a in out.items()}, spec


def _linear_params(out: dict, n: str, linear, get) -> None:
    """``W_<n>`` (and ``b_<n>`` if the projection has a bias) of ``linear`` into ``out``."""
    out[f"W_{n}"], b = linear_tensors(linear, get)
    if b is not None:
        out[f"b_{n}"] = b


def _projection_params(module, spec: LayerSpec, get, grads: bool) -> dict:
    """``W_q, W_k, W_v, W_o`` and their biases: separate projections, or a fused one's columns
    (:func:`~attention_np.interop.transformers.weights.qkv_columns`); a value scale folded into
    ``W_v`` and ``b_v`` (their gradients divided by it)."""
    p = find_projections(module)
    out = {}
    if p.fused is None:
        for n in "qkv":
            _linear_params(out, n, getattr(p, n), get)
    else:
        W, b = linear_tensors(p.fused, get)
        if p.kv_fused:
            _linear_params(out, "q", p.q, get)
        for n, cols in qkv_columns(p.layout, spec.num_heads, spec.num_kv_heads, spec.head_dim,
                                   p.kv_fused).items():
            out[f"W_{n}"] = W[:, cols]
            if b is not None:
                out[f"b_{n}"] = b[cols]
    v_scale = value_scale(module)
    if v_scale != 1.0:             # values times v_scale: W_v, b_v folded; d/dW_v = s d/d(s W_v)
        out.update({n: out[n] / v_scale if grads else out[n] * v_scale
                    for n in ("W_v", "b_v") if n in out})
    if p.o is not None:
        _linear_params(out, "o", p.o, get)
    return out


def _extra_params(module, spec: LayerSpec, get, grads: bool) -> dict:
    """The layer's parameters beyond the projections: a position bias table, the QK-norm's
    scales (an RMSNorm by ``1 + w`` read as ``1 + w``), the sinks, ALBERT's residual norm."""
    out = {}
    if spec.buckets is not None:                       # T5: nn.Embedding (num_buckets, h)
        out["bias_table"] = get(module.relative_attention_bias.weight)
    if spec.grid_table is not None:                    # Data2VecVision, Swin: (rows, h)
        out["bias_table"] = get(bias_table_owner(module).relative_position_bias_table)
    norm = read_qk_norm(module, spec.num_heads, spec.num_kv_heads, spec.head_dim)
    if norm is not None:
        out.update(norm_tensors(norm, get))
        if not grads and norm.offset:                  # d/dw = d/d(offset + w)
            out["q_norm"], out["k_norm"] = out["q_norm"] + norm.offset, out["k_norm"] + norm.offset
    if spec.sinks:                                     # one learned sink logit per head (h,)
        out["sinks"] = get(module.sinks)
    if spec.post_norm_eps is not None:                 # ALBERT: LayerNorm(x + out)
        out["post_norm_w"], out["post_norm_b"] = get(module.LayerNorm.weight), \
            get(module.LayerNorm.bias)
    return out


__all__ = ["LayerSpec", "UnsupportedLayer", "attention_spec", "layer_spec", "mha_options",
           "no_causal", "qkv_inputs",
           "params_from_transformers", "QK_NORMS", "SUPPORTED"]
