"""Boolean attention masks. Convention: **True = this query may attend to this key.**

That is the polarity of PyTorch's ``scaled_dot_product_attention`` bool ``attn_mask`` and of
JAX's ``mask``. PyTorch's ``nn.MultiheadAttention`` uses the opposite ("True = blocked");
:func:`mask_from_blocked` converts from it.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_bool_mask, check_int

ALIGNMENTS = ("top_left", "bottom_right")


def causal_mask(L: int, S: int | None = None, *, align: str = "top_left") -> np.ndarray:
    """The causal mask of §3.2.3: a query may not attend to later keys.

    Parameters
    ----------
    L : int
        Number of queries.
    S : int, optional
        Number of keys (default ``L``).
    align : {"top_left", "bottom_right"}
        Where the diagonal sits when ``L != S``:

        - ``"top_left"``: query ``i`` sees keys ``j <= i``. PyTorch's and JAX's ``is_causal``.
        - ``"bottom_right"``: query ``i`` sees keys ``j <= i + S - L``: the ``L`` queries are
          the *last* ``L`` positions of the sequence, as when decoding with a KV cache
          (FlashAttention >= 2.1, ``torch.nn.attention.bias.causal_lower_right``).

    Returns
    -------
    mask : bool array (L, S)

    Examples
    --------
    >>> causal_mask(2, 3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0]])
    >>> causal_mask(2, 3, align="bottom_right").astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    L = check_int(L, "L", minimum=0)
    S = L if S is None else check_int(S, "S", minimum=0)
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top_left" else S - L
    return np.tri(L, S, k=offset, dtype=bool)


def padding_mask(lengths, S: int | None = None) -> np.ndarray:
    """Key padding mask from sequence lengths: key ``j`` of sequence ``b`` is real iff ``j < lengths[b]``.

    Parameters
    ----------
    lengths : int array (B,)
        The true length of each sequence in the batch.
    S : int, optional
        The padded length (default ``max(lengths)``).

    Returns
    -------
    mask : bool array (B, 1, S)
        Broadcasts against scores ``(B, L, S)``. For multi-head scores ``(B, h, L, S)`` add a
        head axis, ``mask[:, None]``, so that ``B`` is not aligned with the heads.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D int array (B,), got shape {lengths.shape} "
                         f"and dtype {lengths.dtype}")
    if lengths.size and lengths.min() < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.min()}")
    longest = int(lengths.max()) if lengths.size else 0
    S = longest if S is None else check_int(S, "S", minimum=0)
    if longest > S:
        raise ValueError(f"lengths has a sequence of length {longest} but S={S}")
    return (np.arange(S) < lengths[:, None])[:, None, :]


def mask_from_blocked(blocked) -> np.ndarray:
    """Convert a "True = blocked" mask (PyTorch ``nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask``) to this project's "True = may attend"."""
    return ~as_bool_mask(blocked, "blocked")

