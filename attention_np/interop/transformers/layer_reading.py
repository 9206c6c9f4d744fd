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

Reads attributes (and probes two small functions of the layer's family): imports neither torch
nor transformers itself.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass, replace

import numpy as np

from attention_np._checks import check_array, check_flag
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.refusal import UnsupportedLayer, check_module, refuse
from attention_np.interop.transformers.rotary import rope_scaling_from_config
from attention_np.interop.transformers.weights import (
    NAMES,
    QK_NORMS,
    find_projections,
    float64_view,
    linear_tensors,
    norm_tensors,
    qkv_columns,
    read_qk_norm,
    torch_mha,
    unread_projections,
)
from attention_np.variants.position_bias import alibi_slopes
from attention_np.variants.rope_scaling import ROPE_TYPES
from attention_np.variants.spec import AttentionSpec, RoPE
from attention_np.variants.window import sliding_window_mask

# the families the docs list by name (a tag for messages and family-specific traps; a subclass
# gets the tag of its nearest listed base). Support does not depend on it.
SUPPORTED = {
    "BertSelfAttention": "bert", "ViTAttention": "vit", "GPT2Attention": "gpt2",
    "BartAttention": "bart", "LlamaAttention": "llama", "MistralAttention": "mistral",
    "Qwen2Attention": "qwen2", "T5Attention": "t5",
    "Qwen3Attention": "qwen3", "Gemma2Attention": "gemma2", "Gemma3Attention": "gemma3",
    "GptOssAttention": "gpt_oss",
}
ROPE = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gpt_oss")   # (legacy tags)


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


def forward_parameters(module) -> tuple:
    """The names of the layer's ``forward`` parameters."""
    return tuple(inspect.signature(module.forward).parameters)


def _source(module) -> str:
    try:
        return inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return ""


def _pools_queries(module) -> bool:
    """Whether the layer pools its queries (SAM2's Hiera: ``query_stride`` a (row, column)
    stride; Hiera: an int above 1)."""
    stride = getattr(module, "query_stride", None)
    if isinstance(stride, (tuple, list)):
        return any(s != 1 for s in stride)
    return isinstance(stride, int) and stride > 1


# the forward unpacks its input as a (B, H, W, C) grid of patches
_GRID_INPUT = re.compile(r"\w+,\s*height,\s*width,\s*\w+\s*=\s*hidden_states?\.shape")

# layers of vision backbones that compute something else than the paper's attention of a
# (B, L, d_model) sequence, each named by what it computes (checked in this order, after the
# decomposed relative positions, so that the most specific feature is named)
GRID_ALGORITHMS = (
    (lambda m: hasattr(m, "qkv") and _pools_queries(m),
     "query pooling (SAM2's and Hiera's multi-scale attention: the queries max-pooled by "
     "query_stride, fewer queries than keys and values, the output on the pooled grid)"),
    (lambda m: hasattr(m, "qkv") and getattr(m, "use_mask_unit_attn", False) is True,
     "mask-unit attention (Hiera: the tokens unrolled into mask units of "
     "query_stride x window_size tokens, each unit attending only within itself)"),
    (lambda m: hasattr(m, "qkv") and "ChannelAttention" in type(m).__name__
     and hasattr(m, "groups"),
     "channel attention (DaViT, Florence-2: within each group the channels attend each "
     "other, scores over the tokens scaled by 1/sqrt(number of tokens))"),
    (lambda m: hasattr(m, "qkv") and hasattr(m, "window_size")
     and _GRID_INPUT.search(_source(m)) is not None,
     "window attention over a (B, H, W, C) grid of patches (DaViT, Florence-2: the grid "
     "padded and cut into window_size x window_size windows, each attending within itself)"),
    (lambda m: hasattr(m, "qkv") and _GRID_INPUT.search(_source(m)) is not None,
     "attention over a (B, H, W, C) grid of patches (SAM2's Hiera, ViTDet: the layer takes "
     "the patch grid, not a (B, L, d_model) sequence)"),
)

# attention algorithms other than the paper's (a score for every allowed query-key pair), each
# refused by its name before anything else is read: (test on the module, the name)
ALGORITHMS = (
    (lambda m: hasattr(m, "chunk_size") and hasattr(m, "max_past_horizon")
     and hasattr(m, "relative_position_embedding"),
     "chunked local attention with relative position logits (Gemma 3n's audio encoder: each "
     "block of chunk_size queries over its context of past and future keys, the scores plus a "
     "sinusoidal relative position term, soft-capped)"),
    (lambda m: hasattr(m, "num_hashes") or "LSH" in type(m).__name__,
     "LSH bucketed attention (Reformer: queries and keys hashed into buckets, attention within "
     "sorted chunks of a bucket)"),
    (lambda m: hasattr(m, "chunk_length") and hasattr(m, "num_chunks_before"),
     "chunked local attention (Reformer: each chunk of queries attends its own and the "
     "neighbouring chunks of keys)"),
    (lambda m: hasattr(m, "query_global") or hasattr(m, "one_sided_attn_window_size"),
     "sliding-window attention with global tokens (Longformer: a local band plus global "
     "attention with its own projections)"),
    (lambda m: hasattr(m, "num_random_blocks") or "BlockSparse" in type(m).__name__,
     "block-sparse attention (BigBird: global, sliding and random blocks of keys)"),
    (lambda m: getattr(m, "distance_embedding", None) is not None,
     "relative position scores from a distance embedding (position_embedding_type "
     "'relative_key' or 'relative_key_query': q.r(i - j), with k.r(i - j), added to the "
     "scores)"),
    (lambda m: hasattr(m, "mlstm_backend"),
     "an mLSTM layer (xLSTM: a matrix memory updated along the sequence by exponential input "
     "and forget gates, no softmax over scores)"),
    (lambda m: hasattr(m, "ngram") and hasattr(m, "num_buckets") and hasattr(m, "query_proj"),
     "n-gram self-attention (ProphetNet's decoder: a main stream and ngram predicting "
     "streams, each attending with its own relative position buckets)"),
    (lambda m: hasattr(m, "num_landmarks"),
     "Nystrom approximate attention (Nystromformer: the softmax of all pairs approximated "
     "through num_landmarks landmark queries and keys, segment means)"),
    (lambda m: hasattr(m, "hash_code_len") and hasattr(m, "num_hash"),
     "YOSO attention (hashing-based Bernoulli sampling: LSH collision probabilities of "
     "normalised queries and keys in place of a softmax)"),
    (lambda m: hasattr(m, "num_block") and hasattr(m, "approx_mode"),
     "multi-resolution approximate attention (MRA: block scores at a low resolution, the top "
     "blocks computed exactly)"),
    (lambda m: "Lightning" in type(m).__name__ and hasattr(m, "block_size"),
     "lightning attention (MiniMax: linear attention, a decaying recurrent state carried "
     "across blocks, no softmax over scores)"),
    (lambda m: hasattr(m, "global_block_size") and hasattr(m, "block_len") and hasattr(m, "q"),
     "transient-global attention (LongT5 TGlobal: block-local attention plus one global token "
     "per global_block_size tokens, their sum, with its own bias)"),
    (lambda m: hasattr(m, "local_radius") and hasattr(m, "block_len") and hasattr(m, "q"),
     "block-local attention (LongT5: each block of block_len queries attends its own and the "
     "two neighbouring blocks, local_radius keys each side)"),
    (lambda m: hasattr(m, "conv_kernel_layer") and hasattr(m, "key_conv_attn_layer"),
     "mixed attention with span-based dynamic convolution (ConvBERT: self-attention heads "
     "beside heads that convolve the values with kernels computed from each query's span)"),
    (lambda m: type(getattr(m, "multihead_attn", None)).__name__ == "MultiheadAttention"
     and hasattr(m, "q_proj"),
     "projections in front of torch's nn.MultiheadAttention (Aria: q_proj, k_proj, v_proj, "
     "then the MultiheadAttention's own in-projection, attention and out-projection)"),
    (lambda m: hasattr(m, "in_proj") and hasattr(m, "q_bias") and hasattr(m, "v_bias"),
     "DeBERTa (v1) attention (a fused in_proj with separate q_bias, v_bias and, with "
     "relative_attention, disentangled relative attention)"),
    (lambda m: "Delta" in type(m).__name__ and hasattr(m, "conv1d") and hasattr(m, "b_proj"),
     "a gated delta-rule layer (linear attention: a recurrent state updated by the delta rule "
     "along the sequence, no softmax over scores)"),
    (lambda m: getattr(m, "is_kv_shared_layer", False) is True,
     "keys and values shared across layers (Gemma 3n, Gemma 4: this layer reuses the keys and "
     "values an earlier layer projected, and has no key or value projection of its own)"),
    (lambda m: hasattr(m, "k_sconv") and hasattr(m, "rel_logits_proj"),
     "Inkling attention (keys and values through short causal convolutions, and a relative "
     "position bias computed from each query's own projection r_proj)"),
    (lambda m: getattr(m, "relative_attention", False) is True and hasattr(m, "pos_att_type"),
     "disentangled relative attention (DeBERTa: scores q.k + q.r_k(i-j) + k.r_q(j-i) from "
     "relative-position embeddings, content-to-position and position-to-content, scaled by "
     "1/sqrt(3 d))"),
    (lambda m: hasattr(m, "logit_scale") and hasattr(m, "continuous_position_bias_mlp"),
     "scaled cosine attention (Swin V2, Swin2SR: queries and keys L2-normalised, their cosine "
     "times a learned per-head logit scale exp(min(logit_scale, log 100)), plus a continuous "
     "position bias 16 sigmoid(MLP(log-spaced relative coordinates)) in each window)"),
    (lambda m: all(hasattr(m, n) for n in ("r_w_bias", "r_r_bias", "seg_embed", "r")),
     "two-stream relative attention (XLNet: a content stream and a query stream, scores "
     "(q + r_w).k + (q + r_r).r(i - j) with Transformer-XL's learned biases, plus a segment "
     "term (q + r_s).seg_embed)"),
    (lambda m: all(hasattr(m, n) for n in ("r_w_bias", "r_r_bias", "seg_embed", "r_kernel")),
     "Funnel relative attention (Funnel Transformer: Transformer-XL position terms with learned "
     "biases r_w, r_r and r_kernel, a segment term from seg_embed, and in the first layer of "
     "each block after the first the queries pooled by stride 2, fewer than the keys)"),
    (lambda m: hasattr(m, "context_size") and hasattr(m, "rel_pos_emb") and hasattr(m, "to_kv"),
     "block-local attention with Shaw relative position scores (Granite Speech's Conformer: "
     "the sequence cut into blocks of context_size, each attending only within itself, "
     "q.r(i - j) from a learned rel_pos_emb added to the scores)"),
    (lambda m: hasattr(m, "conv1d") and hasattr(m, "b_proj") and hasattr(m, "forget_gate"),
     "Kimi delta attention (KDA, GLM-5-Next's linear layers: linear attention, a recurrent "
     "state updated by the delta rule with a per-channel forget gate, no softmax over "
     "scores)"),
    (lambda m: getattr(getattr(m, "q_proj", None), "use_flexible_linear", False) is True,
     "per-codebook projections (Moshi's and Kyutai's depth decoders: each position of the "
     "sequence projected by its own codebook's q, k, v and output weights)"),
    *(  # what a layer without q, k, v projections computes (checked before the projections)
        (lambda m: hasattr(m, "kv_a_proj_with_mqa") and hasattr(m, "kv_b_proj"),
         "multi-head latent attention (MLA, DeepSeek-V2/V3: keys and values expanded by "
         "kv_b_proj from a normed low-rank latent kv_a_proj(x), a decoupled RoPE part of the "
         "keys shared by all heads, query and value head widths apart)"),
        (lambda m: hasattr(m, "time_decay") and hasattr(m, "time_first"),
         "RWKV's time-mixing recurrence (a state decayed by time_decay along the sequence, "
         "keys weighted by time_first, gated by the receptance; no softmax over scores)"),
        (lambda m: hasattr(m, "experts") and hasattr(m, "kv_proj") and hasattr(m, "top_k"),
         "a mixture of attention heads (JetMoE's MoA: each token's query and output "
         "projections chosen by a router among experts)"),
        (lambda m: hasattr(m, "w_g") and hasattr(m, "to_query") and hasattr(m, "to_key"),
         "efficient additive attention (SwiftFormer: one global query pooled from the queries "
         "by learned weights w_g, multiplied element-wise with the keys; no query-key scores)"),
        (lambda m: "LinearSelfAttention" in type(m).__name__,
         "separable linear self-attention (MobileViTV2: a context score per position from one "
         "projection, softmax over positions, one context vector times the values; no "
         "query-key scores)"),
        (lambda m: hasattr(m, "attn_layer") and hasattr(m, "attn_softmax"),
         "gated attention (PatchTSMixer: the input times softmax(Linear(input)) over its "
         "features; no queries, keys or scores)"),
        (lambda m: hasattr(m, "pos_bias_u") and hasattr(m, "pos_bias_v"),
         "Transformer-XL relative position attention (Wav2Vec2-Conformer: scores "
         "(q + u).k + (q + v).r(i - j) with learned biases u, v and a projection linear_pos "
         "of relative position embeddings)"),
        (lambda m: hasattr(m, "project_q") and hasattr(m, "project_k") and hasattr(m, "dim_head"),
         "CPM-Ant attention (queries from hidden_q, keys and values from hidden_kv, with its "
         "segment relative position bias: buckets of segment pairs and relative positions, "
         "computed by the model and passed as position_bias)"),
        (lambda m: getattr(m, "rel_pos_h", None) is not None and
         getattr(m, "rel_pos_w", None) is not None,
         "decomposed relative position embeddings (SAM, SegGPT, ViTDet: q . R_h(row offset) + "
         "q . R_w(column offset) added to the scores, from rel_pos_h and rel_pos_w over the "
         "(B, H, W, C) patch grid)"),
        (lambda m: hasattr(m, "relative_k_proj") and hasattr(m, "chunk_size"),
         "chunked local attention with relative position logits (Gemma 4 audio: queries in "
         "blocks of chunk_size over a context of past and future keys, a learned per-feature "
         "query scale and projected relative position embeddings, soft-capped logits)"),
        (lambda m: "apply_multidimensional_rope(" in _source(m),
         "2-D RoPE (Gemma 4 vision: apply_multidimensional_rope turns parts of each head by a "
         "patch's row and column positions)"),
        (lambda m: all(hasattr(m, n) for n in ("d_dim", "h_dim", "w_dim", "grid_depth")),
         "3-D RoPE (V-JEPA 2: the head's features in three parts, turned by a token's frame, "
         "row and column positions in its video grid)"),
        (lambda m: getattr(m, "emb_rel_k", None) is not None,
         "relative position representations of keys and values (VITS: q.r_k(j - i) added to "
         "the scores and the weights times r_v(j - i) added to the output, learned for "
         "|j - i| <= window_size, zero beyond)"),
        (lambda m: hasattr(m, "autocorrelation_factor"),
         "the auto-correlation mechanism (Autoformer: the FFT auto-correlation of queries and "
         "keys over time delays, the values rolled by the top delays and summed with the "
         "softmax of their correlations; no query-key scores)"),
        (lambda m: hasattr(m, "sink_proj") and hasattr(m, "relative_position_bias"),
         "Inkling2 attention (a relative position bias computed from the hidden states for "
         "each backward distance, sink logits projected from the input by sink_proj, a gated "
         "output projection)"),
        (lambda m: hasattr(getattr(m, "qkv_proj", None), "v_proj_current"),
         "compressed convolutional attention (ZAYA's CCA: q and k mixed by a causal "
         "convolution, v from a delayed recurrent state)"),
        (lambda m: hasattr(m, "ngram") and hasattr(m, "relative_pos_embeddings"),
         "n-stream self-attention (ProphetNet's decoder: a main stream and ngram predict "
         "streams, each with its own bucketed relative position bias)"),
        (lambda m: hasattr(m, "qk_channels_per_head") and hasattr(m, "layernorm1")
         and hasattr(m, "layernorm2"),
         "Perceiver attention (LayerNorms of the queries' input, layernorm1, and of the "
         "inputs, layernorm2, inside the layer before the projections; the latents attend "
         "the inputs passed as inputs, qk_channels and v_channels apart; no W^O in it)"),
        (lambda m: hasattr(m, "e2e_query") and hasattr(m, "e2w_query")
         and hasattr(m, "w2e_query"),
         "entity-aware self-attention (LUKE: words and entities in one sequence, each query "
         "projected by one of four matrices chosen by its own and the key's type, word or "
         "entity: query, w2e_query, e2w_query, e2e_query)"),
        (lambda m: hasattr(m, "attention_biases") and hasattr(m, "queries_subsample"),
         "subsampled LeViT attention (queries from a strided subsample of the patch grid, "
         "keys and values from all of it, attention biases per head over the absolute 2-D "
         "offsets of the two grids; projections each a Linear and a BatchNorm)"),
        (lambda m: hasattr(m, "attention_biases") and hasattr(m, "attention_bias_idxs"),
         "LeViT attention (attention biases per head over the absolute 2-D offset of two "
         "patches of the grid added to the scores; q, k, v from one Linear and BatchNorm, "
         "values attention_ratio times wider, a Hardswish before W^O)"),
        (lambda m: hasattr(m, "kv_proj") and hasattr(m, "q_a_proj") and hasattr(m, "o_a_proj"),
         "DeepSeek-V4 shared key-value attention (one head projected by kv_proj read as both "
         "keys and values, RoPE on it undone on the output by the conjugate rotation, "
         "low-rank normed queries, sinks, a grouped low-rank W^O, and on its CSA/HCA layers "
         "the compressor's extra key-value entries)"),
        *GRID_ALGORITHMS,
    ),
)


def recurrent_layer(module) -> str | None:
    """What a sequence-mixing layer without attention weights computes, by name (a state that
    decays by a learned ``A_log`` as it scans the sequence, fed by a short convolution: Mamba's
    selective scan, a gated delta-rule net), or None. Hybrid models (Zamba, Jamba, Falcon-H1,
    Qwen3-Next) interleave them with attention layers; the whole-model diff lists them as refused,
    so that a model is never AGREE on layers that were not compared."""
    name = type(module).__name__
    if not (hasattr(module, "conv1d") and (hasattr(module, "A_log") or  # Kimi, Bailing: a
                                           ("Delta" in name and hasattr(module, "b_proj")))):
        return None                          # forget gate of their own instead of A_log
    if "Delta" in name:
        return ("a gated delta-rule layer (linear attention: a recurrent state updated by the "
                "delta rule along the sequence, no softmax over scores)")
    if "Linear" in name:
        return ("a linear-attention layer with a decaying recurrent state (no softmax over "
                "scores)")
    return ("a state-space layer (Mamba's selective scan: a recurrent state with a learned decay "
            "A_log along the sequence, no attention weights)")


def refuse_other_algorithm(module) -> None:
    """Refuse, by its name, an attention algorithm that is not the paper's (LSH buckets,
    chunked local, global+local, block-sparse, disentangled): checked first, so that the real
    feature is named rather than what reading it would trip over."""
    for test, name in ALGORITHMS:
        if test(module):
            refuse(module, name)


# Inputs a layer's forward requires that say it computes something else than the paper's
# attention of its hidden states, each named by what it carries (checked beside ALGORITHMS)
FORWARD_INPUTS = (
    (("cu_seqlens",), "packed variable-length sequences (cu_seqlens: the images or clips "
                      "packed into one sequence attend only within their own span, a "
                      "block-diagonal mask built from cu_seqlens)"),
    (("key", "value"), "query, key and value passed as three separate inputs (SAM: the caller "
                       "projects three different sequences)"),
    (("keys", "values"), "query, keys and values passed as three separate inputs (X-CLIP's "
                         "cross attention: the caller projects three different sequences)"),
    (("query_tensor", "key_tensor", "value_tensor"), "query, key and value from three separate "
                                                     "inputs (MobileBERT: the value from the "
                                                     "layer input, query and key from its "
                                                     "bottleneck)"),
    (("query", "key"), "fairseq's attention call (FSMT: query, key and value passed "
                       "separately, time first)"),
    (("global_hidden_states",), "block-local attention with global tokens (PEGASUS-X: each "
                                "block attends itself and the global tokens, which attend "
                                "everything)"),
    (("height", "width"), "spatial-reduction attention (SegFormer: keys and values from a "
                          "strided convolution of the height x width feature map)"),
    (("context", "latents"), "Perceiver resampler attention (latent queries over the "
                             "context and the latents concatenated)"),
    (("context",), "attention over a context passed as a second input (LXMERT: keys and values "
                   "from context, the other modality's states or the layer's own input; "
                   "attention_np reads keys and values from key_value_states or "
                   "encoder_hidden_states)"),
    (("context_hidden_states",), "attention over a context sequence passed beside the hidden "
                                 "states (keys and values from both)"),
    (("bbox_pos_emb",), "bounding-box position scores (BROS: q.b(i, j), a term from each "
                        "pair of tokens' boxes, added to the scores)"),
    (("layout_inputs",), "two coupled attention streams (LiLT: text and layout, each "
                         "softmax over the sum of both streams' scores)"),
    (("hidden_states_scaling_factor",), "integer-only quantized attention (I-BERT: QuantLinear "
                                        "projections, requantized activations and an integer "
                                        "softmax, each with its scaling factor)"),
    (("from_tensor", "to_tensor"), "attention from one sequence to another passed as two "
                                   "inputs (CANINE: from_tensor, to_tensor)"),
    (("merged_attention_mask",), "merged self- and cross-attention (T5Gemma 2's decoder: one "
                                 "softmax over its own keys, turned by RoPE, and the encoder's "
                                 "keys, not turned, concatenated; RoPE on part of the keys)"),
    (("freqs_ci",), "2-D RoPE as complex frequencies (Llama 4's vision tower: freqs_ci, a "
                    "patch's column and row angles, each on its own features, the class token "
                    "unrotated)"),
)


def refuse_other_inputs(module) -> None:
    """Refuse, by name, a layer whose ``forward`` requires one of :data:`FORWARD_INPUTS`, or
    that adds WavLM's gated relative position bias or Transformer-XL relative position terms
    (learned biases u and v)."""
    params = inspect.signature(module.forward).parameters
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    if qkv_inputs(module) is not None:        # it projects its own query, key, value inputs
        required -= {"query", "key", "value"}
    for names, what in FORWARD_INPUTS:
        if set(names) <= required:
            refuse(module, what)
    if "sinusoidal_pos" in params:
        refuse(module, "RoFormer's rotary embedding (interleaved RoPE from the model's "
                        "sinusoidal_pos, on the values too with rotary_value)")
    if "rotary_pos_emb" in params:
        refuse(module, "RoPE as CLVP applies it (rotary_pos_emb: the first features of q, k and "
                        "v turned)")
    for attr, what in (
            ("attn_sub_norm", "a norm of the concatenated heads before W^O (BitNet's "
                              "attn_sub_norm)"),
            ("inner_attn_ln", "a LayerNorm of the concatenated heads before W^O (Kosmos-2's "
                              "inner_attn_ln, sub-LN)"),
            ("lambda_q1", "differential attention (DiffLlama: the difference of two softmax "
                          "maps weighted by a learned lambda)"),
            ("dt_proj", "a dynamic mask (Doge: a bias per key computed from the values)"),
            ("fsmn", "an FSMN memory block (SAN-M, Fun-ASR: a depthwise convolution along the "
                     "sequence of the masked values, added to the attention output)")):
        if getattr(module, attr, None) is not None:
            refuse(module, what)
    if hasattr(module, "gru_rel_pos_linear"):
        refuse(module, "a gated relative position bias (WavLM: a bucketed bias table times a "
                        "gate computed from each query)")
    if hasattr(module, "bias_u") and hasattr(module, "bias_v"):
        refuse(module, "Transformer-XL relative position attention (Conformer: scores "
                        "(q + u).k + (q + v).r(i - j) with learned biases u, v and a projection "
                        "of relative position embeddings)")


def keep_mask(module) -> bool:
    """Whether the layer's ``mask`` argument is a keep mask, not an additive one (XLM,
    FlauBERT: ``(B, S)`` or ``(B, L, S)``, the keys where it is 0 masked: ``mask == 0``)."""
    return "mask" in forward_parameters(module) and \
        re.search(r"\(mask == 0\)\.view\(", _source(module)) is not None


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


def refuse_torch_mha_options(module) -> None:
    """Refuse, by name, the options of ``torch.nn.MultiheadAttention`` the spec cannot express
    (checked before its projections are read)."""
    if not torch_mha(module):
        return
    if getattr(module, "in_proj_weight", None) is None:
        refuse(module, "key and value inputs of other widths than the query (torch "
                        "MultiheadAttention with kdim or vdim: q_proj_weight, k_proj_weight, "
                        "v_proj_weight)")
    if getattr(module, "bias_k", None) is not None:
        refuse(module, "a learned key and value appended to the sequence (torch "
                        "MultiheadAttention's add_bias_kv)")
    if getattr(module, "add_zero_attn", False):
        refuse(module, "a zero key and value appended to the sequence (torch "
                        "MultiheadAttention's add_zero_attn)")
    if not module.batch_first:
        refuse(module, "time-first inputs (L, B, E) (torch MultiheadAttention with "
                        "batch_first=False)")


def _unsupported_features(module, cfg) -> None:
    """Refuse what the spec cannot express, naming it (before the heads, widths and scale are
    read: a layer that adds a feature is refused by that feature, not by what reading it would
    trip over)."""
    if getattr(module, "relative_attention", False):            # DeBERTa-v2 / v3
        refuse(module, "disentangled relative attention (DeBERTa: scores q.k + q.r_k(i-j) + "
                        "k.r_q(j-i) from relative-position embeddings, content-to-position and "
                        "position-to-content, scaled by 1/sqrt(3 d))")
    if hasattr(module, "relative_attention") and hasattr(module, "pos_att_type"):
        refuse(module, "DeBERTa-v2 attention without relative attention (its scores scaled by "
                        "1/sqrt(head_dim * (1 + [c2p] + [p2c])) from its pos_att_type, the "
                        "square root taken in float32, and a boolean (B, 1, L, S) mask)")
    table = getattr(getattr(module, "relative_position_bias", None),
                    "relative_position_bias_table", None)
    if (table is not None or getattr(module, "relative_position_bias_table", None) is not None) \
            and bias_table_owner(module) is None:             # one we read: _grid_table
        refuse(module, "a relative position bias table (BEiT, Data2VecVision, Swin: a learned "
                        "bias per head for each relative offset between two patches of a window)")
    if hasattr(module, "lambda_q1") and hasattr(module, "lambda_k1"):           # DiffLlama
        refuse(module, "differential attention (DiffLlama: the difference of two softmax "
                        "maps, the second weighted by a learned lambda, then a norm per head)")
    if hasattr(module, "dt_proj") and hasattr(module, "keep_window_size"):      # Doge
        refuse(module, "a dynamic mask (Doge: an input-dependent bias on the keys from dt_proj "
                        "and A, the top keep_window_size keys kept)")
    if getattr(module, "pooling_attention_query", None) is not None:           # VideoPrism
        refuse(module, "attention pooling (VideoPrism: a learned query, "
                        "pooling_attention_query, not a projection of the hidden states, "
                        "attends them, its features scaled by softplus(per_dim_scale))")
    if getattr(module, "per_dim_scale", None) is not None or \
            getattr(getattr(module, "scaling", None), "ndim", 0) == 1:  # Gemma 3n, TimesFM
        refuse(module, "a learned scale per query feature (softplus(per_dim_scale) times "
                        "1/sqrt(head_dim): attention_np's score scale is one number)")
    if "position_bias" in forward_parameters(module) and \
            not hasattr(module, "has_relative_attention_bias") and \
            re.search(r"attention_scores \+= position_bias", _source(module)):     # MPNet
        refuse(module, "a relative position bias computed outside the layer (MPNet: its "
                        "encoder's bucketed table, passed as position_bias and added to the "
                        "scores; a T5 layer holds its own table, compared in its replay)")
    if getattr(module, "qk_layer_norms", False) is True:                       # IDEFICS
        refuse(module, "a QK-norm after RoPE (IDEFICS's qk_layer_norms: q and k normalised "
                        "after they are turned; attention_np normalises before)")
    if getattr(module, "attn_sub_norm", None) is not None:                     # BitNet
        refuse(module, "a norm of the concatenated heads before W^O (BitNet's attn_sub_norm)")
    if re.search(r"sigmoid\((self\.)?gate", _source(module)) or re.search(   # AFMoE, ...;
            r"\bgate\w*(\.unsqueeze\(-?\d+\))?\.sigmoid\(\)", _source(module)):  # Step 3.7
        refuse(module, "a gated attention output (the concatenated heads times "
                        "sigmoid(gate), a projection of the layer's input, before W^O)")
    if re.search(r"sigmoid\(self\.g_proj\(", _source(module)) and \
            getattr(module, "g_proj", None) is not None:          # LFM 3 (use_attention_gate)
        refuse(module, "a gated attention output (each head times sigmoid(g_proj(x)), a "
                        "projection of the layer's input, before W^O)")
    if re.search(r"softplus\((self\.)?g(ate)?(_proj)?\(", _source(module)):        # Laguna
        refuse(module, "a gated attention output (the concatenated heads times "
                        "softplus(g_proj(x)), a projection of the layer's input, before W^O)")
    if getattr(cfg, "use_shared_attention_adapter", False) is True and \
            hasattr(module, "linear_q_adapter_list"):                        # Zamba 2
        refuse(module, "low-rank adapters added to the shared q, k, v projections, one per "
                        "call site (Zamba 2's use_shared_attention_adapter)")
    if getattr(module, "v_norm", None) is not None:           # EmbeddingGemma 2, Gemma 4
        refuse(module, "a norm of the values (v_norm: each value head RMS-normalised before "
                        "the attention weights average them)")
    if getattr(getattr(module, "scaling", None), "ndim", 0) == 1:          # TimesFM 2.5
        refuse(module, "a learned scale per query feature (scaling: a parameter of head_dim "
                        "entries, e.g. softplus(scaling) / sqrt(d), not one score scale)")
    if _norm_after_rope(module):                                          # HunYuan
        refuse(module, "QK-norm after RoPE (the rotated queries and keys normalised; "
                        "attention_np normalises them before rotating, which differs unless the "
                        "norm's weight is the same on both features of every pair)")
    if "mp_num" in _source(module):                                      # CodeGen
        refuse(module, "a fused qkv_proj in CodeGen's layout (split into mp_num model-parallel "
                        "blocks, each [q | v | k])")
    clip = getattr(module, "clip_qkv", None) or getattr(cfg, "clip_qkv", None)   # MPT, OLMo
    if clip is not None and not isinstance(clip, bool) and "clip_qkv" in _source(module):
        refuse(module, f"clamping q, k, v to +-{clip} (clip_qkv)")


def refuse_unread_projections(module, projections) -> None:
    """Refuse a layer whose computation goes through projections the reader does not read: a
    ``torch.nn.MultiheadAttention`` inside it (Aria's cross attention: its own in- and
    out-projections after ``q_proj``, ``k_proj``, ``v_proj``), or, when no ``W^O`` is found
    under a known name, any other linear child, by its name (LiLT's layout stream and
    ConvBERT's convolution are refused earlier, by what they compute). Read as BERT's
    self-attention (no ``W^O``), such a layer would be compared without them: a false
    MISMATCH (InternVL's ``projection_layer`` before it was known)."""
    inner = [n for n, m in module.named_children() if type(m).__name__ == "MultiheadAttention"]
    if inner:
        refuse(module, f"a torch.nn.MultiheadAttention inside the layer ({inner[0]}: its own "
                        "in-projections and out_proj after the layer's q, k, v projections; "
                        "attention_np.interop.compare_mha diffs such a module alone)")
    unread = unread_projections(module, projections)
    if unread:
        refuse(module, f"projections under names the reader does not know, {unread} (no output "
                        f"projection named one of {NAMES['o']}: read as a layer without W^O, it "
                        "would be compared without them)")


def _norm_after_rope(module) -> bool:
    """Whether the layer's forward normalises its queries after rotating them (HunYuan:
    ``apply_rotary_pos_emb`` then ``self.query_layernorm``)."""
    src = _source(module)
    rope = src.find("apply_rotary_pos_emb(")
    norm = re.search(r"self\.(q_norm|q_layernorm|query_layernorm)\(", src)
    # a norm without a weight commutes with the rotation (NanoChat: refused by that, later)
    weighted = norm is not None and getattr(getattr(module, norm.group(1), None), "weight",
                                            None) is not None
    return rope >= 0 and weighted and norm.start() > rope


def _alibi(module, cfg, h: int, scale: float) -> tuple | None:
    """ALiBi's slopes, where a model puts it: an ``alibi`` argument (BLOOM; Falcon with
    ``config.alibi``), MPT's ``position_bias`` (its family's ``build_mpt_alibi_tensor``). Falcon adds the bias
    before the scale (its slopes times the scale here)."""
    params = forward_parameters(module)
    attn = getattr(cfg, "attn_config", None)
    if "alibi" in params and getattr(cfg, "alibi", True):
        slopes = alibi_slopes(h)
        if "*= self.inv_norm_factor" in _source(module):        # Falcon: (q.k + bias) * scale
            slopes = slopes * scale
    elif "position_bias" in params and getattr(attn, "alibi", True) and \
            family_function(module, "build_mpt_alibi_tensor") is not None:
        # MPT: its model always passes build_mpt_alibi_tensor(h, ..., alibi_bias_max=8)
        if h & (h - 1):
            refuse(module, f"MPT's ALiBi slopes for {h} heads (not a power of 2: MPT orders "
                            "them unlike BLOOM's rule, alibi_slopes)")
        slopes = 2.0 ** (-8.0 * np.arange(1, h + 1) / h)
    else:
        return None
    return tuple(float(m) for m in slopes)


def _heads(module, cfg, projections) -> tuple:
    """``(h, h_kv, head_dim)``: heads from the layer (or its config), widths from its weights."""
    def attr(names):
        return next((int(getattr(module, a)) for a in names
                     if isinstance(getattr(module, a, None), int)
                     and not isinstance(getattr(module, a), bool)), None)
    h = attr(("num_heads", "num_attention_heads", "n_heads", "n_head", "num_attn_heads"))
    h = h if h is not None else getattr(cfg, "num_attention_heads", None)
    d = attr(("head_dim", "attention_head_size", "head_size", "key_value_proj_dim"))
    if h is None:
        refuse(module, "a layer whose number of heads is not readable (no num_heads, "
                        "num_attention_heads, n_heads attribute or config.num_attention_heads)")
    if d is None:
        if projections.fused is not None and not _splits_in_three(module, projections, h):
            refuse(module, "a fused q/k/v projection without a readable head_dim")
        if projections.fused is not None:                   # [q | k | v], h heads each
            return h, h, _fused_width(projections) // (3 * h)
        d = projections.widths(h, 1)["q"] // h
    widths = projections.widths(h, d)
    if widths["q"] != h * d:
        refuse(module, f"a query projection of width {widths['q']} != heads {h} x head_dim {d}"
               + (f" ({h} heads do not divide its {widths['q']} features)"
                  if widths["q"] % h else ""))
    o = projections.o
    if widths["v"] == h * d != widths["k"] and o is not None and \
            int(o.weight.shape[0 if type(o).__name__ == "Conv1D" else 1]) == h * d:
        # Nemotron 3 audio with num_key_value_heads < num_attention_heads: k_proj h_kv heads
        # wide, v_proj h (eager cannot run it; sdpa's enable_gqa groups keys, not values)
        refuse(module, f"keys of {widths['k'] // d} heads beside values of {h} heads (k_proj "
                        f"{widths['k']} wide, v_proj {widths['v']}: the keys shared by groups "
                        "of query heads, the values not; attention_np groups both)")
    return h, widths["k"] // d, d


def _fused_width(projections) -> int:
    """The output width of the fused projection (a ``Conv1D``'s weight is ``(in, out)``)."""
    fused = projections.fused
    return int(fused.weight.shape[1 if type(fused).__name__ == "Conv1D" else 0])


def _splits_in_three(module, projections, h: int) -> bool:
    """Whether a fused ``qkv`` projection without a ``head_dim`` attribute is split by its
    forward into three equal parts of ``h`` heads each (TimeSformer, MGP-STR:
    ``qkv(x).reshape(B, L, 3, self.num_heads, C // self.num_heads)``): read from its source
    and checked against the projection's width."""
    src = re.sub(r"\s+", "", _source(module))
    width = _fused_width(projections) if projections.layout == "contiguous" else 0
    three = re.search(r"\.reshape\([^()]*,3,self\.num_(attention_)?heads,", src) is not None or \
        "split(self.split_size,dim=2)" in src and getattr(module, "split_size", 0) * 3 == width
    return width > 0 and width % (3 * h) == 0 and three     # (GPT-1: x.split(split_size, 2))


def _scale(module, d: int) -> float:
    """The score scale: an attribute (``scaling``, ``scale``, ...), the keyword the forward
    passes to transformers' attention function (ModernBERT: ``scaling=self.head_dim**-0.5``),
    or probed from the layer's own ``_attn`` (GPT-Neo: unscaled); never assumed."""
    for a in ("scaling", "scale", "inv_norm_factor", "softmax_scale"):
        v = getattr(module, a, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v) * _query_prescale(module)
    if torch_mha(module):           # torch's multi_head_attention_forward: q * sqrt(1 / head_dim)
        return float(d) ** -0.5
    attn = getattr(module, "_attn", None)           # GPT-1: Attention(scale=True or False)
    if isinstance(getattr(module, "scale", None), bool) and callable(attn) and re.search(
            r"if self\.scale:\s*w = w / math\.sqrt\(v\.size\(-1\)\)", inspect.getsource(attn)):
        return float(d) ** -0.5 if module.scale else 1.0
    if isinstance(getattr(module, "attention_head_size", None), int) and re.search(
            r"(attention_scores\s*=\s*attention_scores|scaling\s*=\s*1)\s*/\s*math\.sqrt\("
            r"self\.attention_head_size\)", _source(module)):   # BERT's older copies, Data2VecVision,
        return 1.0 / float(np.sqrt(module.attention_head_size))  # Swin's: in their forward
    if re.search(r"self\.q\w*\(hidden_states\)\s*/\s*\(self\.head_dim\s*\*\*\s*0\.5\)",
                 _source(module)) and isinstance(getattr(module, "head_dim", None), int):
        return float(module.head_dim) ** -0.5                   # ProphetNet: q / sqrt(d)
    if re.search(r"^\s*q = q / math\.sqrt\(self\.head_dim\)", _source(module), re.MULTILINE) \
            and isinstance(getattr(module, "head_dim", None), int):     # XLM, FlauBERT: the
        return float(module.head_dim) ** -0.5                             # queries, inline
    if re.search(r"scaling=self\.head_dim\s*\*\*\s*-0\.5\b", _source(module)) and \
            isinstance(getattr(module, "head_dim", None), int):
        return float(module.head_dim) ** -0.5
    probed = _probed_scale(module, d)
    if probed is not None:
        return probed
    refuse(module, "a layer whose score scale is not readable (no scaling, scale or "
                    f"inv_norm_factor attribute; 1/sqrt({d}) is not assumed)")


def _query_prescale(module) -> float:
    """The factor a layer's forward multiplies its queries by before the attention function
    (ESM: ``query_layer * self.attention_head_size**-0.5``, then ``scaling=1.0``; before RoPE,
    which is linear, so the scores are scaled the same), else 1."""
    m = re.search(r"\bquery\w* = query\w* \* self\.(attention_head_size|head_dim)\s*\*\*\s*"
                  r"-0\.5\s*$", _source(module), re.MULTILINE)
    width = None if m is None else getattr(module, m.group(1), None)
    if not isinstance(width, int) or isinstance(width, bool):
        return 1.0
    return float(width) ** -0.5


def _probed_scale(module, d: int) -> float | None:
    """The scale of a layer that scores in its own ``_attn(query, key, value, attention_mask)``
    (GPT-Neo; OpenAI GPT's ``_attn(q, k, v, ...)``), measured: two queries over two keys,
    ``0`` and ``e_0``, values ``e_0`` and ``e_1``; the second query ``e_0`` (the last
    position, so that a causal or local mask keeps both keys, its buffer sliced top-left or
    bottom-right) gives the two weights, ``log(w_1 / w_0)`` the scale. It is named 1 or 1/sqrt(d) when
    it is one of them within 1e-5 (the layer may score in float32); another value is refused
    with the number. None: no such method."""
    fn = getattr(module, "_attn", None)
    names = tuple(inspect.signature(fn).parameters)[:3] if callable(fn) else ()
    if names not in (("query", "key", "value"), ("q", "k", "v")):     # GPT-Neo; OpenAI GPT
        return None
    import torch
    dtype = next(module.parameters()).dtype
    q, k, v = (torch.zeros((1, 1, 2, d), dtype=dtype) for _ in range(3))   # the 2nd query:
    q[..., 1, 0], k[..., 1, 0], v[..., 0, 0], v[..., 1, 1] = 1.0, 1.0, 1.0, 1.0  # the last, it
    if names[1] == "k":                                 # sees both keys top-left or bottom-right
        k = k.transpose(-1, -2)                         # OpenAI GPT: (B, h, d, S), split_heads(k=True)
    with torch.no_grad():
        out = to_numpy(fn(q, k, v, None)[0]).astype(np.float64)[0, 0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        measured = float(np.log(out[1] / out[0]))
    for scale in (1.0, d ** -0.5):
        if abs(measured - scale) <= 1e-5 * scale:
            return scale
    refuse(module, f"a score scale measured as {measured:.6g} (neither 1 nor 1/sqrt({d}))")


def _layer_type(module, cfg) -> str | None:
    """The layer's type (``"sliding_attention"``, ``"full_attention"``, ...): its own
    ``layer_type``, else ``config.layer_types[layer_idx]``; None for a model without types."""
    kind = getattr(module, "layer_type", None)
    types, i = getattr(cfg, "layer_types", None), getattr(module, "layer_idx", None)
    if kind is None and isinstance(types, (list, tuple)) and isinstance(i, int) and \
            0 <= i < len(types):
        kind = types[i]
    return kind


def _in_width(projections) -> int:
    """d_model: the input width of the query (or fused) projection."""
    lin = projections.q if projections.q is not None else projections.fused
    return int(lin.weight.shape[0 if type(lin).__name__ == "Conv1D" else 1])


def _ignores_rotary(module, projections, r: int) -> bool:
    """Whether the layer's output does not depend on the ``position_embeddings`` it is passed
    (Cohere 2, EXAONE 4: the full-attention layers of a sliding/full model take them and skip
    RoPE), probed: two calls of its ``forward`` (no hooks run) on the same input, with
    cos = 1, sin = 0 and with other angles. False when the probe cannot run (the layer then
    counts as rotating)."""
    import torch
    dtype = next(module.parameters()).dtype
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((1, 3, _in_width(projections)), generator=gen, dtype=dtype)
    angles = torch.randn((1, 3, r), generator=gen, dtype=dtype)
    outs = []
    cfg = getattr(module, "config", None)      # probed under eager: flex_attention would compile
    own = getattr(cfg, "_attn_implementation", None)
    try:
        if own not in (None, "eager"):
            cfg._attn_implementation = "eager"
        for cos, sin in ((torch.ones_like(angles), torch.zeros_like(angles)),
                         (torch.cos(angles), torch.sin(angles))):
            try:
                with torch.no_grad(), torch.random.fork_rng():
                    torch.manual_seed(0)
                    out = module.forward(x, position_embeddings=(cos, sin), attention_mask=None)
            except (TypeError, RuntimeError, ValueError, AttributeError, IndexError):
                return False
            outs.append(out[0] if isinstance(out, tuple) else out)
    finally:
        if own not in (None, "eager"):
            cfg._attn_implementation = own
    return bool(torch.equal(outs[0], outs[1]))


def _rope(module, cfg, family: str, d: int, alibi, projections) -> dict:
    """RoPE of a layer that takes ``position_embeddings``: theta, scaling, width, layout
    (none with ALiBi: Falcon rotates only without it), read per layer: the layer type's own
    parameters (Gemma 3, ModernBERT), a per-layer theta (``layer_rope_theta``, 0: none), and in a
    model of several layer types whether this layer rotates at all (:func:`_ignores_rotary`)."""
    if alibi is not None or not getattr(module, "use_rope", True):    # SmolLM3's NoPE layers
        return {}
    in_layer = "position_embeddings" not in forward_parameters(module)
    table = _own_table(module) if in_layer else None
    if in_layer and not _own_rotary(module) and table is None:
        return {}
    in_layer = in_layer and table is None
    if getattr(module, "position_embedding_type", "rotary") != "rotary":
        return {}                # ESM: takes position_embeddings, rotates only when "rotary"
    flag = re.search(r"if self\.config\.(\w+):\s*\n\s*cos, sin = position_embeddings",
                     _source(module))
    if flag is not None and getattr(cfg, flag.group(1), True) is False:
        return {}                # Zamba 2: rotates only with config.use_mem_rope
    if "num_prefix_tokens" in _function_source(family_function(module, "apply_rotary_pos_emb")):
        refuse(module, "2-D RoPE of the patches' continuous (row, column) coordinates, the "
                        "class and register tokens not rotated (DINOv3: apply_rotary_pos_emb "
                        "turns only the last tokens, by angles of both coordinates)")
    rope = getattr(cfg, "rope_parameters", None) or {}
    kind = _layer_type(module, cfg) or getattr(module, "attention_type", None)
    rope = rope.get(kind, rope)               # Gemma 3, ModernBERT, OLMo 3: one per layer type
    theta = float(rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0)))
    thetas, i = getattr(cfg, "layer_rope_theta", None), getattr(module, "layer_idx", None)
    if isinstance(thetas, (list, tuple)) and isinstance(i, int) and 0 <= i < len(thetas):
        if not thetas[i]:                         # Granite SWA: theta 0, the layer gets None
            return {}
        theta = float(thetas[i])
    partial = rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 1.0))
    r = getattr(module, "rotary_ndims", None)
    if r is None and isinstance(getattr(module, "rotary_dim", None), int):      # GPT-J
        r = module.rotary_dim
    if r is None:
        r = int(d * partial) if rope.get("rope_type", "default") != "proportional" else d
    r = int(r)
    if r % 2 and 2 < r < d:               # Moonshine's tiny head: int(4 * 0.9) = 3
        refuse(module, f"an odd rotated width of {r} features (head_dim {d} x "
                        f"partial_rotary_factor {partial}: its rotary embedding turns {r + 1} "
                        f"features at the frequencies theta^(-2k/{r}) of a width of {r})")
    if r % 2 or not 2 <= r <= d:
        refuse(module, f"a rotated width of {r} features (head_dim {d})")
    partial_ok = r != d and (hasattr(module, "rotary_ndims") or hasattr(module, "rotary_dim")
                             or _rotates_part(module, d, r))
    # a layer that rotates the whole head keeps the factor: rope_scaling_from_config refuses it
    plain = {k: v for k, v in rope.items() if k != "partial_rotary_factor"} if partial_ok \
        else rope
    kind = plain.get("rope_type", "default")
    if kind not in ROPE_TYPES:
        refuse(module, f"RoPE of type {kind!r}" + (" (2-D axial RoPE: a patch's row and column "
                                                   "angles, each on its own features)"
                                                   if kind == "axial" else "")
               + f" (rope_type={kind!r}; the known ones are {sorted(ROPE_TYPES)})")
    scaling = rope_scaling_from_config(plain, cfg, type(module).__name__)
    if len(set(getattr(cfg, "layer_types", None) or ())) > 1 and family != "gpt_oss" and \
            _ignores_rotary(module, projections, r):
        return {}
    layout = "half" if family == "gpt_oss" else _rope_layout(module)
    return dict(rope_theta=theta, rope_scaling=scaling, rotary_dim=r, rope_layout=layout,
                rope_in_layer=in_layer, rope_table=table,
                rope_sections="apply_multimodal_rotary_pos_emb(" in _source(module),
                rope_angles_layout=_angles_layout(module, layout, r),
                rope_sin_first="sin, cos = position_embeddings" in _source(module))


