"""Beyond the paper: each feature a standalone forward/backward pair with its source named.

- :mod:`.rope`, :mod:`.rope_scaling`: rotary position embeddings (RoFormer) and their scalings
- :mod:`.position_bias`: ALiBi and T5's bucketed relative position bias
- :mod:`.qk_norm`, :mod:`.qk_layernorm`: RMSNorm or LayerNorm on every query and key head (Qwen3,
  Gemma 3; Cohere, Flax's ``normalize_qk``)
- :mod:`.softcap`: logit soft-capping (Gemma 2)
- :mod:`.sinks`: attention sinks, a learned logit per head in every softmax denominator (gpt-oss)
- :mod:`.gqa`: grouped-query attention (Ainslie et al., 2023)
- :mod:`.window`: sliding-window masks (Longformer, Mistral)
- :mod:`.lengths`: padding masks from per-sequence lengths
- :mod:`.dropout`: attention dropout

- :mod:`.spec`: :class:`~attention_np.AttentionSpec`, the one description of them all

None of them knows about multi-head attention or about a kernel; they meet in
:mod:`attention_np.compose`, described by one :class:`attention_np.AttentionSpec`.
"""
