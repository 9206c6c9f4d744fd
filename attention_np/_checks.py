"""Input checks shared by every public function.

Each check raises a ``ValueError`` or ``TypeError`` whose message names the argument and
the numbers involved, so that a wrong call is understood from the message alone.
"""

from __future__ import annotations

import numpy as np


def check_int(n, name: str, minimum: int = 1) -> int:
    """``n`` as an int >= ``minimum`` (a bool is not a count); ``ValueError`` naming ``name``."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, (bool, np.bool_)) or n < minimum:
        kind = {0: "non-negative", 1: "positive"}.get(minimum, f">= {minimum}")
        raise ValueError(f"{name} must be a {kind} int, got {n!r}")
    return int(n)


def as_float_array(x, name: str) -> np.ndarray:
    """``x`` as an ndarray of a floating dtype; ``TypeError`` naming ``name`` otherwise."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")
    return x


def check_min_ndim(x: np.ndarray, name: str, ndim: int, layout: str) -> None:
    if x.ndim < ndim:
        raise ValueError(f"{name} must have at least {ndim} dims {layout}, got shape {x.shape}")


def check_same_dtype(label: str | None = None, **arrays: np.ndarray) -> np.dtype:
    """All arrays share one dtype (as in PyTorch SDPA); returns it.

    The error groups the names by dtype, e.g. "q, k, v must share one dtype: q is float32;
    k, v are float64". ``label`` replaces the list of names at the start of the message.
    """
    by_dtype: dict = {}
    for name, a in arrays.items():
        by_dtype.setdefault(a.dtype, []).append(name)
    if len(by_dtype) > 1:
        listing = "; ".join(f"{', '.join(ns)} {'is' if len(ns) == 1 else 'are'} {dt}"
                            for dt, ns in by_dtype.items())
        raise TypeError(f"{label or ', '.join(arrays)} must share one dtype: {listing}")
    return next(iter(by_dtype))


def broadcast_batch(**shapes: tuple) -> tuple:
    """Broadcast the given batch shapes together, naming them all on failure."""
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        listing = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise ValueError(f"batch dims do not broadcast: {listing}") from None


def check_dout(dout, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The upstream gradient of a backward: the output's shape and dtype (no silent upcast)."""
    dout = as_float_array(dout, "dout")
    if dout.shape != tuple(shape):
        raise ValueError(f"dout has shape {dout.shape} but out has shape {tuple(shape)}")
    if dout.dtype != dtype:
        raise TypeError(f"dout has dtype {dout.dtype} but out has dtype {dtype}")
    return dout


def as_bool_mask(mask, name: str = "mask") -> np.ndarray:
    """A boolean mask (True = may attend); a float or integer array is refused."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        hint = " (a float array is not a mask: pass it as bias)" if np.issubdtype(
            mask.dtype, np.floating) else ""
        raise TypeError(f"{name} must be a bool array (True = may attend), "
                        f"got dtype {mask.dtype}{hint}")
    return mask


def as_bias(bias, name: str = "bias") -> np.ndarray:
    bias = np.asarray(bias)
    if not np.issubdtype(bias.dtype, np.floating):
        hint = " (a bool array is a mask: pass it as mask)" if bias.dtype == np.bool_ else ""
        raise TypeError(f"{name} must be a floating-point array added to the scores, "
                        f"got dtype {bias.dtype}{hint}")
    return bias


def check_broadcasts_to(x: np.ndarray, name: str, target: tuple, layout: str) -> tuple:
    """Check that ``x`` broadcasts against ``target`` without changing its last two dims.

    Returns the broadcast shape (leading dims of ``x`` may add batch dims).
    """
    try:
        shape = np.broadcast_shapes(x.shape, target)
    except ValueError:
        raise ValueError(f"{name} of shape {x.shape} does not broadcast to "
                         f"{layout} = {target}") from None
    if shape[-2:] != target[-2:]:
        raise ValueError(f"{name} of shape {x.shape} does not broadcast to "
                         f"{layout} = {target}")
    return shape


def sum_to_shape(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a gradient over the dims that broadcasting added or stretched.

    The backward of broadcasting an input of ``shape`` up to ``g.shape`` (NumPy's rules).
    """
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def as_generator(rng) -> np.random.Generator:
    """A seed, a Generator or None (fresh entropy) as a ``np.random.Generator``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed or a np.random.Generator, got {type(rng).__name__}")
