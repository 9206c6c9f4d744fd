"""attention_np: scaled dot-product and multi-head attention in plain NumPy, every backward
pass written by hand, checked against PyTorch and JAX.

"Attention Is All You Need" (Vaswani et al., 2017), §3.2. Conventions (see ``README.md``):
bool masks are True = may attend; ``is_causal`` is top-left aligned; a fully masked query row
gives output 0, weights 0 and gradients 0.
"""

from .additive import (
    AdditiveCache,
    additive_attention,
    additive_attention_backward,
    additive_attention_forward,
    init_additive_params,
)
from .attention import SDPACache, scaled_dot_product_attention, sdpa_backward, sdpa_forward
from .gradcheck import GradcheckResult, gradcheck, numerical_gradient
from .heads import merge_heads, split_heads
from .masks import causal_mask, mask_from_blocked, padding_mask
from .multihead import MHACache, init_mha_params, mha_backward, mha_forward
from .softmax import softmax, softmax_backward

__version__ = "0.1.0"

__all__ = [
    "softmax", "softmax_backward",
    "causal_mask", "padding_mask", "mask_from_blocked",
    "scaled_dot_product_attention", "sdpa_forward", "sdpa_backward", "SDPACache",
    "split_heads", "merge_heads",
    "init_mha_params", "mha_forward", "mha_backward", "MHACache",
    "gradcheck", "numerical_gradient", "GradcheckResult",
    "additive_attention", "additive_attention_forward", "additive_attention_backward",
    "init_additive_params", "AdditiveCache",
]

# Beyond the paper (issue 5): tiled attention, KV cache; grouped-query attention is a flag of
# sdpa_forward (enable_gqa) and mha_forward (num_kv_heads).
from .flash import FlashCache, flash_attention_backward, flash_attention_forward  # noqa: E402
from .kv_cache import KVCache, mha_decode_step  # noqa: E402

__all__ += ["flash_attention_forward", "flash_attention_backward", "FlashCache",
            "KVCache", "mha_decode_step"]
