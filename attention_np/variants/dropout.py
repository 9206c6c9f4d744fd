"""Attention dropout (§5.4 applies dropout to the sub-layers; frameworks also drop attention weights).

Each weight is zeroed with probability ``p`` and the kept ones are scaled by ``1 / (1 - p)``, so
that the expected output is unchanged. The keep-mask is drawn once in the forward and saved for the
backward, which must zero the same weights.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bool_mask, as_generator, check_broadcasts_to, check_dropout_p


def dropout_keep(dropout_p, rng, dropout_mask, shape: tuple, dtype):
    """The keep-mask for attention dropout and the factor ``1/(1-p)`` applied to kept weights.

    Parameters
    ----------
    dropout_p : float in [0, 1]
    rng : int seed or np.random.Generator, optional
        Source of a drawn keep-mask.
    dropout_mask : bool, broadcastable to ``shape``, optional
        An explicit keep-mask (True = kept) instead of drawing one.
    shape : tuple
        The weights' shape ``(..., L, S)``.
    dtype : the weights' dtype (a float32 mask is drawn in float32).

    Returns
    -------
    keep : bool ``shape`` (or broadcastable to it), or None without dropout
    scale : float, ``1 / (1 - p)`` (1.0 without dropout, 0.0 for ``p = 1``)
    """
    dropout_p = check_dropout_p(dropout_p)
    if dropout_mask is not None:
        if rng is not None:
            raise ValueError("pass rng or dropout_mask, not both")
        if dropout_p == 0.0:
            raise ValueError("dropout_mask needs dropout_p > 0 (spec=AttentionSpec(dropout_p=p): kept "
                             "weights are scaled by 1/(1-p))")
        keep = as_bool_mask(dropout_mask, "dropout_mask")
        if check_broadcasts_to(keep, "dropout_mask", shape, "weights (..., L, S)") != shape:
            raise ValueError(f"dropout_mask of shape {keep.shape} would add batch dims to the "
                             f"weights {shape}; it must broadcast to them")
    elif dropout_p == 0.0:
        return None, 1.0
    else:
        # draw in the inputs' precision: no float64 (L, S) temporary for float32 attention
        draw = np.float64 if dtype == np.float64 else np.float32
        keep = as_generator(rng).random(shape, dtype=draw) >= dropout_p
    # p = 1 drops everything; its factor is irrelevant, 0 avoids 1/0.
    return keep, (0.0 if dropout_p == 1.0 else 1.0 / (1.0 - dropout_p))
