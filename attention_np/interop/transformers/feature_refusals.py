"""The features beyond the paper's attention a layer may add that attention_np cannot express, as one
ordered table of named refusals (:data:`FEATURES`), checked by one loop (:func:`refuse_features`).

Checked after the algorithm refusals (:mod:`.algorithm_refusals`) and before the heads, widths and
scale are read: a layer that adds a feature is refused by that feature, not by what reading it would
trip over. The first entry that applies refuses, so the table's order is the order of the checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from attention_np.interop.transformers.layer_source import forward_parameters, forward_source
from attention_np.interop.transformers.reading_scores import bias_table_owner
from attention_np.interop.transformers.refusal import refuse


@dataclass(frozen=True)
class Refusal:
    """One feature the spec cannot express: its name, whether a layer has it, what it is refused
    with (a sentence, or a function of the layer and its config for one that names a value)."""

    feature: str
    applies: Callable                # (module, cfg) -> bool
    message: str | Callable          # or (module, cfg) -> str

    def text(self, module, cfg) -> str:
        return self.message(module, cfg) if callable(self.message) else self.message


def _bias_table_not_read(m) -> bool:
    """A relative position bias table the layer holds or its ``relative_position_bias`` holds, in a
    place :func:`~.reading_scores.bias_table_owner` does not read (BEiT's)."""
    table = getattr(getattr(m, "relative_position_bias", None), "relative_position_bias_table", None)
    return (table is not None or getattr(m, "relative_position_bias_table", None) is not None) \
        and bias_table_owner(m) is None                   # one we read: read_grid_table


def _gated_output(m) -> bool:
    """The concatenated heads times ``sigmoid(gate)`` (AFMoE, ...; Step 3.7's ``gate.sigmoid()``)."""
    src = forward_source(m)
    return bool(re.search(r"sigmoid\((self\.)?gate", src) or
                re.search(r"\bgate\w*(\.unsqueeze\(-?\d+\))?\.sigmoid\(\)", src))


def _clip(m, cfg):
    """The bound q, k, v are clamped to (MPT, OLMo's ``clip_qkv``), as the layer or its config
    holds it."""
    return getattr(m, "clip_qkv", None) or getattr(cfg, "clip_qkv", None)


def _clips(m, cfg) -> bool:
    """Whether the layer clamps q, k, v: a ``clip_qkv`` that is set and not a flag, named in its
    forward."""
    clip = _clip(m, cfg)
    return clip is not None and clip is not True and clip is not False and \
        "clip_qkv" in forward_source(m)


def _norm_after_rope(module) -> bool:
    """Whether the layer's forward normalises its queries after rotating them (HunYuan:
    ``apply_rotary_pos_emb`` then ``self.query_layernorm``)."""
    src = forward_source(module)
    rope = src.find("apply_rotary_pos_emb(")
    norm = re.search(r"self\.(q_norm|q_layernorm|query_layernorm)\(", src)
    # a norm without a weight commutes with the rotation (NanoChat: refused by that, later)
    weighted = norm is not None and getattr(getattr(module, norm.group(1), None), "weight",
                                            None) is not None
    return rope >= 0 and weighted and norm.start() > rope



# (feature, test on the module and its config, the refusal's message), in the order they are checked
FEATURES = (
    Refusal("disentangled relative attention",                           # DeBERTa-v2 / v3
            lambda m, cfg: bool(getattr(m, "relative_attention", False)),
            "disentangled relative attention (DeBERTa: scores q.k + q.r_k(i-j) + "
            "k.r_q(j-i) from relative-position embeddings, content-to-position and "
            "position-to-content, scaled by 1/sqrt(3 d))"),
    Refusal("DeBERTa-v2 scale",
            lambda m, cfg: hasattr(m, "relative_attention") and hasattr(m, "pos_att_type"),
            "DeBERTa-v2 attention without relative attention (its scores scaled by "
            "1/sqrt(head_dim * (1 + [c2p] + [p2c])) from its pos_att_type, the "
            "square root taken in float32, and a boolean (B, 1, L, S) mask)"),
    Refusal("relative position bias table", lambda m, cfg: _bias_table_not_read(m),
            "a relative position bias table (BEiT, Data2VecVision, Swin: a learned "
            "bias per head for each relative offset between two patches of a window)"),
    Refusal("differential attention",                                    # DiffLlama
            lambda m, cfg: hasattr(m, "lambda_q1") and hasattr(m, "lambda_k1"),
            "differential attention (DiffLlama: the difference of two softmax "
            "maps, the second weighted by a learned lambda, then a norm per head)"),
    Refusal("dynamic mask",                                              # Doge
            lambda m, cfg: hasattr(m, "dt_proj") and hasattr(m, "keep_window_size"),
            "a dynamic mask (Doge: an input-dependent bias on the keys from dt_proj "
            "and A, the top keep_window_size keys kept)"),
    Refusal("attention pooling",                                         # VideoPrism
            lambda m, cfg: getattr(m, "pooling_attention_query", None) is not None,
            "attention pooling (VideoPrism: a learned query, "
            "pooling_attention_query, not a projection of the hidden states, "
            "attends them, its features scaled by softplus(per_dim_scale))"),
    Refusal("per_dim_scale",                                             # Gemma 3n
            lambda m, cfg: getattr(m, "per_dim_scale", None) is not None,
            "a learned scale per query feature (softplus(per_dim_scale) times "
            "1/sqrt(head_dim): attention_np's score scale is one number)"),
    Refusal("position_bias from outside",                                # MPNet
            lambda m, cfg: "position_bias" in forward_parameters(m) and
            not hasattr(m, "has_relative_attention_bias") and
            bool(re.search(r"attention_scores \+= position_bias", forward_source(m))),
            "a relative position bias computed outside the layer (MPNet: its "
            "encoder's bucketed table, passed as position_bias and added to the "
            "scores; a T5 layer holds its own table, compared in its replay)"),
    Refusal("qk_layer_norms",                                            # IDEFICS
            lambda m, cfg: getattr(m, "qk_layer_norms", False) is True,
            "a QK-norm after RoPE (IDEFICS's qk_layer_norms: q and k normalised "
            "after they are turned; attention_np normalises before)"),
    Refusal("attn_sub_norm",                                             # BitNet
            lambda m, cfg: getattr(m, "attn_sub_norm", None) is not None,
            "a norm of the concatenated heads before W^O (BitNet's attn_sub_norm)"),
    Refusal("sigmoid output gate", lambda m, cfg: _gated_output(m),
            "a gated attention output (the concatenated heads times "
            "sigmoid(gate), a projection of the layer's input, before W^O)"),
    Refusal("sigmoid g_proj gate",                                       # LFM 3 (use_attention_gate)
            lambda m, cfg: bool(re.search(r"sigmoid\(self\.g_proj\(", forward_source(m))) and
            getattr(m, "g_proj", None) is not None,
            "a gated attention output (each head times sigmoid(g_proj(x)), a "
            "projection of the layer's input, before W^O)"),
    Refusal("softplus output gate",                                      # Laguna
            lambda m, cfg: bool(re.search(r"softplus\((self\.)?g(ate)?(_proj)?\(", forward_source(m))),
            "a gated attention output (the concatenated heads times "
            "softplus(g_proj(x)), a projection of the layer's input, before W^O)"),
    Refusal("shared attention adapters",                                 # Zamba 2
            lambda m, cfg: getattr(cfg, "use_shared_attention_adapter", False) is True and
            hasattr(m, "linear_q_adapter_list"),
            "low-rank adapters added to the shared q, k, v projections, one per "
            "call site (Zamba 2's use_shared_attention_adapter)"),
    Refusal("v_norm",                                                    # EmbeddingGemma 2, Gemma 4
            lambda m, cfg: getattr(m, "v_norm", None) is not None,
            "a norm of the values (v_norm: each value head RMS-normalised before "
            "the attention weights average them)"),
    Refusal("scaling per feature",                                       # TimesFM, TimesFM 2.5
            lambda m, cfg: getattr(getattr(m, "scaling", None), "ndim", 0) == 1,
            "a learned scale per query feature (scaling: a parameter of head_dim "
            "entries, e.g. softplus(scaling) / sqrt(d), not one score scale)"),
    Refusal("QK-norm after RoPE", lambda m, cfg: _norm_after_rope(m),       # HunYuan
            "QK-norm after RoPE (the rotated queries and keys normalised; "
            "attention_np normalises them before rotating, which differs unless the "
            "norm's weight is the same on both features of every pair)"),
    Refusal("CodeGen's fused qkv_proj", lambda m, cfg: "mp_num" in forward_source(m),   # CodeGen
            "a fused qkv_proj in CodeGen's layout (split into mp_num model-parallel "
            "blocks, each [q | v | k])"),
    Refusal("clip_qkv",                                                  # MPT, OLMo
            _clips,
            lambda m, cfg: f"clamping q, k, v to +-{_clip(m, cfg)} (clip_qkv)"),
)


def refuse_features(module, cfg) -> None:
    """Refuse the first feature of :data:`FEATURES` the layer has, naming it (none: return).

    Parameters
    ----------
    module : torch.nn.Module
        The layer (its float64 view).
    cfg : transformers config or None
        The layer's ``config``.
    """
    for refusal in FEATURES:
        if refusal.applies(module, cfg):
            refuse(module, refusal.text(module, cfg))
