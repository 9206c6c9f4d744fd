"""Tiny random models of the transformers families beyond the 17 layer kinds of
:mod:`~attention_np.interop.transformers.family_cases`, each chosen to exercise what its attention adds
(built in code, no download; hidden 32, 4 heads, 1-2 layers):

RoBERTa, DistilBERT, ALBERT (residual LayerNorm inside the layer), DeBERTa-v2 (disentangled
relative attention: refused), OPT, GPT-NeoX (fused per-head qkv, partial rotary), Falcon (fused
grouped qkv, GQA), Phi (partial rotary, LayerNorm QK-norm with bias), Phi-3 (fused contiguous qkv),
StableLM (per-head LayerNorm QK-norm, partial rotary, qkv biases), Gemma, Cohere (LayerNorm
QK-norm per head, interleaved RoPE), Mixtral, OLMo, Granite (attention_multiplier), SmolLM3 (a
layer without RoPE), Whisper (encoder, decoder, cross), CLIP (text: causal mask from the model),
OLMo 2 (QK-norm over all heads), BEiT and Data2VecVision (a 2-D relative position bias table with
a class token), Swin (a table per window, shifted windows).
GPT-Neo (global then local layers, window 3 in its own causal buffer, unscaled scores),
ModernBERT (bidirectional: full then local layers, |i - j| <= 2, RoPE theta per layer type),
Cohere 2 (sliding window 3 with RoPE, then full attention without RoPE).

:func:`family_model` builds one; :func:`KNOWN` lists every name ``diff --model`` takes.
"""

from __future__ import annotations

from attention_np._optional import import_optional
from attention_np.interop.transformers.family_cases import DECODER, randomize, tiny_model

ENC = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=40,
           vocab_size=61, max_position_embeddings=64)
DEC = {**DECODER, "num_hidden_layers": 2, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
NO_GQA = {k: v for k, v in DEC.items() if k not in ("num_key_value_heads", "head_dim")}

# name -> (config class, config keywords, model class)
NEW = {
    "roberta": ("RobertaConfig", dict(ENC, pad_token_id=0), "RobertaModel"),
    "distilbert": ("DistilBertConfig", dict(dim=32, n_heads=4, n_layers=2, hidden_dim=40,
                                            vocab_size=61, max_position_embeddings=64),
                   "DistilBertModel"),
    "albert": ("AlbertConfig", dict(ENC, embedding_size=16), "AlbertModel"),
    "deberta-v2": ("DebertaV2Config", dict(ENC, relative_attention=True,
                                           pos_att_type=["c2p", "p2c"], position_buckets=8),
                   "DebertaV2Model"),
    "opt": ("OPTConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                              ffn_dim=40, vocab_size=61, word_embed_proj_dim=32,
                              max_position_embeddings=64, pad_token_id=0), "OPTModel"),
    "gpt_neox": ("GPTNeoXConfig", dict(ENC, rotary_pct=0.5), "GPTNeoXModel"),
    "falcon": ("FalconConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                    vocab_size=61, new_decoder_architecture=True,
                                    num_kv_heads=2, bias=True), "FalconModel"),
    "phi": ("PhiConfig", dict(NO_GQA, partial_rotary_factor=0.5, qk_layernorm=True), "PhiModel"),
    "phi3": ("Phi3Config", dict(DEC, head_dim=8), "Phi3Model"),
    "stablelm": ("StableLmConfig", dict(NO_GQA, num_key_value_heads=2, qk_layernorm=True,
                                        use_qkv_bias=True, partial_rotary_factor=0.5),
                 "StableLmModel"),
    "gemma": ("GemmaConfig", dict(DEC), "GemmaModel"),
    "cohere": ("CohereConfig", dict(DEC, head_dim=8, use_qk_norm=True), "CohereModel"),
    "mixtral": ("MixtralConfig", dict(DEC, head_dim=8, num_local_experts=2,
                                      num_experts_per_tok=1), "MixtralModel"),
    "olmo": ("OlmoConfig", dict(NO_GQA), "OlmoModel"),
    "granite": ("GraniteConfig", dict(NO_GQA, attention_multiplier=0.2), "GraniteModel"),
    "smollm3": ("SmolLM3Config", dict(NO_GQA, no_rope_layers=[1, 0]), "SmolLM3Model"),
    "whisper": ("WhisperConfig", dict(d_model=32, encoder_attention_heads=4,
                                      decoder_attention_heads=4, encoder_layers=1,
                                      decoder_layers=1, encoder_ffn_dim=40, decoder_ffn_dim=40,
                                      vocab_size=61, num_mel_bins=8, max_source_positions=8,
                                      max_target_positions=16, pad_token_id=0, bos_token_id=0,
                                      eos_token_id=0, decoder_start_token_id=0),
                "WhisperModel"),
    "clip": ("CLIPTextConfig", dict(ENC, bos_token_id=0, eos_token_id=2), "CLIPTextModel"),
    "olmo2": ("Olmo2Config", dict(DEC, head_dim=8), "Olmo2Model"),
    # 16x16 images of 4x4 patches and a class token: a 4x4 grid, the table's own in each layer
    # (BEiT: in each BeitLayer, outside the attention layer, its bias passed as the mask)
    "beit": ("BeitConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                intermediate_size=40, image_size=16, patch_size=4,
                                use_relative_position_bias=True, out_indices=[1]), "BeitModel"),
    "data2vec-vision": ("Data2VecVisionConfig", dict(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=40,
        image_size=16, patch_size=4, use_relative_position_bias=True), "Data2VecVisionModel"),
    # 16x16 images of 2x2 patches: 8x8, four 4x4 windows, the second block's shifted; then 4x4
    "swin": ("SwinConfig", dict(image_size=16, patch_size=2, embed_dim=16, depths=[2, 2],
                                num_heads=[2, 4], window_size=4), "SwinModel"),
    # local windows and local/global alternation, each window smaller than the 6 tokens
    "gpt_neo": ("GPTNeoConfig", dict(hidden_size=32, num_heads=4, num_layers=2,
                                     attention_types=[[["global", "local"], 1]], window_size=3,
                                     intermediate_size=40, vocab_size=61,
                                     max_position_embeddings=64), "GPTNeoModel"),
    "modernbert": ("ModernBertConfig", dict(ENC, local_attention=4, pad_token_id=0,
                                            layer_types=["full_attention", "sliding_attention"],
                                            rope_parameters={
                                                "full_attention": {"rope_type": "default",
                                                                   "rope_theta": 1000.0},
                                                "sliding_attention": {"rope_type": "default",
                                                                      "rope_theta": 30.0}}),
                   "ModernBertModel"),
    "cohere2": ("Cohere2Config", dict(DEC, sliding_window=3,
                                      layer_types=["sliding_attention", "full_attention"]),
                "Cohere2Model"),
}
VISION = ("vit", "beit", "data2vec-vision", "swin")     # model_inputs: pixel_values
OLD = ("bert", "vit", "gpt2", "bart", "t5", "llama", "mistral", "qwen2", "qwen3", "gemma2",
       "gemma3", "gpt_oss")
