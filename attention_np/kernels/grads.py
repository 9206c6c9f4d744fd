"""What every kernel's backward returns: :class:`Grads`, one structure whatever the options.

The public backward functions (``sdpa_backward``, ``flash_attention_backward``,
``sdpa_sinks_backward``) keep their documented tuples; the kernels behind them, and the kernel
registry (:mod:`attention_np.kernels.registry`), return a :class:`Grads`, whose optional
fields are None when the forward had no such option.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class Grads:
    """The gradients of one backward of Eq. (1).

    Attributes
    ----------
    dq, dk, dv : each with the shape of its input (broadcast batch dims summed back)
    dbias : the shape of the forward's ``bias``, or None (no bias, or not asked for)
    dsinks : (h,) the gradient w.r.t. the sink logits, or None without sinks
    """

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    dbias: np.ndarray | None = None
    dsinks: np.ndarray | None = None

    @property
    def qkv(self) -> tuple:
        """``(dq, dk, dv)``."""
        return self.dq, self.dk, self.dv
