r"""Sinusoidal positional encoding, §3.5:

.. math:: PE_{(pos, 2i)} = \sin(pos / 10000^{2i/d_{model}}),\qquad
          PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i/d_{model}})

Attention itself is blind to order (permuting the keys permutes nothing in the output but the
weights); this fixed signal, added to the embeddings, is the only place order enters. It has
no parameters, so its backward is the identity on the embeddings it was added to.
For any offset ``k``, ``PE(pos + k)`` is a linear function of ``PE(pos)`` (a rotation of each
(sin, cos) pair), which is what lets a query at ``pos`` find a key at a fixed offset.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_count, check_float_dtype


def sinusoidal_encoding(length: int, d_model: int, *, dtype=np.float64) -> np.ndarray:
    """The (length, d_model) table of §3.5; even columns sin, odd columns cos.

    Examples
    --------
    >>> pe = sinusoidal_encoding(4, 6)
    >>> pe.shape, float(pe[0, 0]), float(pe[0, 1])
    ((4, 6), 0.0, 1.0)
    """
    check_count(length, "length")
    check_count(d_model, "d_model")
    dtype = check_float_dtype(dtype)
    if d_model % 2:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    pos = np.arange(length)[:, None]                               # (length, 1)
    inv_freq = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)    # (d_model/2,)
    angles = pos * inv_freq                                        # (length, d_model/2)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe.astype(dtype)
