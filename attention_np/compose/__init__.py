"""Where the variants meet: multi-head attention with everything beyond the paper, decoding with
a KV cache, and cross-attention decoding.

- :mod:`.multihead`: the multi-head layer, §3.2.2 plus the variants
- :mod:`.params`: its parameters, with grouped-query, QK-norm and sink weights
- :mod:`.decode`: one position at a time with a KV cache
- :mod:`.cross_decode`: cross-attention decoding, the encoder's keys and values projected once
"""
