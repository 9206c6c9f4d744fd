"""Diff attention_np against PyTorch, JAX and Flax, and convert between their conventions.

One submodule per framework, each importing its framework only when a function needs it, so
``import attention_np`` (and this package) still needs NumPy alone:

- :mod:`attention_np.interop.torch`: ``nn.MultiheadAttention`` weights and masks, SDPA arguments
- :mod:`attention_np.interop.jax`: ``jax.nn.dot_product_attention`` layout, masks, scoped x64
- :mod:`attention_np.interop.flax`: ``MultiHeadDotProductAttention`` kernels
- :mod:`attention_np.interop.compare`: :func:`compare_mha` / :func:`compare_flax_mha`, diff your
  own torch or Flax module
- :mod:`attention_np.interop.transformers`: :func:`compare_transformers_attention`, diff one
  attention layer of a Hugging Face model, read by what it computes (29 families agree, see
  ``docs/frameworks.md``)
- :mod:`attention_np.interop.transformers.model_diff`: :func:`compare_transformers_model`, every
  attention layer of a model run once, layer by layer
- :mod:`attention_np.interop.transformers.kernel_diff`: :func:`compare_attention_kernels`, the
  attention kernel of every layer through transformers' attention interface
- :mod:`attention_np.interop.tolerance`: when two implementations agree

``python -m attention_np diff`` runs the whole matrix of cases; see ``docs/frameworks.md``.
"""

from attention_np.interop.compare import MHAReport, compare_flax_mha, compare_mha
from attention_np.interop.transformers import compare_transformers_attention
from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
from attention_np.interop.transformers.model_diff import compare_transformers_model

__all__ = ["compare_mha", "compare_flax_mha", "compare_transformers_attention",
           "compare_transformers_model", "compare_attention_kernels", "MHAReport"]
