"""Tiny random ``transformers`` attention layers, one per family, built in code (no download).

Every parameter, biases included, is redrawn from N(0, 0.3²) (the models' own init gives
zero biases and near-uniform attention, which would hide a bias in the wrong place). Each case
is ``(module, inputs)``, ``inputs`` the keyword arguments of
:func:`~attention_np.interop.transformers.compare_transformers_attention` besides the module.
"""

from __future__ import annotations

import numpy as np

from attention_np._optional import import_optional
from attention_np.interop.transformers.recent import EAGER_FLOAT64

B, L, S, D_MODEL = 2, 6, 7, 32
# the same shapes in every decoder: 4 query heads, 2 key/value heads, head_dim 12 != 32 / 4
DECODER = dict(hidden_size=D_MODEL, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
               num_hidden_layers=1, intermediate_size=40, vocab_size=61,
               max_position_embeddings=64)
WINDOW = 3                                  # Mistral's and Qwen2's sliding window, < L


def randomize(model, seed: int):
    """``model`` with every parameter drawn from ``0.3 * N(0, 1)`` by a generator seeded with
    ``seed`` (the same numbers on any machine), in eval mode: a tiny model whose layers are far
    from their initialisation, so that a misread weight shows."""
    torch = import_optional("torch", "attention_np.interop.transformers.family_cases")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model.eval()


def tiny_model(family: str, seed: int = 0, attn_implementation: str = "sdpa", causal_lm=False):
    """A one-layer random model of ``family`` (a key of :data:`FAMILIES`), float32 as built;
    ``causal_lm=True``: with its language-model head, for ``generate()`` (``GPT2LMHeadModel``,
    ``...ForCausalLM``; BART and T5: ``...ForConditionalGeneration``)."""
    tf = import_optional("transformers", "attention_np.interop.transformers.family_cases")
    kw = dict(attn_implementation=attn_implementation)
    if family == "bert":
        cfg = tf.BertConfig(hidden_size=D_MODEL, num_attention_heads=4, num_hidden_layers=1,
                            intermediate_size=40, vocab_size=61, **kw)
        return randomize(tf.BertModel(cfg), seed)
    if family == "vit":
        cfg = tf.ViTConfig(hidden_size=D_MODEL, num_attention_heads=4, num_hidden_layers=1,
                           intermediate_size=40, image_size=8, patch_size=4, **kw)
        return randomize(tf.ViTModel(cfg), seed)
    if family in ("gpt2", "gpt2-cross"):
        cfg = tf.GPT2Config(n_embd=D_MODEL, n_head=4, n_layer=1, vocab_size=61, n_positions=64,
                            bos_token_id=0, eos_token_id=0,
                            add_cross_attention=family == "gpt2-cross", **kw)
        return randomize((tf.GPT2LMHeadModel if causal_lm else tf.GPT2Model)(cfg), seed)
    if family == "bart":
        cfg = tf.BartConfig(d_model=D_MODEL, encoder_attention_heads=4, decoder_attention_heads=4,
                            encoder_layers=1, decoder_layers=1, encoder_ffn_dim=40,
                            decoder_ffn_dim=40, vocab_size=61, max_position_embeddings=64, **kw)
        return randomize((tf.BartForConditionalGeneration if causal_lm else tf.BartModel)(cfg),
                          seed)
    if family == "t5":
        # few buckets, so that L = 6 already reaches the log-spaced ones
        cfg = tf.T5Config(d_model=D_MODEL, d_kv=12, num_heads=4, num_layers=1,
                          num_decoder_layers=1, d_ff=40, vocab_size=61,
                          relative_attention_num_buckets=8, relative_attention_max_distance=20,
                          decoder_start_token_id=0, **kw)
        return randomize((tf.T5ForConditionalGeneration if causal_lm else tf.T5Model)(cfg), seed)
    if family in RECENT:
        return randomize(_recent_model(tf, family, attn_implementation, causal_lm), seed)
    extra = {"mistral": dict(sliding_window=WINDOW),
             "qwen2": dict(sliding_window=WINDOW, use_sliding_window=True, max_window_layers=0,
                           attention_bias=True)}.get(family, {})
    names = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
    if family not in names:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    cfg = getattr(tf, f"{names[family]}Config")(**DECODER, bos_token_id=0, eos_token_id=0,
                                                 pad_token_id=0, **extra, **kw)
    cls = getattr(tf, f"{names[family]}{'ForCausalLM' if causal_lm else 'Model'}")
    return randomize(cls(cfg), seed)