def _own_table(module) -> str | None:
    """The name of the buffer a layer turns q and k from itself, rows ``[sin | cos]`` of the
    ``r/2`` angles gathered at its ``position_ids`` argument (GPT-J's ``embed_positions`` in
    transformers 5.15 to 5.17: ``create_sinusoidal_positions``, split ``sin, cos``), else None."""
    buf = getattr(module, "embed_positions", None)
    src = _source(module)
    if getattr(buf, "ndim", 0) == 2 and "position_ids" in forward_parameters(module) and \
            "embed_positions" in src and "sin, cos = torch.split(sincos" in src:
        return "embed_positions"
    return None


def _own_rotary(module) -> bool:
    """Whether a self-attention layer turns q and k with its own rotary embedding, run on the
    ``position_ids`` it is passed (IDEFICS: ``self.rotary_emb(value_states, position_ids)``
    in its forward), instead of taking the model's ``position_embeddings``."""
    return getattr(module, "rotary_emb", None) is not None and \
        "position_ids" in forward_parameters(module) and \
        not getattr(module, "is_cross_attention", False) and \
        "self.rotary_emb(" in _source(module)


def _function_source(fn) -> str:
    """A function's source ("" when it has none or is None)."""
    try:
        return inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return ""


def _rotates_part(module, d: int, r: int) -> bool:
    """Whether the family's ``apply_rotary_pos_emb`` takes cos, sin narrower than the head
    (GPT-NeoX's turns the first ``r`` features; Llama's broadcasts them against all ``d`` and
    fails)."""
    fn = family_function(module, "apply_rotary_pos_emb")
    if fn is None:
        return False
    import torch
    q, cs = torch.ones((1, 1, 2, d)), torch.ones((1, 2, r))
    try:
        out = fn(q, q, cs, cs)[0]
    except (RuntimeError, ValueError):
        return False
    return tuple(out.shape) == (1, 1, 2, d)


