"""attention_np: scaled dot-product and multi-head attention in plain NumPy, every backward
pass written by hand, checked against PyTorch and JAX.

"Attention Is All You Need" (Vaswani et al., 2017), §3.2. Conventions (see ``README.md``):
bool masks are True = may attend; ``is_causal`` is top-left aligned; a fully masked query row
gives output 0, weights 0 and gradients 0.

The package is layered; each layer imports only the ones below it:

- :mod:`attention_np.paper`: the paper's §3.2 and nothing else (read ``paper/attention.py`` first)
- :mod:`attention_np.variants`: each feature beyond the paper, described together by
  :class:`AttentionSpec`
- :mod:`attention_np.kernels`: the computations of Eq. (1) (reference, fused, tiled), one registry
- :mod:`attention_np.compose`: multi-head attention with the variants, decoding with a KV cache
- :mod:`attention_np.nn`: the Transformer's layers (encoder, decoder, encoder-decoder) in NumPy
- :mod:`attention_np.training`: tasks and trainers for those models
- :mod:`attention_np.studies`: the claims of §3.2 measured (footnote 4, additive attention, ...);
  :mod:`attention_np.lessons`: the lessons' example data and timing
- :mod:`attention_np.pretrained`, :mod:`attention_np.interop`: a real model, other frameworks
- :mod:`attention_np.viz` (matplotlib), :mod:`attention_np.cli` (``python -m attention_np``)
"""

from importlib import import_module as _import_module
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step
from attention_np.compose.decode import KVCache, mha_decode_step
from attention_np.compose.mha import MHACache, init_mha_params, mha_backward, mha_forward
from attention_np.kernels.fused import SDPACache, scaled_dot_product_attention, sdpa_backward, sdpa_forward
from attention_np.kernels.sink_logits import SinksCache, sdpa_sinks_backward, sdpa_sinks_forward
from attention_np.kernels.tiled import FlashCache, flash_attention_backward, flash_attention_forward
from attention_np.paper.gradcheck import GradcheckResult, gradcheck, numerical_gradient
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.linear import linear_backward, linear_forward
from attention_np.paper.masks import causal_mask, mask_from_blocked, padding_mask
from attention_np.paper.params import glorot_uniform
from attention_np.paper.softmax import softmax, softmax_backward
from attention_np.studies.additive import (
    AdditiveCache,
    additive_attention,
    additive_attention_backward,
    additive_attention_forward,
    init_additive_params,
)
from attention_np.studies.compare_scoring import train_retrieval
from attention_np.studies.scaling import dot_product_moments, softmax_gradients, softmax_saturation
from attention_np.studies.scoring_attention import (
    init_scoring_mha_params,
    scoring_mha_backward,
    scoring_mha_forward,
)
from attention_np.variants.lengths import lengths_mask
from attention_np.variants.position_bias import (
    alibi_bias,
    alibi_slopes,
    relative_position_bias,
    relative_position_bias_backward,
    relative_positions,
    t5_relative_buckets,
)
from attention_np.variants.rope import apply_rope, apply_rope_backward, rope_angles
from attention_np.variants.rope_scaling import rope_frequencies
from attention_np.variants.spec import AttentionSpec, RoPE
from attention_np.variants.window import sliding_window_mask

try:
    __version__ = _version("attention-np")      # one source: pyproject.toml
except _PackageNotFoundError:                   # run from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    # 0.2: one description of everything beyond the paper
    "AttentionSpec", "RoPE", "lengths_mask",
    # §3.2: core
    "softmax", "softmax_backward",
    "causal_mask", "padding_mask", "mask_from_blocked", "sliding_window_mask",
    "scaled_dot_product_attention", "sdpa_forward", "sdpa_backward", "SDPACache",
    "split_heads", "merge_heads",
    "linear_forward", "linear_backward", "glorot_uniform",
    "init_mha_params", "mha_forward", "mha_backward", "MHACache",
    "gradcheck", "numerical_gradient", "GradcheckResult",
    # beyond the paper: position information inside attention
    "rope_angles", "rope_frequencies", "apply_rope", "apply_rope_backward",
    "relative_positions", "alibi_slopes", "alibi_bias", "t5_relative_buckets",
    "relative_position_bias", "relative_position_bias_backward",
    "sdpa_sinks_forward", "sdpa_sinks_backward", "SinksCache",
    # beyond the paper: efficient
    "flash_attention_forward", "flash_attention_backward", "FlashCache",
    "KVCache", "mha_decode_step", "cross_kv_cache", "mha_cross_decode_step",
    # studies
    "additive_attention", "additive_attention_forward", "additive_attention_backward",
    "init_additive_params", "AdditiveCache",
    "dot_product_moments", "softmax_saturation", "softmax_gradients", "train_retrieval",
    "init_scoring_mha_params", "scoring_mha_forward", "scoring_mha_backward",
]

# Names 0.3 removed (0.1 paths, aliases since 0.2): their attribute access says where they went.
_REMOVED = {
    "core": "attention_np.paper, .variants, .kernels or .compose",
    "efficient": "attention_np.kernels (tiled) or attention_np.compose (decode, cross_decode)",
    "attention": "attention_np.paper.attention", "masks": "attention_np.paper.masks",
    "heads": "attention_np.paper.heads", "linear": "attention_np.paper.linear",
    "multihead": "attention_np.compose.mha", "gqa": "attention_np.variants.gqa",
    "flash": "attention_np.kernels.tiled", "kv_cache": "attention_np.compose.decode",
    "scaling": "attention_np.studies.scaling", "additive": "attention_np.studies.additive",
    "compare_scoring": "attention_np.studies.compare_scoring", "plot": "attention_np.viz.plot",
    "figures": "attention_np.cli.figures", "train": "attention_np.cli.train",
    "tour": "attention_np.cli.tour",
}


# Subpackages reachable as attributes (``an.viz``, ``an.interop``, ...), imported on first use
# only: ``import attention_np`` stays NumPy-only (tests/api/test_lazy_subpackages.py).
_SUBPACKAGES = ("paper", "variants", "kernels", "compose", "nn", "training",
                "studies", "lessons", "pretrained", "interop", "viz", "cli", "exercises")


def __getattr__(name):
    if name in _SUBPACKAGES:
        return _import_module(f"attention_np.{name}")
    if name in _REMOVED:
        raise AttributeError(f"module 'attention_np' has no attribute {name!r}: attention_np.{name} "
                             f"was removed in 0.3, use {_REMOVED[name]} (see CHANGELOG.md)")
    raise AttributeError(f"module 'attention_np' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBPACKAGES))
