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

A :class:`LayerSpec` carries the layer's ``attention_np.AttentionSpec`` (RoPE, window, soft-cap,
QK-norm: each in the one form the spec has), the shape of its call, and as typed records what the
spec cannot say (the relative position bias it adds, how it is handed its rotation, the residual it
makes itself); every consumer (``compare_transformers_attention``, the ``generate()`` replay, the
whole-model diff, the attention-interface diff) takes its keyword arguments from
:func:`mha_options` only.

What a layer computes is read by subject: :mod:`.reading_heads` (heads, widths, score and value
scales), :mod:`.reading_rope` (RoPE, :class:`RopeInputs`), :mod:`.reading_scores` (causal mask,
window, soft-cap, T5's buckets, ALiBi, 2-D bias tables), :mod:`.weights` (projections, QK-norms);
what it adds that the spec cannot express
is refused by :mod:`.algorithm_refusals` (other algorithms, other inputs) and
:mod:`.feature_refusals` (one ordered table of features), both before anything else is read.

Reads attributes (and probes two small functions of the layer's family): imports neither torch
nor transformers itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_np._checks import check_array, check_flag, is_integer
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
    RopeInputs,
    read_rope,
    refuse_rope_only_in_self_attention,
)
from attention_np.interop.transformers.reading_scores import (
    ALiBi,
    GridTable,
    T5Buckets,
    bias_table_owner,
    causal_band,
    read_relative_bias,
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
from attention_np.variants.spec import AttentionSpec

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
class Residual:
    """The residual connection of §3.1 (``x + Sublayer(x)``) made inside the layer.

    Attributes
    ----------
    argument : bool
        The layer returns ``out + residual``, its ``residual`` argument (BLOOM).
    norm_eps : float, optional
        The layer returns ``LayerNorm(x + out)`` of its own input ``x`` (ALBERT), with this
        epsilon (the norm's weights are ``params["post_norm_w"]``, ``["post_norm_b"]``).
    """

    argument: bool = False
    norm_eps: float | None = None

    def __post_init__(self):
        if self.argument == (self.norm_eps is not None):
            raise ValueError(f"a Residual adds the residual argument (argument=True) or "
                             f"normalises x + out (norm_eps=), one of the two, got "
                             f"argument={self.argument!r}, norm_eps={self.norm_eps!r}")


@dataclass(frozen=True, kw_only=True)
class LayerSpec:
    """What a transformers attention layer computes besides its weights: the shape of its call,
    its :class:`~attention_np.AttentionSpec`, and what it adds that the spec cannot say.

    What the weights say is not said again: grouped-query attention is the width of
    ``params["W_k"]``, a QK-norm ``params["q_norm"]``, a layer without ``W^O`` (BERT's
    self-attention ends at the concatenated heads) one without ``params["W_o"]``.

    Attributes
    ----------
    family : str
        The family's tag (``"llama"``, ...; a class not listed: its name, lowercased).
    num_heads, num_kv_heads, head_dim : int
        Query heads ``h``, key/value heads ``h_kv`` and the width ``d_k`` of one head.
    scale : float
        The scores' scale (``1/sqrt(d_k)`` in the paper; Gemma's ``query_pre_attn_scalar``).
    is_causal : bool
        Query ``i`` sees keys ``j <= i``.
    cross : bool
        Keys and values from another sequence (an encoder output).
    bool_mask_masks : bool
        A bool ``attention_mask`` the layer is passed is True where a key is masked (MPT),
        not where it is kept.
    attention : AttentionSpec
        RoPE, the sliding window, soft-cap, QK-norm (kind, eps, scope) as attention_np runs
        them. The window is the spec's ``(left, right)``: transformers' ``sliding_window = W``
        counts the query, ``(W - 1, 0)`` in a causal layer, ``(W - 1, W - 1)`` in a
        bidirectional one (ModernBERT); :func:`sliding_window` gives ``W`` back.
    relative_bias : T5Buckets, ALiBi or GridTable, optional
        The relative position bias the layer adds to its scores (at most one): T5's table by
        buckets, ALiBi's slopes, a 2-D table of a grid of patches (Data2VecVision, Swin).
    rope_inputs : RopeInputs
        How a RoPE layer is handed its rotation (the default for every other layer).
    residual : Residual, optional
        The residual connection the layer makes itself (BLOOM, ALBERT).
    sinks : bool
        A learned sink logit per head (gpt-oss; ``params["sinks"]``). Said here as well as by
        the weights: the diffs choose transformers' attention implementation by it (sdpa drops
        the sinks) before any weight is read.
    """

    family: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    is_causal: bool
    cross: bool = False
    bool_mask_masks: bool = False
    attention: AttentionSpec = AttentionSpec()
    relative_bias: T5Buckets | ALiBi | GridTable | None = None
    rope_inputs: RopeInputs = RopeInputs()
    residual: Residual | None = None
    sinks: bool = False

    def __post_init__(self):
        if not isinstance(self.attention, AttentionSpec):
            raise TypeError(f"attention must be an AttentionSpec, got {type(self.attention).__name__}")
        if self.attention.rope is None and self.rope_inputs != RopeInputs():
            raise ValueError(f"rope_inputs {self.rope_inputs} of a layer without RoPE "
                             "(attention.rope is None)")
        window = self.attention.window
        if window is not None and (window[0] is None or
                                   window[1] != (0 if self.is_causal else window[0])):
            raise ValueError(f"attention.window {self.attention.window} is not transformers' "
                             f"sliding window of a {'' if self.is_causal else 'non-'}causal "
                             f"layer ((W - 1, {'0' if self.is_causal else 'W - 1'}))")

    @property
    def rotated_width(self) -> int | None:
        """The features of a head RoPE turns (``attention.rope.rotary_dim``, else all
        ``head_dim``); None without RoPE."""
        rope = self.attention.rope
        return None if rope is None else rope.rotary_dim or self.head_dim


def check_layer_spec(spec) -> None:
    """``spec`` is a :class:`LayerSpec` (a ``TypeError`` naming it otherwise)."""
    if not isinstance(spec, LayerSpec):
        raise TypeError(f"spec must be a LayerSpec (layer_spec reads one from a layer), got "
                        f"{type(spec).__name__} ({spec!r:.40})")


def spec_window(W: int | None, is_causal: bool) -> tuple | None:
    """transformers' sliding window ``W`` (query ``i`` sees the ``W`` keys ``i - W < j <= i``;
    bidirectional, ModernBERT's: ``|i - j| < W``) as the spec's ``(left, right)``: ``(W - 1, 0)``
    or ``(W - 1, W - 1)``; None for none."""
    return None if W is None else (W - 1, 0 if is_causal else W - 1)


def sliding_window(spec: LayerSpec) -> int | None:
    """transformers' sliding window ``W`` of a layer (None: none): ``left + 1`` of its spec's
    window (:func:`spec_window` the other way).

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    """
    check_layer_spec(spec)
    window = spec.attention.window
    return None if window is None else window[0] + 1


def with_causality(spec: LayerSpec, is_causal: bool) -> LayerSpec:
    """The layer called with ``is_causal`` (CLIP's text model passes ``is_causal=True`` to a
    layer that is not causal by itself): its window, transformers' ``W``, made to that
    causality (:func:`spec_window`)."""
    window = spec_window(sliding_window(spec), is_causal)
    return replace(spec, is_causal=is_causal, attention=spec.attention.replace(window=window))


def attention_spec(spec: LayerSpec, *, window: bool = False) -> AttentionSpec:
    """The :class:`~attention_np.AttentionSpec` of a layer read from transformers
    (``spec.attention``), without its sliding window unless ``window=True``: the full forward
    takes the window in its mask instead. Grouped-query attention, the QK-norm weights and the
    sinks are in the parameters, which decide them.

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    window : bool
        Keep the sliding window of a windowed layer.
    """
    check_layer_spec(spec)
    check_flag(window, "window")
    return spec.attention if window else spec.attention.replace(window=None)


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
    if spec.attention.rope is not None:
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
    cross = _reads_another_sequence(module)
    causal = _causal(module, family, cross)
    norm = read_qk_norm(module, h, h_kv, d)
    scale = score_scale(module, d)
    bias = read_relative_bias(module, cfg, h, scale)
    if isinstance(bias, T5Buckets):                  # T5: its decoder's buckets are causal
        causal = not bias.bidirectional
    rope, rope_inputs = read_rope(module, cfg, family, d, isinstance(bias, ALiBi), projections)
    refuse_rope_only_in_self_attention(module, rope)
    return LayerSpec(
        family=family, num_heads=h, num_kv_heads=h_kv, head_dim=d, scale=scale,
        is_causal=causal, cross=cross,
        bool_mask_masks="masked_fill(attention_mask," in forward_source(module),
        attention=AttentionSpec(window=_window(module, cfg, causal), rope=rope,
                                softcap=read_softcap(module), **_qk_norm_fields(norm)),
        relative_bias=bias, rope_inputs=rope_inputs, residual=_read_residual(module),
        sinks=getattr(module, "sinks", None) is not None)


def _reads_another_sequence(module) -> bool:
    """Cross-attention: GPT-2's ``is_cross_attention`` layer, or a ``*Cross*`` class taking an
    encoder output (T5Gemma, Canary, Dia)."""
    return bool(getattr(module, "is_cross_attention", False)) or (
        "Cross" in type(module).__name__ and
        bool({"encoder_hidden_states", "cross_attention_states"} & set(forward_parameters(module))))


def _causal(module, family: str, cross: bool) -> bool:
    """A self-attention layer's causality: its ``is_causal``, or its own causal buffer (GPT-Neo,
    ImageGPT, GPT-1); a listed decoder family's bidirectional layer (Gemma 2 and 3 with
    ``use_bidirectional_attention``) is refused."""
    causal = (bool(getattr(module, "is_causal", False)) or causal_band(module) is not None
              or tril_weights(module)) and not cross
    if family in SUPPORTED.values() and family not in ("bert", "vit", "gpt2", "bart", "t5") \
            and not getattr(module, "is_causal", True):    # Gemma 2 / 3 bidirectional
        raise ValueError(f"{type(module).__name__} is bidirectional (is_causal False, config."
                         f"use_bidirectional_attention=True): not read; only causal layers are")
    return causal


def _window(module, cfg, causal: bool) -> tuple | None:
    """The layer's sliding window (:func:`read_window`) as the spec's ``(left, right)``
    (:func:`spec_window`); a window of no key refused."""
    W = read_window(module, cfg)
    if W is not None and not (is_integer(W) and W >= 1):
        refuse(module, f"a sliding window of {W!r} keys (transformers' sliding_window counts "
                        "the query: an int >= 1)")
    return spec_window(W, causal)


def _qk_norm_fields(norm) -> dict:
    """The QK-norm's fields of the spec (``qk_norm``, ``qk_norm_eps``, ``qk_norm_scope``) from
    its reading, none without one (the weights ``q_norm``, ``k_norm`` say whether it is there)."""
    return {} if norm is None else {"qk_norm": norm.kind, "qk_norm_eps": norm.eps,
                                    "qk_norm_scope": norm.scope}


def _read_residual(module) -> Residual | None:
    """The residual connection the layer makes itself: BLOOM's ``residual`` argument added,
    ALBERT's ``LayerNorm(x + out)``; None for neither, refused for both."""
    post = getattr(module, "LayerNorm", None)                          # ALBERT
    argument = "residual" in forward_parameters(module)                # BLOOM
    if post is not None and argument:
        refuse(module, "a residual argument added and a LayerNorm of x + out (two residual "
                        "connections)")
    if post is None and not argument:
        return None
    return Residual(argument=argument, norm_eps=None if post is None else float(post.eps))


def no_causal(spec: LayerSpec) -> LayerSpec:
    """Cross-attention: every query sees every (unpadded) key.

    Parameters
    ----------
    spec : LayerSpec
        From :func:`layer_spec`.
    """
    check_layer_spec(spec)
    return replace(spec, is_causal=False, attention=spec.attention.replace(window=None))


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
    if isinstance(spec.relative_bias, T5Buckets):      # T5: nn.Embedding (num_buckets, h)
        out["bias_table"] = get(module.relative_attention_bias.weight)
    if isinstance(spec.relative_bias, GridTable):      # Data2VecVision, Swin: (rows, h)
        out["bias_table"] = get(bias_table_owner(module).relative_position_bias_table)
    norm = read_qk_norm(module, spec.num_heads, spec.num_kv_heads, spec.head_dim)
    if norm is not None:
        out.update(norm_tensors(norm, get))
        if not grads and norm.offset:                  # d/dw = d/d(offset + w)
            out["q_norm"], out["k_norm"] = out["q_norm"] + norm.offset, out["k_norm"] + norm.offset
    if spec.sinks:                                     # one learned sink logit per head (h,)
        out["sinks"] = get(module.sinks)
    if spec.residual is not None and spec.residual.norm_eps is not None:   # ALBERT: LayerNorm(x + out)
        out["post_norm_w"], out["post_norm_b"] = get(module.LayerNorm.weight), \
            get(module.LayerNorm.bias)
    return out


__all__ = ["LayerSpec", "UnsupportedLayer", "attention_spec", "layer_spec", "mha_options",
           "no_causal", "qkv_inputs", "sliding_window",
           "params_from_transformers", "QK_NORMS", "SUPPORTED"]
