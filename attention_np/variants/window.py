"""Sliding-window attention (beyond the paper; Longformer, Mistral): each query attends only
the keys within ``left`` positions before it and ``right`` after it.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_int
from attention_np.paper.masks import ALIGNMENTS


def check_window(window) -> tuple:
    """``window = (left, right)``: two non-negative ints or None (unbounded on that side)."""
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise ValueError(f"window must be a pair (left, right) of non-negative ints or None, "
                         f"got {window!r}")
    return tuple(None if w is None else check_int(w, f"window {side}", minimum=0)
                 for w, side in zip(window, ("left", "right"), strict=True))


def sliding_window_mask(L: int, S: int | None = None, *, left=None, right=None,
                        align: str = "top_left") -> np.ndarray:
    """Sliding-window (local) attention: query ``i`` sees keys ``i - left <= j <= i + right``.

    Beyond the paper (Longformer, Mistral, Gemma 2). ``left=None`` or ``right=None`` leaves that
    side unbounded, so ``right=0`` is causal with a window and ``(None, 0)`` is :func:`causal_mask`.
    The window counts the query itself: Mistral's ``sliding_window=W`` is ``left=W - 1, right=0``;
    JAX's ``local_window_size=(left, right)`` is the same pair.

    Parameters
    ----------
    L : int
        Number of queries.
    S : int, optional
        Number of keys (default ``L``).
    left, right : int >= 0 or None, keyword-only
        How many keys before and after the query's own position it may see; at least one
        (``sliding_window_mask(4, 2)`` is 4 queries and 2 keys with no window, an error).
    align : {"top_left", "bottom_right"}
        Where query ``i`` sits among the keys when ``L != S``, as in :func:`causal_mask`:
        position ``i`` (top left), or ``i + S - L`` (bottom right: the queries are the last ``L``
        positions, as when decoding with a KV cache).

    Returns
    -------
    mask : bool array (L, S)

    Examples
    --------
    >>> sliding_window_mask(4, left=1, right=0).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    L = check_int(L, "L", minimum=0)
    S = L if S is None else check_int(S, "S", minimum=0)
    left, right = check_window((left, right))
    if left is None and right is None:
        raise ValueError(f"sliding_window_mask({L}, {S}) has no window: pass left= and/or right= "
                         f"(keyword-only since 0.2.0; the second argument is S, the number of keys)")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top_left" else S - L
    rel = np.arange(S) - (np.arange(L)[:, None] + offset)      # (L, S): key minus query position
    mask = np.ones((L, S), dtype=bool)
    if left is not None:
        mask &= rel >= -left
    if right is not None:
        mask &= rel <= right
    return mask


def window_mask(L: int, S: int, window, *, align: str = "top_left") -> np.ndarray | None:
    """The mask of a ``window = (left, right)`` option (checked), or None when it bounds neither
    side: what the kernels and the decode step AND into their masks."""
    left, right = check_window(window)
    if left is None and right is None:
        return None
    return sliding_window_mask(L, S, left=left, right=right, align=align)
