"""Input checks for :mod:`attention_np.paper`: each error names the argument and the shapes or
values, so that a wrong call is understood from the message alone. Every check runs before any
work. The dtype rule: float32 in, float32 out; float64 stays float64; no silent upcast.
"""

from __future__ import annotations

import inspect

import numpy as np


def check_int(n, name: str, minimum: int = 1) -> int:
    """``n`` as an int >= ``minimum`` that NumPy can hold (an int64; a bool is not a count)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, (bool, np.bool_)) or n < minimum:
        kind = {0: "non-negative", 1: "positive"}.get(minimum, f">= {minimum}")
        raise ValueError(f"{name} must be a {kind} int, got {n!r}")
    if n > INT64_MAX:
        raise ValueError(f"{name} must be at most 2**63 - 1 (a size NumPy can hold), got {n!r}")
    return int(n)


INT64_MAX = int(np.iinfo(np.int64).max)


def check_real(x, name: str, *, positive: bool = False) -> float:
    """``x`` as a finite real number, ``> 0`` when ``positive``, else ``>= 0`` (a bool is not a
    number here)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {x!r} of type {type(x).__name__}")
    if not np.isfinite(x) or (x <= 0 if positive else x < 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, "
                         f"got {x!r}")
    return float(x)


def check_bool(flag, name: str) -> bool:
    """``flag`` is True or False (a NumPy bool too); anything else, 1 and "no" included, is a
    ``TypeError`` naming it: a truthy string would otherwise switch the option on."""
    if not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {flag!r} of type {type(flag).__name__}")
    return bool(flag)


def as_float_array(x, name: str, ndim: int = 0, layout: str = "") -> np.ndarray:
    """``x`` as an ndarray of a floating dtype with at least ``ndim`` dims ``layout``."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")
    check_min_ndim(x, name, ndim, layout)
    return x


def check_min_ndim(x: np.ndarray, name: str, ndim: int, layout: str) -> None:
    """``x`` has at least ``ndim`` dims, laid out as ``layout`` (e.g. ``"(..., L, d_k)"``)."""
    if x.ndim < ndim:
        raise ValueError(f"{name} must have at least {ndim} dims {layout}, got shape {x.shape}")


def as_bool_mask(mask, name: str = "mask") -> np.ndarray:
    """A boolean mask, True = may attend; a float or integer array is refused."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        # PyTorch's float attn_mask is added to the scores: here that is a bias, not a mask
        hint = (" (a float array is not a mask: to add it to the scores, pass it as bias where the "
                "function takes one)") if np.issubdtype(mask.dtype, np.floating) else ""
        raise TypeError(f"{name} must be a bool array (True = may attend), got dtype {mask.dtype}{hint}")
    return mask


def check_same_dtype(label: str | None = None, **arrays: np.ndarray) -> np.dtype:
    """One dtype for all, as in PyTorch ("q, k, v must share one dtype: q is float32; k, v are float64")."""
    by_dtype: dict = {}
    for name, a in arrays.items():
        by_dtype.setdefault(a.dtype, []).append(name)
    if len(by_dtype) > 1:
        listing = "; ".join(f"{', '.join(ns)} {'is' if len(ns) == 1 else 'are'} {dt}"
                            for dt, ns in by_dtype.items())
        raise TypeError(f"{label or ', '.join(arrays)} must share one dtype: {listing}")
    return next(iter(by_dtype))


def check_broadcasts_to(x: np.ndarray, name: str, target: tuple, layout: str) -> tuple:
    """``x`` broadcasts to ``target``, leaving its dims unchanged (``x`` may add leading dims).

    Returns the broadcast shape, ``(*added, *target)``.
    """
    try:
        shape = np.broadcast_shapes(x.shape, target)
    except ValueError:
        shape = None
    if shape is None or shape[len(shape) - len(target):] != tuple(target):
        raise ValueError(f"{name} of shape {x.shape} does not broadcast to {layout} = {tuple(target)}")
    return shape


def check_heads_mask(mask, batch: tuple, heads: tuple, layout: str = "(..., h, L, S)"):
    """A bool ``mask`` for multi-head scores ``(*batch, h, L, S)`` (``heads = (h, L, S)``, ``batch``
    the inputs' batch dims), on exactly one reading of its axes. The one mask rule of
    :func:`attention_np.paper.mha_forward` and :func:`attention_np.mha_forward`:

    - it broadcasts from the right and changes no dim of the scores: no batch dim added or
      stretched (the output's batch is the inputs'), nor ``h``, ``L`` or ``S``;
    - with batched inputs, a 3-D ``(n, L, S)`` mask (``n > 1``) lines ``n`` up with the heads:
      taken as one mask per head when ``n == h`` and the batch ``B != h``; refused, naming the
      fix, when it could be one per sequence instead (``n == h == B``: ``padding_mask``'s
      ``(B, 1, S)`` would be read as per head, silently) or cannot be one per head (``n != h``).
    """
    if mask is None:
        return None
    mask = as_bool_mask(mask)
    scores = tuple(batch) + tuple(heads)
    h = heads[0]
    if mask.ndim == 3 and mask.shape[0] > 1 and len(batch) > 0 and (mask.shape[0] != h or batch[0] == h):
        why = (f"one per head or one per sequence (batch {batch[0]})?" if mask.shape[0] == h
               else f"there are {h}")
        raise ValueError(
            f"mask of shape {mask.shape} is ambiguous with batched inputs: multi-head scores are "
            f"(..., h, L, S) = (..., {', '.join(map(str, heads))}), so its first dim would be read as "
            f"the heads ({why}). For a per-sequence mask (padding_mask's (B, 1, S)) pass mask[:, None], "
            f"of shape (B, 1, 1, S); for a per-head (h, L, S) mask pass mask[None]")
    try:
        shape = np.broadcast_shapes(mask.shape, scores)
    except ValueError:
        shape = None
    if shape != scores:
        why = "" if shape is None or shape[-3:] != scores[-3:] else (
            f": it would add or stretch batch dims of the inputs (batch {tuple(batch)})")
        raise ValueError(f"mask of shape {mask.shape} does not broadcast to {layout} = {scores}{why}")
    return mask