def _rope_layout(module) -> str:
    """Which features a RoPE pair joins, probed from the family's ``apply_rotary_pos_emb``
    (else its ``rotate_half``, GPT-J's ``rotate_every_two``): (0, 1, 2, 3)
    -> (-2, -3, 0, 1) pairs m with m + d/2 ("half"), -> (-1, 0, -3, 2) pairs 2m, 2m+1."""
    layout = rope_rotation(family_function(module, "apply_rotary_pos_emb"))
    if layout is not None:
        return layout
    import torch
    rotate_half = family_function(module, "rotate_half")
    every_two = family_function(module, "rotate_every_two")             # GPT-J: (B, L, h, r)
    if rotate_half is None and every_two is None:
        refuse(module, "a rotary embedding without a rotate_half or rotate_every_two function "
                        "(pair layout unknown)")
    got = (rotate_half(torch.arange(4.0)) if rotate_half is not None else
           every_two(torch.arange(4.0).reshape(1, 1, 1, 4))).reshape(-1).tolist()
    if tuple(got) not in LAYOUTS:
        refuse(module, f"a rotary pair layout with rotate_half([0, 1, 2, 3]) = {got}")
    return LAYOUTS[tuple(got)]


LAYOUTS = {(-2.0, -3.0, 0.0, 1.0): "half", (-1.0, 0.0, -3.0, 2.0): "interleaved"}


