"""The computations of Eq. (1): the same numbers, computed different ways.

- :mod:`.reference`: Eq. (1) line by line, with the hooks the variants need (bias, window)
- :mod:`.fused`: fewer passes and one (L, S) buffer; the default of ``attention_np.sdpa_forward``
- :mod:`.blocked`: the fused path split into query blocks over threads, for long sequences
- :mod:`.tiled`: tiles of keys with an online softmax (FlashAttention), never an (L, S) array
- :mod:`.sinks`: Eq. (1) with a learned sink logit in every softmax denominator (gpt-oss)

Every kernel is tested against :mod:`attention_np.paper` on one case matrix.
"""
