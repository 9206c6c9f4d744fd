"""Attention algorithms other than the paper's, refused by name before a layer is read.

A layer that scores something else than every allowed query-key pair of one softmax (LSH buckets,
chunked local, global+local, block-sparse, linear and recurrent layers, grid attention of vision
backbones: :data:`ALGORITHMS`), that takes other inputs than its hidden states
(:data:`FORWARD_INPUTS`), that uses an option of ``torch.nn.MultiheadAttention`` the spec cannot
express, or whose computation goes through projections the reader does not read, is refused with the
algorithm named (:class:`~attention_np.interop.transformers.refusal.UnsupportedLayer`), so that the
real feature is named rather than what reading it would trip over. The features a layer adds to the
paper's attention are refused by :mod:`.feature_refusals`.
"""

from __future__ import annotations

import inspect
import re

from attention_np.interop.transformers.layer_source import forward_source
from attention_np.interop.transformers.refusal import refuse
from attention_np.interop.transformers.weights import NAMES, torch_mha, unread_projections


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
     and _GRID_INPUT.search(forward_source(m)) is not None,
     "window attention over a (B, H, W, C) grid of patches (DaViT, Florence-2: the grid "
     "padded and cut into window_size x window_size windows, each attending within itself)"),
    (lambda m: hasattr(m, "qkv") and _GRID_INPUT.search(forward_source(m)) is not None,
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
        (lambda m: "apply_multidimensional_rope(" in forward_source(m),
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


def refuse_other_inputs(module, projects_inputs: bool) -> None:
    """Refuse, by name, a layer whose ``forward`` requires one of :data:`FORWARD_INPUTS`, or
    that adds WavLM's gated relative position bias or Transformer-XL relative position terms
    (learned biases u and v). ``projects_inputs``: the layer takes query, key and value inputs and
    projects each itself (``layer_reading.qkv_inputs``), so those three are not other inputs."""
    params = inspect.signature(module.forward).parameters
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    if projects_inputs:                       # it projects its own query, key, value inputs
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

