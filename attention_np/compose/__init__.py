"""Where the variants meet: multi-head attention with everything beyond the paper, decoding with
a KV cache, and cross-attention decoding.

- :mod:`.multihead`: the multi-head layer, §3.2.2 plus the variants
- :mod:`.pipeline`: its steps (project, q/k transforms, kernel, concat, project), shared by all
- :mod:`.layer_spec`: one call's spec, paper keywords and 0.1 keywords checked together
- :mod:`.extra_kv`: PyTorch MHA's extra key/value rows (``add_bias_kv``, ``add_zero_attn``)
- :mod:`.params`: its parameters, with grouped-query, QK-norm and sink weights
- :mod:`.decode`: one position at a time with a KV cache
- :mod:`.cross_decode`: cross-attention decoding, the encoder's keys and values projected once
"""
