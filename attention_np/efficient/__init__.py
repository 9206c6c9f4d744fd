"""Beyond the paper: the same attention computed in less memory or less work.

- :mod:`attention_np.efficient.flash`: tiled attention with an online softmax (FlashAttention-2);
  its code in :mod:`~attention_np.efficient.tiles`, :mod:`~attention_np.efficient.flash_forward`,
  :mod:`~attention_np.efficient.flash_backward`
- :mod:`attention_np.efficient.kv_cache`: decoding one position at a time with a KV cache
- :mod:`attention_np.efficient.cross_cache`: cross-attention decoding, the encoder's keys and
  values projected once
"""
