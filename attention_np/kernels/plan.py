"""The options of one call of Eq. (1), for any kernel: :class:`Plan`, built once by the caller.

The public kernel functions (``sdpa_forward``, ``flash_attention_forward``) take the paper's
options and the per-call arrays as keywords and everything beyond the paper in an
:class:`attention_np.AttentionSpec`; :func:`plan_from` turns both into a plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_bool
from attention_np.variants.spec import AttentionSpec

OPTIONS = ("bias", "window", "softcap", "gqa", "dropout", "sinks")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The options of one call of Eq. (1), keyword-only: ``Plan(mask=m, is_causal=True)``.

    Attributes
    ----------
    mask : bool, broadcastable to (..., L, S), or None
    is_causal : bool, top-left aligned
    scale : float or None (``1 / sqrt(d_k)``)
    bias : float, broadcastable to (..., L, S), or None
    window : (left, right) or None
    softcap : float or None
    enable_gqa : bool, ``k`` and ``v`` may carry fewer heads than ``q``
    dropout_p : float, with ``rng`` a seed or Generator
    sinks : float (h,) or None, one sink logit per query head
    prepared : bool
        True when the caller built ``mask`` as the call's whole mask (``is_causal``, the window
        and a ``-inf`` bias ANDed in: :func:`~attention_np.kernels.guard.whole_mask`), ``bias``
        in the inputs' dtype, and zeroed the inputs no pair attends (multi-head attention does,
        before its projections, and the decode steps on the heads): every kernel then takes the
        mask as built, drops nothing again, and reads ``is_causal`` and ``window`` only to skip
        work.
    """

    mask: np.ndarray | None = None
    is_causal: bool = False
    scale: float | None = None
    bias: np.ndarray | None = None
    window: tuple | None = None
    softcap: float | None = None
    enable_gqa: bool = False
    dropout_p: float = 0.0
    rng: object = None
    sinks: np.ndarray | None = None
    prepared: bool = False

    def options(self) -> tuple:
        """The names of :data:`OPTIONS` this plan uses."""
        used = {"bias": self.bias is not None, "window": self.window is not None,
                "softcap": self.softcap is not None, "gqa": bool(self.enable_gqa),
                "dropout": bool(self.dropout_p), "sinks": self.sinks is not None}
        return tuple(name for name in OPTIONS if used[name])


def kernel_spec(caller: str, spec) -> AttentionSpec:
    """The spec a kernel function runs with: ``spec`` (or the default), checked. Fields that
    belong to multi-head attention (RoPE and QK-norm act on the projections) are refused."""
    spec = AttentionSpec() if spec is None else spec
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"{caller}: spec must be an attention_np.AttentionSpec, got "
                        f"{type(spec).__name__}")
    layer_only = {"rope": None, "qk_norm": "rms", "qk_norm_eps": 1e-6,
                  "qk_norm_scope": "head"}
    for name, default in layer_only.items():
        if getattr(spec, name) != default:
            raise ValueError(f"{caller} computes Eq. (1) on heads already projected and split: "
                             f"spec.{name} belongs to multi-head attention (attention_np.mha_forward)")
    return spec


def plan_from(caller: str, spec, q=None, k=None, mask=None, *, is_causal=False, layer: bool = False,
              **call) -> Plan:
    """The plan of one call: its keywords ``call`` (the fields of :class:`Plan` given as keywords:
    the paper's options and the per-call arrays) over its ``spec``'s (window, soft-cap, dropout
    rate, grouped-query attention), checked together. A kernel function's spec is checked here
    (:func:`kernel_spec`); multi-head attention (``layer=True``) passes the spec it checked, whose
    RoPE and QK-norm act before the kernel, and decides grouped-query attention from ``params``."""
    spec = spec if layer else kernel_spec(caller, spec)
    options = dict(window=spec.window, softcap=spec.softcap, dropout_p=spec.dropout_p,
                   enable_gqa=spec.enable_gqa)
    return Plan(mask=mask, is_causal=check_bool(is_causal, "is_causal"), **{**options, **call})