def broadcast_batch(**shapes: tuple) -> tuple:
    """The batch shapes broadcast together, all named on failure."""
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        listing = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise ValueError(f"batch dims do not broadcast: {listing}") from None


def check_dout(dout, shape: tuple, dtype: np.dtype, name: str = "dout", out: str = "out") -> np.ndarray:
    """The upstream gradient of a backward: the output's shape and dtype."""
    dout = as_float_array(dout, name)
    if dout.shape != tuple(shape):
        raise ValueError(f"{name} has shape {dout.shape} but {out} has shape {tuple(shape)}")
    if dout.dtype != dtype:
        raise TypeError(f"{name} has dtype {dout.dtype} but {out} has dtype {dtype} "
                        f"(mixed float32/float64 is refused, not silently upcast)")
    return dout


def check_cache(cache, cls: type, forward: str) -> None:
    """A backward's ``cache`` is the ``cls`` that ``forward`` returns; else a ``TypeError`` naming it.

    A cache class may name the forward that makes it in a ``made_by`` class attribute; a cache
    from another forward (the paper's and the kernels' attention, say) is then named too.
    """
    if not isinstance(cache, cls):
        got = type(cache)
        made_by = getattr(got, "made_by", None)
        hint = (f" (a {got.__name__} comes from {made_by}; pass it to that forward's backward)"
                if made_by else "")
        raise TypeError(f"cache must be the {cls.__name__} returned by {forward}, "
                        f"got {got.__module__}.{got.__qualname__}{hint}")


def sum_to_shape(g: np.ndarray, shape: tuple) -> np.ndarray:
    """The backward of broadcasting an input of ``shape`` up to ``g.shape`` (NumPy's rules): sum
    ``g`` over the dims that broadcasting added or stretched."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


def check_d_v(v: np.ndarray) -> None:
    """The values have features: ``d_v = v.shape[-1] >= 1`` (0 would give an empty output)."""
    if v.shape[-1] < 1:
        raise ValueError(f"d_v (the last dim of v) must be >= 1, got d_v=0 (v of shape {v.shape}): "
                         f"the output would be empty")


def check_scale(scale, d_k: int) -> float:
    """The factor on ``QKᵀ``: ``1/sqrt(d_k)`` when None, else a finite real number."""
    if d_k < 1:          # no features: 1/sqrt(0), and no dot product to scale
        raise ValueError(f"d_k (the last dim of q and k) must be >= 1, got d_k={d_k}")
    if scale is None:
        return 1.0 / float(np.sqrt(d_k))
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number (default 1/sqrt(d_k)), got {scale!r} "
                        f"of type {type(scale).__name__}")
    if not np.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}")
    return float(scale)


# --- Checks of callables, seeds, dtypes and widths, shared with the layers above ----------------


def check_callable(f, name: str, what: str = "", *, arity: int | None = None) -> None:
    """``f`` is callable; else a ``TypeError`` naming it (``what``: what it is called with).
    ``arity``: it is called with that many positional arguments, so one that cannot take them
    (``lambda: ...`` for ``on_step(step, loss)``) is refused here, before any work, naming
    ``name``, not later from inside by Python's ``<lambda>() takes 0 positional arguments``."""
    if not callable(f):
        raise TypeError(f"{name} must be a callable{what}, got {f!r} of type {type(f).__name__}")
    check_arity(f, name, arity)


def check_arity(f, name: str, arity: int | None) -> None:
    """``f(*arity arguments)`` binds to ``f``'s signature (nothing to check without one)."""
    if arity is None:
        return
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):         # a builtin or extension without a signature
        return
    try:
        signature.bind(*range(arity))
    except TypeError:
        args = {0: "no arguments", 1: "1 positional argument"}.get(arity, f"{arity} positional arguments")
        raise TypeError(f"{name} must be a callable taking {args}, got a callable of signature "
                        f"{signature}") from None


def check_seed(rng, name: str = "rng") -> None:
    """``rng`` is None, an int seed >= 0 or a ``np.random.Generator`` (a bool is not a seed)."""
    if rng is None or isinstance(rng, np.random.Generator):
        return
    if not isinstance(rng, (int, np.integer)) or isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"{name} must be None, an int seed >= 0 or a np.random.Generator, got "
                        f"{rng!r} of type {type(rng).__name__}")
    if rng < 0:
        raise ValueError(f"{name} must be a seed >= 0, got {rng}")


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """``dtype`` as a floating NumPy dtype (float16/32/64); an integer, bool, complex or unknown
    dtype is a ``TypeError`` naming it (an int dtype would round cos and sin to 0 and 1)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or isinstance(dtype, (bool, int, float)) or not np.issubdtype(dt, np.floating):
        got = dt if dt is not None else f"{dtype!r} of type {type(dtype).__name__}"
        raise TypeError(f"{name} must be a floating dtype, got {got} (pass np.float32 or np.float64)")
    return dt


def check_even_width(d, name: str) -> int:
    """A rotated width: an even int >= 2 (RoPE turns pairs of features) that NumPy can hold."""
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 2 or d % 2:
        raise ValueError(f"{name} must be an even int >= 2 (pairs of features rotate), got {d!r}")
    return check_int(d, name, minimum=2)