RECENT = ("qwen3", "gemma2", "gemma3", "gpt_oss")   # QK-norm, soft-cap, (1 + w) QK-norm, sinks
SOFTCAP = 2.0            # Gemma 2's attn_logit_softcapping: the scores here reach a few units
PRE_ATTN = 16            # Gemma's query_pre_attn_scalar: scale 16^-1/2, not head_dim^-1/2


def _recent_model(tf, family: str, attn_implementation: str, causal_lm: bool = False):
    """Two layers, sliding window then full attention (Qwen3: both sliding), GQA, head_dim 12;
    ``causal_lm``: with the language-model head (``...ForCausalLM``)."""
    head = "ForCausalLM" if causal_lm else "Model"
    ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
    two = {**DECODER, "num_hidden_layers": 2, "sliding_window": WINDOW, **ids}
    if family == "gpt_oss":      # eager: transformers' gpt-oss declares no sdpa (the sinks)
        cfg = tf.GptOssConfig(**two, attention_bias=True, num_local_experts=2,
                              num_experts_per_tok=1, attn_implementation="eager",
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
        return getattr(tf, f"GptOss{head}")(cfg)
    if family == "qwen3":
        cfg = tf.Qwen3Config(**two, use_sliding_window=True, max_window_layers=0,
                             attention_bias=True, attn_implementation=attn_implementation)
        return getattr(tf, f"Qwen3{head}")(cfg)
    layers = dict(layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=PRE_ATTN)
    if family == "gemma2":       # transformers' Gemma 2 declares no sdpa support (the soft-cap)
        impl = "eager" if attn_implementation == "sdpa" else attn_implementation
        cfg = tf.Gemma2Config(**two, **layers, attn_logit_softcapping=SOFTCAP,
                              attn_implementation=impl)
        return getattr(tf, f"Gemma2{head}")(cfg)
    cfg = tf.Gemma3TextConfig(**two, **layers, attn_implementation=attn_implementation)
    return (tf.Gemma3ForCausalLM if causal_lm else tf.Gemma3TextModel)(cfg)


def attention_layer(family: str, model):
    """The first attention layer of ``model`` (GPT-2 built with ``add_cross_attention``:
    ``"gpt2-cross"`` its cross-attention; BART: ``"bart"`` the decoder's causal self-attention,
    ``"bart-cross"`` its cross-attention; T5: ``"t5"`` the encoder's, ``"t5-decoder"`` the
    decoder's self-attention, both with the bias table, ``"t5-cross"`` its cross-attention)."""
    if family == "bert":
        return model.encoder.layer[0].attention.self
    if family == "vit":
        return model.layers[0].attention
    if family == "gpt2":
        return model.h[0].attn
    if family == "gpt2-cross":
        return model.h[0].crossattention
    if family == "bart":
        return model.decoder.layers[0].self_attn
    if family == "bart-cross":
        return model.decoder.layers[0].encoder_attn
    if family == "t5":
        return model.encoder.block[0].layer[0].SelfAttention
    if family == "t5-decoder":
        return model.decoder.block[0].layer[0].SelfAttention
    if family == "t5-cross":
        return model.decoder.block[0].layer[1].EncDecAttention
    if family.endswith("-global"):                 # Gemma: the second layer, full attention
        return model.layers[1].self_attn
    return model.layers[0].self_attn


# the cases: right padding in every (B, S) attention mask, so that no query row is fully masked
FAMILIES = ("bert", "vit", "gpt2", "gpt2-cross", "bart", "bart-cross", "llama", "mistral",
            "qwen2", "t5", "t5-decoder", "t5-cross", "qwen3", "gemma2", "gemma2-global", "gemma3",
            "gemma3-global", "gpt_oss", "gpt_oss-global")
MODELS = {"bart-cross": "bart", "t5-decoder": "t5", "t5-cross": "t5",   # the model a case reads
          "gemma2-global": "gemma2", "gemma3-global": "gemma3", "gpt_oss-global": "gpt_oss"}


def case(family: str, seed: int = 0, attn_implementation: str = "sdpa"):
    """``(module, inputs)`` for one family: float64 hidden states, a padding mask, positions."""
    rng = np.random.default_rng(seed)
    model = tiny_model(MODELS.get(family, family), seed, attn_implementation)
    inputs = {"hidden_states": rng.standard_normal((B, L, D_MODEL))}
    padding = np.ones((B, L), dtype=np.int64)
    padding[1, -2:] = 0                      # right padding: every query keeps key 0
    if family == "vit":
        padding = None                       # ViT attends to every patch
    if family.endswith("-cross"):
        inputs["key_value_states"] = rng.standard_normal((B, S, D_MODEL))
        padding = np.ones((B, S), dtype=np.int64)
        padding[0, -3:] = 0
    inputs["attention_mask"] = padding
    if family in ("llama", "mistral", "qwen2", *RECENT, "gemma2-global", "gemma3-global",
                  "gpt_oss-global"):
        inputs["position_ids"] = np.arange(L)[None, :] + np.array([[0], [5]])   # an offset
    if MODELS.get(family, family) == "gemma2":   # transformers' sdpa refuses Gemma 2's soft-cap
        inputs["attn_implementation"] = EAGER_FLOAT64
    if MODELS.get(family, family) == "gpt_oss":  # and drops gpt-oss's sinks; eager is float64
        inputs["attn_implementation"] = "eager"
    return attention_layer(family, model), inputs


# RoPE scaling types (variants/rope_scaling.py), each on a tiny Llama: rope_parameters besides
# rope_type, and the config's max_position_embeddings. "dynamic" (from max_position_embeddings)
# and "longrope" (from original_max_position_embeddings) switch above a length of 8, which the
# positions of rope_case (up to 10) and a replayed generate() of 5 + 6 tokens cross.
ROPE_SCALINGS = {
    "linear": (dict(factor=2.5), 64),
    "dynamic": (dict(factor=3.0), 8),
    "yarn": (dict(factor=4.0, original_max_position_embeddings=16, rope_theta=100.0), 64),
    "longrope": (dict(short_factor=[1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                      long_factor=[1.0, 1.5, 2.5, 4.0, 6.0, 8.0],
                      original_max_position_embeddings=8, factor=4.0), 32),
    "llama3": (dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=32), 64),
    "proportional": (dict(partial_rotary_factor=0.5), 64),     # 3 of the 6 pairs turn
}


def rope_model(rope_type: str, seed: int = 0, causal_lm: bool = False):
    """A one-layer random Llama whose RoPE is ``rope_type`` (a key of :data:`ROPE_SCALINGS`)."""
    tf = import_optional("transformers", "attention_np.interop.transformers.family_cases")
    if rope_type not in ROPE_SCALINGS:
        raise ValueError(f"rope_type must be one of {sorted(ROPE_SCALINGS)}, got {rope_type!r}")
    params, max_positions = ROPE_SCALINGS[rope_type]
    cfg = tf.LlamaConfig(**{**DECODER, "max_position_embeddings": max_positions},
                         rope_parameters={"rope_type": rope_type, "rope_theta": 10000.0,
                                          **params},
                         bos_token_id=0, eos_token_id=0, pad_token_id=0,
                         attn_implementation="sdpa")
    return randomize((tf.LlamaForCausalLM if causal_lm else tf.LlamaModel)(cfg), seed)


def rope_case(rope_type: str, seed: int = 0):
    """``(module, inputs)`` as :func:`case` gives for ``"llama"``, with RoPE ``rope_type``."""
    module, inputs = case("llama", seed)
    return attention_layer("llama", rope_model(rope_type, seed)), inputs
