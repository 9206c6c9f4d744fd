"""§3.2 of "Attention Is All You Need", and nothing beyond it: the code to read with the paper open.

Reading order (each module one idea, each forward beside its hand-written backward):

1. :mod:`~attention_np.paper.softmax`: the softmax and its vector-Jacobian product
2. :mod:`~attention_np.paper.masks`: which keys a query may attend (True = may attend)
3. :mod:`~attention_np.paper.attention`: Eq. (1), the five boxes of Figure 2
4. :mod:`~attention_np.paper.linear`: the projections ``y = x @ W + b``
5. :mod:`~attention_np.paper.heads`: splitting into heads, and the Concat
6. :mod:`~attention_np.paper.params`: ``W_q, W_k, W_v, W_o``, Glorot-uniform
7. :mod:`~attention_np.paper.multihead`: §3.2.2, in five numbered steps
8. :mod:`~attention_np.paper.gradcheck`: every backward against finite differences

Everything beyond the paper (positions, biases, windows, dropout, grouped-query attention, ...)
and every faster way to compute the same numbers lives elsewhere in the package and is tested
against this code. It imports NumPy alone and assumes finite inputs.
"""

from attention_np.paper.attention import (
    AttentionCache,
    scaled_dot_product_attention,
    sdpa_backward,
    sdpa_forward,
)
from attention_np.paper.gradcheck import GradcheckResult, gradcheck, numerical_gradient
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.linear import linear_backward, linear_forward
from attention_np.paper.masks import causal_mask, mask_from_blocked, padding_mask
from attention_np.paper.multihead import MHACache, mha_backward, mha_forward
from attention_np.paper.params import glorot_uniform, init_mha_params
from attention_np.paper.softmax import softmax, softmax_backward

__all__ = [
    "softmax", "softmax_backward", "causal_mask", "padding_mask", "mask_from_blocked",
    "sdpa_forward", "sdpa_backward", "scaled_dot_product_attention", "AttentionCache",
    "linear_forward", "linear_backward", "split_heads", "merge_heads", "init_mha_params",
    "glorot_uniform", "mha_forward", "mha_backward", "MHACache",
    "gradcheck", "numerical_gradient", "GradcheckResult",
]
