"""Per-sequence lengths (beyond the paper; JAX's ``query_seq_lengths`` and
``key_value_seq_lengths``): the padding mask built from the lengths of each sequence.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bool_mask


def with_lengths(mask, q_lengths, kv_lengths, q_shape: tuple, k_shape: tuple):
    """``mask`` ANDed with the padding of per-sequence lengths (JAX's ``query_seq_lengths``,
    ``key_value_seq_lengths``): query ``i`` of sequence ``b`` is real iff ``i < q_lengths[b]``,
    key ``j`` iff ``j < kv_lengths[b]``; ``b`` is the first axis of ``q (B, ..., L, d)``.

    Returns the mask ``(B, 1, ..., L, S)`` (or ``mask`` itself when both lengths are None).
    A padded query row is fully masked: output 0 and gradients 0, as every fully masked row.
    """
    if q_lengths is None and kv_lengths is None:
        return mask
    L, S = q_shape[-2], k_shape[-2]
    if len(q_shape) < 3:
        raise ValueError(f"q_lengths/kv_lengths need a batch axis: q must be (B, ..., L, d_k), "
                         f"got shape {q_shape}")
    B = q_shape[0]
    allowed = np.ones((B, L, S), dtype=bool)
    for name, lengths, n, axis in (("q_lengths", q_lengths, L, 1), ("kv_lengths", kv_lengths, S, 2)):
        if lengths is None:
            continue
        lengths = np.asarray(lengths)
        if lengths.shape != (B,) or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"{name} must be an int array (B,) = ({B},) for q {q_shape}, got "
                             f"shape {lengths.shape} and dtype {lengths.dtype}")
        if lengths.size and (lengths.min() < 0 or lengths.max() > n):
            raise ValueError(f"{name} must be in [0, {n}], got values in "
                             f"[{lengths.min()}, {lengths.max()}]")
        real = np.arange(n) < lengths[:, None]                           # (B, n)
        allowed &= real[:, :, None] if axis == 1 else real[:, None, :]
    allowed = allowed.reshape((B,) + (1,) * (len(q_shape) - 3) + (L, S))
    return allowed if mask is None else as_bool_mask(mask) & allowed