def rope_rotation(apply_rotary_pos_emb) -> str | None:
    """The pair layout a family's ``apply_rotary_pos_emb`` turns, probed with ``cos = 0`` and
    ``sin = 1`` (the same for every layout of the angles) on ``q = (0, 1, 2, 3)``: the rotation
    it calls, whatever its name (GLM-4V's text layers: ``rotate_half_llm``, interleaved, beside
    a ``rotate_half`` for its vision tower). None: no such function, or another signature."""
    if apply_rotary_pos_emb is None:
        return None
    import torch
    q, sin = torch.arange(4.0).reshape(1, 1, 1, 4), torch.ones((1, 1, 4))
    try:
        got = apply_rotary_pos_emb(q, q, torch.zeros_like(sin), sin)[0].reshape(-1).tolist()
    except (RuntimeError, TypeError, ValueError):
        return None
    return LAYOUTS.get(tuple(got))


def _angles_layout(module, layout: str, r: int) -> str | None:
    """How the ``position_embeddings`` of an interleaved-RoPE layer hold the ``r/2`` angles:
    ``"half"`` (concatenated, as Llama's rotary embedding gives them) when the family's
    ``apply_rotary_pos_emb`` interleaves the first half itself (GLM, Helium, ERNIE 4.5), None
    when it takes them already repeated in turn (Cohere)."""
    fn = family_function(module, "apply_rotary_pos_emb")
    if layout != "interleaved" or fn is None:
        return None
    return "half" if interleaves_first_half(fn, r) else None


