"""Per-sequence lengths (beyond the paper; JAX's ``query_seq_lengths`` and
``key_value_seq_lengths``): the padding mask built from the lengths of each sequence.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bool_mask, check_int


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


def lengths_mask(q_lengths=None, kv_lengths=None, L: int | None = None, S: int | None = None):
    """The padding mask of per-sequence lengths: bool ``(B, L, S)``, True where query ``i`` of
    sequence ``b`` (``i < q_lengths[b]``) may attend key ``j`` (``j < kv_lengths[b]``).

    A padded query row is fully masked (output 0, gradients 0). For multi-head attention pass
    ``lengths_mask(...)[:, None]``, ``(B, 1, L, S)``. ``L`` and ``S`` default to the largest
    length given. Replaces the 0.1 keywords ``q_lengths=`` and ``kv_lengths=`` of the kernels.

    Parameters
    ----------
    q_lengths, kv_lengths : int array (B,), optional
        The real queries and keys of each sequence, in ``[0, L]`` and ``[0, S]``; at least one.
    L, S : int, optional
        The padded lengths (>= 0).

    Examples
    --------
    >>> lengths_mask(kv_lengths=np.array([1, 2]), L=1, S=3).astype(int).tolist()
    [[[1, 0, 0]], [[1, 1, 0]]]
    """
    B = _sequences(q_lengths, kv_lengths)
    L = _padded_length(L, "L", q_lengths)
    S = _padded_length(S, "S", kv_lengths)
    return with_lengths(None, q_lengths, kv_lengths, (B, L, 1), (B, S, 1))


def _sequences(q_lengths, kv_lengths) -> int:
    """The number of sequences ``B`` of ``lengths_mask``'s lengths: int arrays (B,), at least one."""
    if q_lengths is None and kv_lengths is None:
        raise ValueError("lengths_mask needs q_lengths or kv_lengths (int arrays (B,))")
    for name, lengths in (("q_lengths", q_lengths), ("kv_lengths", kv_lengths)):
        if lengths is not None and (np.ndim(lengths) != 1 or not np.issubdtype(np.asarray(lengths).dtype,
                                                                                 np.integer)):
            raise ValueError(f"{name} must be an int array (B,), one length per sequence, got "
                             f"{np.asarray(lengths).dtype} of shape {np.shape(lengths)}")
    if q_lengths is not None and kv_lengths is not None and np.shape(q_lengths) != np.shape(kv_lengths):
        raise ValueError(f"q_lengths has {np.shape(q_lengths)[0]} sequences but kv_lengths has "
                         f"{np.shape(kv_lengths)[0]}: one length of each per sequence")
    return np.shape(q_lengths if q_lengths is not None else kv_lengths)[0]


def _padded_length(n, name: str, lengths) -> int:
    """``L`` (or ``S``) checked, by default the largest length given (1 without lengths)."""
    if n is not None:
        return check_int(n, name, 0)
    return 1 if lengths is None else int(np.max(lengths, initial=0))
