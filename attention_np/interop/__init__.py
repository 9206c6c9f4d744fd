"""Diff attention_np against PyTorch, JAX and Flax, and convert between their conventions.

One submodule per framework, each importing its framework only when a function needs it, so
``import attention_np`` (and this package) still needs NumPy alone:

- :mod:`attention_np.interop.torch`: ``nn.MultiheadAttention`` weights and masks, SDPA arguments
- :mod:`attention_np.interop.jax`: ``jax.nn.dot_product_attention`` layout, masks, scoped x64
- :mod:`attention_np.interop.flax`: ``MultiHeadDotProductAttention`` kernels
- :mod:`attention_np.interop.compare`: :func:`compare_mha` / :func:`compare_flax_mha`, diff your
  own torch or Flax module
- :mod:`attention_np.interop.transformers`: :func:`compare_transformers_attention`, diff one
  attention layer of a Hugging Face model (BERT, ViT, GPT-2, BART, Llama, Mistral, Qwen2, T5,
  Qwen3, Gemma 2, Gemma 3, gpt-oss)
- :mod:`attention_np.interop.tolerance`: when two implementations agree

``python -m attention_np diff`` runs the whole matrix of cases; see ``docs/frameworks.md``.
"""

from attention_np.interop.compare import MHAReport, compare_flax_mha, compare_mha
from attention_np.interop.transformers import compare_transformers_attention

__all__ = ["compare_mha", "compare_flax_mha", "compare_transformers_attention", "MHAReport"]
