r"""Tiled attention with an online softmax: the FlashAttention-2 algorithm (Dao, 2023), beyond the paper.

Eq. (1) as written materializes the (L, S) matrix of scores. FlashAttention computes the same
``out`` while reading the keys and values one block of ``block_size`` positions at a time, so
that no (L, S) array ever exists. The trick is the **online softmax**: keep, for every query
row, the running maximum ``m`` of the scores seen so far, the running sum ``l`` of their
exponentials (shifted by ``m``), and the running weighted sum ``acc`` of the values. When a
new block raises the maximum from ``m`` to ``m_new``, everything accumulated so far was
exponentiated with the old shift and is corrected by one factor:

.. math:: \alpha = e^{m - m_\text{new}},\qquad l \leftarrow \alpha\, l + \sum_j e^{s_j - m_\text{new}},
          \qquad \text{acc} \leftarrow \alpha\, \text{acc} + e^{s - m_\text{new}} V_\text{block}

After the last block ``out = acc / l``, exactly the softmax-weighted average. Besides q, k, v
and the caller's mask, the forward keeps only ``out`` and the per-row log-sum-exp
``lse = m + log l``. The backward recomputes
each block's weights from it, ``P = exp(scores - lse)``, and replaces
``rowsum(dP * P)`` by ``D = rowsum(dout * out)`` (FlashAttention-2's D), which needs no (L, S) array.

FlashAttention-2 on a GPU gives each block of query rows to its own thread block, and each
walks over the key blocks. Here NumPy's vectorization plays the thread blocks: all query rows
(and all batch and head dims) walk over the key blocks together, so the Python loop runs over
key blocks only, and the extra memory is a few (..., L, block_size) tiles, never (..., L, S).
With ``is_causal``, the query rows that cannot see a key block are not computed at all.
``spec.enable_gqa`` groups query heads over shared key/value heads as
:mod:`attention_np.variants.gqa` explains.

Two things make it fast in NumPy without changing the numbers beyond rounding
(``tiled_forward.LazyShift``, :mod:`attention_np.kernels.scratch`):

- **a lazy shift.** ``m`` need not be the running max, only large enough that no ``exp``
  overflows. After a row's first block, a tile whose scores stay below ``m + log(big)`` is
  added with the old ``m``: no max, no rescale, and the subtraction and the row sums ride inside
  the two products as an extra column, ``[q·scale, -m] @ [k, 1]ᵀ = s - m`` and
  ``e^{s-m} @ [v, 1] = [e^{s-m} v, rowsum]``. Any other tile takes the exact update above;
- **no new memory per tile.** The tiles live in buffers reused from call to call, one pool per
  thread; a fresh tile cost a page fault per 4 KiB, about a tenth of the kernel's time.

Beyond the paper, as in the dense path: ``softcap`` caps each tile's scores (its ``tanh`` recomputed
in the backward), and ``sinks`` (gpt-oss) start each row's online softmax from the sink logit
instead of appending a key.

The code, one concept per module, imports pointing down:

- :mod:`attention_np.kernels.tiles`: which key blocks (and query rows) to visit, and a tile's scores;
- :mod:`attention_np.kernels.tiled_forward`: the online softmax, :class:`FlashCache`;
- :mod:`attention_np.kernels.tiled_backward`: the backward, block by block;
- :mod:`attention_np.kernels.scratch`: the reused tile buffers;
  :mod:`attention_np.kernels.row_sums`: ``dk`` and ``dv`` summed over 64-row chunks (float32).
"""

from attention_np.kernels.tiled_backward import backward, flash_attention_backward
from attention_np.kernels.tiled_forward import FlashCache, flash_attention_forward, tiled_plan

__all__ = ["FlashCache", "backward", "flash_attention_forward", "flash_attention_backward", "tiled_plan"]
