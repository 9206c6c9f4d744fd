"""The paper's §3.2, and nothing beyond it: softmax, masks, projections, heads, Eq. (1) and
multi-head attention, each a forward and a hand-written backward.

Read :mod:`attention_np.core.attention` first: Eq. (1) as the paper writes it.
:mod:`attention_np.core.fused` computes the same numbers faster (and adds dropout and
grouped-query attention); it is what ``attention_np.sdpa_forward`` and multi-head attention run,
and the tests hold the two equal to float64 rounding.
"""
