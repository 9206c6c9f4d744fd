r"""Attention sinks (beyond the paper; gpt-oss, after StreamingLLM): a learned logit ``s_n`` per
head that joins every row's softmax and is then dropped,

.. math:: \text{weights}_{ij} = \frac{e^{\text{scores}_{ij}}}{e^{s_n} + \sum_{j'} e^{\text{scores}_{ij'}}},

so a row's weights sum to less than 1: Eq. (1) with one more key whose score is ``s_n`` and whose
value is 0. The kernels add the sink as one more term in each row's max and sum, never as a key.

Backward: the sink's weight in row ``i`` is ``p_i = e^{s_n} / l_i`` and its value is 0, so
``dP_sink = 0`` and the softmax backward gives ``dscores_sink = p_i (0 - D_i)``, with
``D_i = rowsum(dout_i * out_i)``: ``dsinks_n = -sum_i p_i D_i`` over the rows of head ``n``.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_float_array, sum_to_shape


def check_sinks(sinks, q) -> np.ndarray:
    """``sinks`` as a float array, checked to be ``(h,)`` with ``h = q.shape[-3]``.

    Parameters
    ----------
    sinks : float (h,), one logit per query head
    q : (..., h, L, d_k), the queries whose heads the logits belong to
    """
    sinks = as_float_array(sinks, "sinks")
    q = as_float_array(q, "q")
    if q.ndim < 3 or sinks.shape != (q.shape[-3],):
        raise ValueError(f"sinks must be (h,) with h = q.shape[-3], one logit per query head; "
                         f"got sinks {sinks.shape} for q {q.shape}")
    return sinks


def sinks_backward(dout, out, sink_weight, sinks_shape: tuple) -> np.ndarray:
    """forward: the sink's weight ``p (..., h, L, 1)``, its value 0  ->  ``dsinks = -sum_i p_i D_i``.

    ``dout``, ``out`` are ``(..., h, L, d_v)``; returns ``dsinks`` of ``sinks_shape`` ``(h,)``,
    summed over the batch and the rows.
    """
    D = (dout * out).sum(axis=-1, keepdims=True)                       # (..., h, L, 1)
    return sum_to_shape(-(sink_weight * D)[..., 0].sum(axis=-1), sinks_shape)   # (h,)
