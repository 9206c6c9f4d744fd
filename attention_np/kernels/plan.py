"""The options of one call of Eq. (1), for any kernel: :class:`Plan`, built once by the caller.

The public kernel functions (``sdpa_forward``, ``flash_attention_forward``) take the paper's
options as keywords and everything beyond the paper in an :class:`attention_np.AttentionSpec`;
:func:`plan_from` turns both into a plan, and maps the 0.1 keywords (``window=``, ``softcap=``,
``q_lengths=``, ``kv_lengths=``) with a ``DeprecationWarning`` that names their new home.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_bool
from attention_np.variants.lengths import with_lengths
from attention_np.variants.spec import AttentionSpec

OPTIONS = ("bias", "window", "softcap", "gqa", "dropout", "sinks")

# 0.1 keywords of the kernel functions -> where they went in 0.2
MOVED_TO_SPEC = {"window": "window", "softcap": "softcap"}
MOVED_TO_MASK = ("q_lengths", "kv_lengths")


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

    def options(self) -> tuple:
        """The names of :data:`OPTIONS` this plan uses."""
        used = {"bias": self.bias is not None, "window": self.window is not None,
                "softcap": self.softcap is not None, "gqa": bool(self.enable_gqa),
                "dropout": bool(self.dropout_p), "sinks": self.sinks is not None}
        return tuple(name for name in OPTIONS if used[name])


def kernel_spec(caller: str, spec, deprecated: dict, *, stacklevel: int = 4) -> AttentionSpec:
    """The spec a kernel function runs with: ``spec`` (or the default) with the 0.1 keywords of
    ``deprecated`` mapped onto it. Fields that belong to multi-head attention are refused."""
    spec = AttentionSpec() if spec is None else spec
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"{caller}: spec must be an attention_np.AttentionSpec, got "
                        f"{type(spec).__name__}")
    unknown = set(deprecated) - set(MOVED_TO_SPEC) - set(MOVED_TO_MASK)
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {sorted(unknown)}")
    for old, new in MOVED_TO_SPEC.items():
        if deprecated.get(old) is not None:
            warnings.warn(f"{caller}({old}=...) is deprecated since 0.2.0: pass "
                          f"spec=AttentionSpec({new}=...)", DeprecationWarning, stacklevel=stacklevel)
            if getattr(spec, new) is not None:
                raise TypeError(f"{caller} got both {old}= and spec.{new}; pass spec.{new} only")
            spec = spec.replace(**{new: deprecated[old]})
    layer_only = {"num_heads": None, "rope": None, "qk_norm": "rms", "qk_norm_eps": 1e-6,
                  "qk_norm_scope": "head"}
    for name, default in layer_only.items():
        if getattr(spec, name) != default:
            raise ValueError(f"{caller} computes Eq. (1) on heads already projected and split: "
                             f"spec.{name} belongs to multi-head attention (attention_np.mha_forward)")
    return spec


def mask_with_lengths(caller: str, mask, deprecated: dict, q_shape: tuple, k_shape: tuple,
                      *, heads: bool = False, stacklevel: int = 4):
    """``mask`` with the deprecated ``q_lengths``/``kv_lengths`` keywords ANDed in; with
    ``heads=True`` the shapes are of the inputs of multi-head attention and the mask gets a head
    axis, ``(B, 1, L, S)``."""
    q_lengths, kv_lengths = (deprecated.get(name) for name in MOVED_TO_MASK)
    if q_lengths is None and kv_lengths is None:
        return mask
    fix = "lengths_mask(q_lengths, kv_lengths, L, S)" + ("[:, None]" if heads else "")
    warnings.warn(f"{caller}(q_lengths=..., kv_lengths=...) is deprecated since 0.2.0: pass "
                  f"mask=attention_np.{fix}, ANDed with any other mask", DeprecationWarning,
                  stacklevel=stacklevel)
    if heads:
        q_shape, k_shape = (s[:-2] + (1,) + s[-2:] for s in (q_shape, k_shape))
    return with_lengths(mask, q_lengths, kv_lengths, q_shape, k_shape)


#: The options with two homes, a keyword of the call and a field of the spec, and their value
#: when neither says: None in either home means "not said here".
TWO_HOMES = {"num_heads": None, "is_causal": False, "scale": None, "dropout_p": 0.0}


def merged(caller: str, spec: AttentionSpec, name: str, value):
    """An option of :data:`TWO_HOMES` as the call gives it (``value``, None when not given) and
    as the spec does: the one that says it, the same value twice, or the default when neither
    does. Two different values are a ``ValueError`` naming both (the keyword does not silently
    win, nor the spec). ``is_causal`` must be a bool wherever it is said."""
    in_spec = getattr(spec, name)
    if name == "is_causal" and value is not None:
        check_bool(value, "is_causal")
    if value is None:
        return TWO_HOMES[name] if in_spec is None else in_spec
    if in_spec is not None and not same_value(in_spec, value):
        raise ValueError(f"{caller} got {name}={value!r} and spec.{name}={in_spec!r}: two "
                         f"different values for one option; give it once, as the keyword or in "
                         f"the spec (or the same value in both)")
    return value


def same_value(a, b) -> bool:
    """``a == b`` for scalars; False for anything that does not compare to one bool."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def plan_from(caller: str, spec, deprecated: dict, q, k, mask=None, **call) -> Plan:
    """The plan of a kernel function's call: its keywords ``call`` (the fields of :class:`Plan`
    given as keywords), its ``spec`` and its 0.1 keywords ``deprecated``, checked together.

    ``is_causal``, ``scale`` and ``dropout_p`` may come from the call or the spec (both only with
    the same value: :func:`merged`); ``window`` and ``softcap`` come from the spec.
    """
    spec = kernel_spec(caller, spec, deprecated)
    mask = mask_with_lengths(caller, mask, deprecated, np.shape(q), np.shape(k))
    for name in ("is_causal", "scale", "dropout_p"):
        call[name] = merged(caller, spec, name, call.get(name))
    return Plan(mask=mask, window=spec.window, softcap=spec.softcap, **call)