KNOWN = tuple(sorted(set(OLD) | set(NEW)))


def family_model(name: str, seed: int = 0, attn_implementation: str = "sdpa"):
    """A random model of family ``name`` (one of :data:`KNOWN`), float32 as built, eval mode."""
    if name not in KNOWN:
        raise ValueError(f"unknown model family {name!r}; the known ones are: "
                         f"{', '.join(KNOWN)}")
    if name in OLD:
        return tiny_model(name, seed, attn_implementation)
    tf = import_optional("transformers", "attention_np.interop.transformers.families")
    cfg_name, kw, model_name = NEW[name]
    cfg = getattr(tf, cfg_name)(**kw, attn_implementation=attn_implementation)
    try:
        model = getattr(tf, model_name)(cfg)
    except ValueError:                  # DeBERTa-v2 declares no sdpa: its eager attention
        cfg = getattr(tf, cfg_name)(**kw, attn_implementation="eager")
        model = getattr(tf, model_name)(cfg)
    return randomize(model, seed)


def model_inputs(name: str, model, seed: int = 0, *, left_pad: bool = False) -> dict:
    """Keyword inputs for ``model(**inputs)``: token ids (B = 2, L = 6) and a padding mask
    (right padding; ``left_pad``: left padding in row 1), ViT pixels, Whisper features and
    decoder ids, T5/BART decoder ids."""
    import numpy as np
    import torch
    rng = np.random.default_rng(seed)
    B, L = 2, 6
    if name in VISION:
        size = 8 if name == "vit" else 16
        return {"pixel_values": torch.from_numpy(rng.standard_normal((B, 3, size, size)))}
    ids = torch.from_numpy(rng.integers(3, 61, (B, L)))
    mask = torch.ones((B, L), dtype=torch.long)
    if left_pad:
        mask[1, :2] = 0
    else:
        mask[1, -2:] = 0
    if name == "whisper":
        feats = torch.from_numpy(rng.standard_normal((B, 8, 16)))        # (B, mel, 2 * source)
        return {"input_features": feats, "decoder_input_ids": ids[:, :4]}
    inputs = {"input_ids": ids, "attention_mask": mask}
    if name in ("t5", "bart"):
        inputs["decoder_input_ids"] = ids[:, :4]
    return inputs
