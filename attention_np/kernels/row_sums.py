"""Products that sum over the query rows, ``dv = Pᵀ @ dout`` and ``dk = dscoresᵀ @ (q·scale)``,
in chunks of rows: the float32 error of a long sum.

BLAS adds the ``L`` terms of each entry of ``aᵀ @ b`` one after another, so its float32 rounding
error grows with ``L``. Summing chunks of :data:`ROWS` rows and then adding the chunks' results,
the error grows with ``ROWS + L / ROWS`` instead (PyTorch's CPU attention backward also sums its
``dv`` and ``dk`` over blocks of query rows). Measured with ``benchmarks/float32_accuracy.py``
(1, 4, 256, 64), causal, flat softmax: our ``dv`` error was 2.13x PyTorch's with 256-row sums and
1.05x with 64-row chunks. The cost: about 11 % more time in these two products
(``(1024, 256)ᵀ @ (256, 64)`` against four ``(1024, 64)ᵀ @ (64, 64)``, eight heads, one thread).
"""

from __future__ import annotations

import numpy as np

from attention_np.kernels.guard import masked_matmul, transpose_mask
from attention_np.kernels.scratch import scratch

#: Query rows summed by one product; their sums are then added.
ROWS = 64


def rows_product(a, b, mask=None, out=None, add: bool = False):
    """``aᵀ @ b`` over the rows: ``a (..., n, p)``, ``b (..., n, q)`` -> ``(..., p, q)``.

    ``mask`` (bool, broadcastable to ``a``, or None) as in
    :func:`~attention_np.kernels.guard.masked_matmul`: with one, the product is not chunked (it
    only happens when an input holds a NaN or inf). ``out``: written into (or, with ``add``,
    added into) instead of a new array. Returns the result (``out`` when given).
    """
    n = a.shape[-2]
    a_T = np.swapaxes(a, -1, -2)                                          # (..., p, n)
    shape = np.broadcast_shapes(a_T.shape[:-2], b.shape[:-2]) + (a.shape[-1], b.shape[-1])
    if mask is not None or n <= ROWS:
        mask_T = transpose_mask(mask)
        if out is None or not add:
            return masked_matmul(a_T, b, mask_T, out=out)
        out += masked_matmul(a_T, b, mask_T)
        return out
    if out is None:                       # a new array: nothing to add to, whatever ``add`` says
        out, add = np.empty(shape, np.result_type(a, b)), False
    term = scratch("rows_product", shape, out.dtype)          # one chunk's sum, (..., p, q)
    for i in range(0, n, ROWS):
        chunk = a_T[..., i:i + ROWS], b[..., i:i + ROWS, :]
        if i == 0 and not add:
            np.matmul(*chunk, out=out)
        else:
            np.matmul(*chunk, out=term)
            out += term
    return out
