"""Input checks shared by every public function.

Each check raises a ``ValueError`` or ``TypeError`` whose message names the argument and
the numbers involved, so that a wrong call is understood from the message alone.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

# the checks §3.2 needs, shared with attention_np.paper (which imports nothing else): one copy each
from attention_np.paper._validate import (  # noqa: F401  (re-exported)
    as_bool_mask,
    as_float_array,
    broadcast_batch,
    check_bool,
    check_broadcasts_to,
    check_cache,
    check_d_v,
    check_dout,
    check_int,
    check_min_ndim,
    check_real,
    check_same_dtype,
    check_scale,
    sum_to_shape,
)

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_deprecated(message: str) -> None:
    """A ``DeprecationWarning`` attributed to the first caller outside the package and the import
    machinery: the user's line, however deep inside the package the 0.1 spelling was noticed (a
    fixed ``stacklevel`` is wrong for a helper reached by more than one path, or for a module
    imported by ``import`` and by ``attention_np.X``; a warning attributed to the package's own
    module is hidden by Python's default filters)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and (os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)
                                 or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back
        # warnings.warn does not count importlib's _bootstrap frames in stacklevel
        if frame is not None and not ("importlib" in frame.f_code.co_filename
                                      and "_bootstrap" in frame.f_code.co_filename):
            level += 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def as_bias(bias, name: str = "bias") -> np.ndarray:
    bias = np.asarray(bias)
    if not np.issubdtype(bias.dtype, np.floating):
        hint = " (a bool array is a mask: pass it as mask)" if bias.dtype == np.bool_ else ""
        raise TypeError(f"{name} must be a floating-point array added to the scores, "
                        f"got dtype {bias.dtype}{hint}")
    return bias


def check_rng(rng) -> None:
    """``rng`` is None, an int seed >= 0 or a ``np.random.Generator`` (checked even where it is
    not used this time, e.g. with no dropout: a wrong one is a mistake either way)."""
    if isinstance(rng, np.random.Generator) or rng is None:
        return
    if not isinstance(rng, (int, np.integer)) or isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be None, an int seed or a np.random.Generator, got "
                        f"{type(rng).__name__} ({rng!r})")
    if rng < 0:
        raise ValueError(f"rng must be a seed >= 0, got {rng}")


def as_generator(rng) -> np.random.Generator:
    """A seed, a Generator or None (fresh entropy) as a ``np.random.Generator``."""
    if isinstance(rng, np.random.Generator):
        return rng
    check_rng(rng)
    return np.random.default_rng(rng)


def check_qkv(q, k, v, scale=None):
    """``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)`` of one floating dtype, and the scale.

    Every attention forward starts here. Returns ``(q, k, v, scale)`` with ``scale`` a float.
    """
    q = as_float_array(q, "q", 2, "(..., L, d_k)")
    k = as_float_array(k, "k", 2, "(..., S, d_k)")
    v = as_float_array(v, "v", 2, "(..., S, d_v)")
    check_d_v(v)
    check_same_dtype(q=q, k=k, v=v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]} "
                         f"(q {q.shape}, k {k.shape})")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has S={k.shape[-2]} positions but v has S={v.shape[-2]} "
                         f"(k {k.shape}, v {v.shape})")
    return q, k, v, check_scale(scale, q.shape[-1])


def check_dropout_p(dropout_p) -> float:
    """A dropout probability: a real number in [0, 1] (not a bool, not NaN)."""
    if isinstance(dropout_p, (bool, np.bool_)) or not isinstance(
            dropout_p, (int, float, np.integer, np.floating)):
        raise TypeError(f"dropout_p must be a real number in [0, 1], got {dropout_p!r} "
                        f"of type {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p <= 1.0:                 # False for NaN too
        raise ValueError(f"dropout_p must be in [0, 1], got {dropout_p!r}")
    return float(dropout_p)


def check_params_dict(params, name: str = "params", maker: str = "init_mha_params") -> dict:
    """``params`` is a dict of ndarrays; a ``TypeError`` naming the bad entry otherwise."""
    if not isinstance(params, dict):
        raise TypeError(f"{name} must be a dict of arrays ({maker} makes one), "
                        f"got {type(params).__name__}")
    for key, p in params.items():
        if not isinstance(p, np.ndarray) or not np.issubdtype(p.dtype, np.floating):
            got = p.dtype if isinstance(p, np.ndarray) else type(p).__name__
            raise TypeError(f"{name}[{key!r}] must be a floating-point ndarray, got {got}")
    return params
