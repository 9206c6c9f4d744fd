r"""Logit soft-capping (beyond the paper; Gemma 2, Grok): ``scores -> c·tanh(scores / c)``, which
bounds every score to ``(-c, c)``; the ``tanh`` is kept for the backward,
``dscores_raw = dscores·(1 - tanh²)``.
"""

from __future__ import annotations

import numpy as np


def check_softcap(softcap) -> float | None:
    """The logit cap ``c`` of ``c·tanh(scores / c)``: None or a positive finite number."""
    if softcap is None:
        return None
    if isinstance(softcap, (bool, np.bool_)) or not isinstance(
            softcap, (int, float, np.integer, np.floating)):
        raise TypeError(f"softcap must be a positive real number or None, got {softcap!r}")
    if not (np.isfinite(softcap) and softcap > 0):
        raise ValueError(f"softcap must be a positive finite number, got {softcap!r}")
    return float(softcap)


def softcap_forward(scores: np.ndarray, softcap: float) -> tuple[np.ndarray, np.ndarray]:
    """``c·tanh(scores / c)`` and the ``tanh`` (both ``(..., L, S)``) its backward needs."""
    c = scores.dtype.type(softcap)
    capped = np.tanh(scores / c)
    return capped * c, capped


def softcap_backward(dscores: np.ndarray, capped: np.ndarray) -> np.ndarray:
    """forward: ``scores = c·tanh(raw / c)``  ->  ``draw = dscores·(1 - tanh²)``."""
    return dscores * (1 - capped * capped)
