"""The masks of §3.2. Convention: **True = this query may attend to this key**, the polarity of
PyTorch's ``scaled_dot_product_attention`` bool ``attn_mask`` and of JAX's ``mask``.
"""

from __future__ import annotations

import numpy as np

from attention_np.paper._validate import as_bool_mask, check_int

ALIGNMENTS = ("top_left", "bottom_right")


def causal_mask(L: int, S: int | None = None, *, align: str = "top_left") -> np.ndarray:
    """The mask of masked decoder self-attention (§3.2.3): no query attends to a later key.

    Parameters
    ----------
    L, S : int
        Numbers of queries and keys (``S`` defaults to ``L``).
    align : {"top_left", "bottom_right"}
        Where the diagonal sits when ``L != S``. ``"top_left"``: query ``i`` sees keys
        ``j <= i`` (PyTorch's and JAX's ``is_causal``). ``"bottom_right"``: ``j <= i + S - L``,
        the ``L`` queries being the last ``L`` positions (FlashAttention, a KV cache).

    Returns
    -------
    mask : bool (L, S)

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
    i = np.arange(L)[:, None]                                  # (L, 1) query positions
    j = np.arange(S)[None, :]                                  # (1, S) key positions
    return j <= i + (0 if align == "top_left" else S - L)      # (L, S)


def padding_mask(lengths, S: int | None = None) -> np.ndarray:
    """Key padding: key ``j`` of sequence ``b`` is real (True) iff ``j < lengths[b]``.

    Parameters
    ----------
    lengths : int array (B,)
        The true length of each sequence.
    S : int, optional
        The padded length (default ``max(lengths)``).

    Returns
    -------
    mask : bool (B, 1, S)
        Broadcasts against the scores ``(B, L, S)`` of :func:`~attention_np.paper.attention.sdpa_forward`.
        Multi-head scores are ``(B, h, L, S)``: pass ``mask[:, None]``, of shape ``(B, 1, 1, S)``,
        so that ``B`` is not aligned with the heads.
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
    return (np.arange(S) < lengths[:, None])[:, None, :]      # (B, S) -> (B, 1, S)


def mask_from_blocked(blocked) -> np.ndarray:
    """A "True = blocked" mask (``torch.nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask``) as this project's "True = may attend".

    Parameters
    ----------
    blocked : bool array of any shape, True = blocked
    """
    return ~as_bool_mask(blocked, "blocked")
