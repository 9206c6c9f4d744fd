"""Diff a Hugging Face ``transformers`` model against attention_np, layer by layer, by what it computes.

Needs ``torch`` and ``transformers`` (the ``test`` extra) only when a function runs; no network:
build the model from a tiny config, or load a local checkpoint folder. The modules, lowest first
(each imports only those above it):

- :mod:`.refusal`        a layer attention_np cannot express, refused by what it computes
- :mod:`.rotary`         the model's rotary cos/sin, read and checked against ours
- :mod:`.weights`        the q, k, v, o tensors and QK-norms of a layer, as stored
- :mod:`.layer_reading`  :func:`layer_spec`: what one layer computes besides its weights
- :mod:`.recent`, :mod:`.replay`  QK-norm, soft-cap and sinks in float64; a recorded call replayed
- :mod:`.layer_diff`     :func:`compare_transformers_attention`: one layer, forward and backward
- :mod:`.cache_replay`   a layer call continuing from a KV cache, on attention_np's ``KVCache``
- :mod:`.model_report`, :mod:`.model_diff`  :func:`compare_transformers_model`: every layer of a model
  (a forward continuing from a filled cache too)
- :mod:`.kernel_diff`    :func:`compare_attention_kernels`: the attention interface's kernel
- :mod:`.decode_diff`    a generation with the KV cache against ours (the first layer)
- :mod:`.generate_diff`  :func:`compare_transformers_generate`: every layer of every step
- :mod:`.family_cases`, :mod:`.families`, :mod:`.family_traps`  the tiny models of the families
  the docs list, and the traps ``python -m attention_np diff`` demonstrates
- :mod:`.sweep`          every model class of the installed transformers (docs/transformers_sweep.md)
"""

from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
from attention_np.interop.transformers.layer_diff import compare_transformers_attention
from attention_np.interop.transformers.layer_reading import LayerSpec, layer_spec
from attention_np.interop.transformers.model_diff import compare_transformers_model
from attention_np.interop.transformers.refusal import UnsupportedLayer

__all__ = ["compare_transformers_attention", "compare_transformers_model", "compare_attention_kernels",
           "LayerSpec", "layer_spec", "UnsupportedLayer"]