def interleaves_first_half(apply_rotary_pos_emb, r: int = 4) -> bool:
    """Whether a family's ``apply_rotary_pos_emb`` repeats the first half of its cos and sin
    each twice in turn (GLM's ``cos[..., :r/2].repeat_interleave(2)``): probed with ``sin = 0``
    and ``cos`` the angles ``1..r/2`` concatenated, which it turns into ``1, 1, 2, 2, ...``."""
    import torch
    a = torch.arange(1.0, r // 2 + 1)
    q, cos = torch.ones((1, 1, 1, r)), torch.cat([a, a]).reshape(1, 1, r)
    try:
        out = apply_rotary_pos_emb(q, q, cos, torch.zeros_like(cos))[0].reshape(-1)
    except (RuntimeError, TypeError, ValueError):
        return False
    return bool(torch.equal(out, a.repeat_interleave(2)))


def family_function(module, name: str):
    """A function of the layer's modeling module (``rotate_half``, ``apply_rotary_pos_emb``):
    its class's, or for a subclass its nearest base's that has one; None if none has."""
    for cls in type(module).__mro__:
        fn = getattr(sys.modules.get(cls.__module__), name, None)
        if fn is not None:
            return fn
    return None


def bias_table_owner(module):
    """The module holding the layer's ``relative_position_bias_table``: the layer itself (Swin's
    older copies: Donut, MaskFormer, CLAP, Swin2SR) or its ``relative_position_bias`` (Swin,
    Data2VecVision); None."""
    for owner in (module, getattr(module, "relative_position_bias", None)):
        if getattr(owner, "relative_position_bias_table", None) is not None and \
                hasattr(owner, "window_size"):
            return owner
    return None


def _grid_table(module) -> tuple | None:
    """A 2-D relative position bias table the layer holds and adds to its scores (Data2VecVision,
    Swin): ``(height, width, cls)`` of its grid of patches, from the table's ``window_size`` and
    its rows (``(2H - 1)(2W - 1)``, ``+ 3`` with a class token). None when it has none."""
    table_module = bias_table_owner(module)
    if table_module is None or getattr(module, "has_relative_position_bias", True) is False:
        return None
    table = table_module.relative_position_bias_table
    H, W = (int(v) for v in table_module.window_size)
    rows = (2 * H - 1) * (2 * W - 1)
    if table.shape[0] not in (rows, rows + 3):
        refuse(module, f"a relative position bias table of {table.shape[0]} rows for a {H}x{W} "
                        f"grid (neither {rows} 2-D offsets nor {rows + 3} with a class token)")
    return H, W, table.shape[0] == rows + 3


def _window(module, cfg) -> int | None:
    """The layer's sliding window ``W`` (None: none), per layer: GPT-Neo's in its own causal
    buffer (:func:`_causal_band`), else the layer's ``sliding_window`` (None on a full-attention
    layer), else, for a layer without one, none on a ``"full_attention"`` layer and the config's
    window on the others."""
    band = _causal_band(module)
    if band is not None:
        return band or None
    if hasattr(module, "sliding_window"):
        return module.sliding_window
    if hasattr(getattr(module, "q_proj", None), "use_flexible_linear"):
        return None      # Moshi, Kyutai: the model masks with create_causal_mask, its
        #                  config's sliding_window unused by the mask (no window)
    if getattr(cfg, "use_sliding_window", True) is False or \
            _layer_type(module, cfg) == "full_attention":
        return None
    return getattr(cfg, "sliding_window", None)


def _causal_band(module) -> int | None:
    """A layer that masks its scores with its own boolean ``bias`` buffer ``(1, 1, P, P)``
    (GPT-Neo): 0 when the buffer is the causal mask, ``W`` when it keeps the last ``W`` keys
    (``i - W < j <= i``: its local layers); None without such a buffer. Any other pattern
    is refused."""
    buf = getattr(module, "bias", None)
    if getattr(buf, "dtype", None) is None or getattr(buf, "ndim", 0) != 4:
        return None
    if str(buf.dtype) != "torch.bool":          # (GPT-1's float buffer: _tril_weights)
        return None
    keep = to_numpy(buf)[0, 0]                                        # (P, P)
    P = keep.shape[-1]
    W = int(keep[-1].sum())
    if keep.shape != (P, P) or not np.array_equal(
            keep, sliding_window_mask(P, left=W - 1, right=0)):
        refuse(module, "a causal mask buffer (bias) that is neither causal nor a causal "
                        "sliding window")
    return 0 if W == P else W


def _tril_weights(module) -> bool:
    """A layer that masks its scores with a float buffer ``bias`` of ones on and below the
    diagonal, ``w * b - 1e4 * (1 - b)`` (GPT-1: a masked score is -1e4, whose weight
    ``exp(-1e4)`` is 0 in float64, as -inf's): causal. A float buffer of another pattern is
    refused."""
    buf = getattr(module, "bias", None)
    if getattr(buf, "ndim", 0) != 4 or not getattr(buf, "is_floating_point", lambda: False)() \
            or "-1e4 * (1 - b)" not in inspect.getsource(type(module)):
        return False
    keep = to_numpy(buf)[0, 0]
    if not np.array_equal(keep, np.tril(np.ones_like(keep))):
        refuse(module, "a float mask buffer (bias) that is not the causal mask")
    return True


def _softcap(module) -> float | None:
    cap = getattr(module, "attn_logit_softcapping", None)
    # Gemma 3 keeps attn_logit_softcapping but passes no softcap to its attention function
    return float(cap) if cap is not None and "softcap=" in _source(module) else None


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
    refuse_other_inputs(module)
    _unsupported_features(module, cfg)               # then the feature, before heads and scale
    refuse_unread_projections(module, projections)   # (no W^O known: not read as BERT's)
    h, h_kv, d = _heads(module, cfg, projections)
    if h_kv == 0 or h % h_kv:
        refuse(module, f"{h} query heads over {h_kv} key/value heads (not a whole number of "
                        "groups)")
    cross = bool(getattr(module, "is_cross_attention", False)) or (   # T5Gemma, Canary, Dia
        "Cross" in type(module).__name__ and
        bool({"encoder_hidden_states", "cross_attention_states"} & set(forward_parameters(module))))
    causal = (bool(getattr(module, "is_causal", False)) or _causal_band(module) is not None
              or _tril_weights(module)) and not cross    # (ImageGPT, GPT-1: by their own buffer)
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
    scale = _scale(module, d)
    alibi = _alibi(module, cfg, h, scale)
    rope = _rope(module, cfg, family, d, alibi, projections)
    _refuse_rope_only_in_self_attention(module, rope)
    return LayerSpec(
        family, h, h_kv, d, scale, causal, projections.has_o,
        window=_window(module, cfg), buckets=buckets, softcap=_softcap(module),
        qk_norm=None if norm is None else norm.kind,
        qk_norm_eps=None if norm is None else norm.eps,
        qk_norm_scope="head" if norm is None else norm.scope,
        sinks=getattr(module, "sinks", None) is not None,
        post_norm_eps=None if post is None else float(post.eps), cross=cross, alibi=alibi,
        adds_residual="residual" in forward_parameters(module),
        bool_mask_masks="masked_fill(attention_mask," in _source(module),
        grid_table=_grid_table(module),
        **rope)


def _refuse_rope_only_in_self_attention(module, rope: dict) -> None:
    """Refuse a RoPE layer that is cross-attention when called with ``key_value_states`` and
    then turns neither q nor k (Moonshine Streaming's decoder: one class for self- and
    cross-attention, ``is_cross_attention = key_value_states is not None``): one spec for both
    calls would turn them in the cross calls too (a false MISMATCH; the sweep, one layer per
    class, compared only the self-attention)."""
    src = _source(module)
    if rope.get("rope_theta") is not None and \
            "is_cross_attention = key_value_states is not None" in src and \
            "if not is_cross_attention" in src:
        refuse(module, "RoPE in self-attention only (the same layer called with "
                        "key_value_states is cross-attention without RoPE: one spec cannot "
                        "describe both calls)")


def value_scale(module) -> float:
    """The factor a layer's forward multiplies its projected values by (MiMo-V2-Flash:
    ``v_proj(x) * self.v_scale``, ``config.attention_value_scale``), else 1: linear, so read
    into ``W_v`` and ``b_v`` (:func:`params_from_transformers`)."""
    s = getattr(module, "v_scale", None)
    if not isinstance(s, (int, float)) or isinstance(s, bool) or \
            not re.search(r"\* self\.v_scale\b", _source(module)):
        return 1.0
    if not np.isfinite(s) or s == 0:
        refuse(module, f"values scaled by v_scale={s!r} (not a finite nonzero number)")
    return float(s)


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
        return to_numpy(a, np.float64)

    p = find_projections(module)
    h, h_kv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    out = {}
    if p.fused is None:
        for n in "qkv":
            out[f"W_{n}"], b = linear_tensors(getattr(p, n), get)
            if b is not None:
                out[f"b_{n}"] = b
    else:
        W, b = linear_tensors(p.fused, get)
        if p.kv_fused:
            out["W_q"], bq = linear_tensors(p.q, get)
            if bq is not None:
                out["b_q"] = bq
        for n, cols in qkv_columns(p.layout, h, h_kv, d, p.kv_fused).items():
            out[f"W_{n}"] = W[:, cols]
            if b is not None:
                out[f"b_{n}"] = b[cols]
    v_scale = value_scale(module)
    if v_scale != 1.0:             # values times v_scale: W_v, b_v folded; d/dW_v = s d/d(s W_v)
        for n in ("W_v", "b_v"):
            if n in out:
                out[n] = out[n] / v_scale if grads else out[n] * v_scale
    if p.o is not None:
        out["W_o"], b = linear_tensors(p.o, get)
        if b is not None:
            out["b_o"] = b
    if spec.buckets is not None:                       # T5: nn.Embedding (num_buckets, h)
        out["bias_table"] = get(module.relative_attention_bias.weight)
    if spec.grid_table is not None:                    # Data2VecVision, Swin: (rows, h)
        out["bias_table"] = get(bias_table_owner(module).relative_position_bias_table)
    norm = read_qk_norm(module, h, h_kv, d)
    if norm is not None:
        out.update(norm_tensors(norm, get))
        if not grads and norm.offset:                  # d/dw = d/d(offset + w)
            out["q_norm"], out["k_norm"] = out["q_norm"] + norm.offset, out["k_norm"] + norm.offset
    if spec.sinks:                                     # one learned sink logit per head (h,)
        out["sinks"] = get(module.sinks)
    if spec.post_norm_eps is not None:                 # ALBERT: LayerNorm(x + out)
        out["post_norm_w"], out["post_norm_b"] = get(module.LayerNorm.weight), \
            get(module.LayerNorm.bias)
    return {n: np.ascontiguousarray(a) for n, a in out.items()}, spec


__all__ = ["LayerSpec", "UnsupportedLayer", "attention_spec", "layer_spec", "mha_options",
           "no_causal", "qkv_inputs",
           "params_from_transformers", "QK_NORMS", "SUPPORTED"]
