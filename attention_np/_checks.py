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
    check_arity,
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
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
        raise TypeError(f"rng must be None, an int seed or a np.random.Generator, got "
                        f"{type(rng).__name__} ({rng!r})")
    check_seed(rng, "rng")


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
    return check_probability(dropout_p, "dropout_p")


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


# --- One check per kind of argument: flags, seeds, counts, numbers, callables, arrays, configs ---
# Every public function above the kernels checks each argument with one of these, before any work
# or state change. Each error names the argument, shows the value (or its type, shape, dtype) and
# says what is expected: "steps must be an int >= 0, got -1". A bool is never a number or a count
# (True == 1 in Python, so it would pass a bare range check), and a float is never a count.

_REALS = (int, float, np.integer, np.floating)
_INT64_MAX = int(np.iinfo(np.int64).max)
_BOOLS = (bool, np.bool_)


def is_integer(value) -> bool:
    """True for an int or a NumPy integer, False for a bool (an int in Python) and anything else:
    the one "a whole number, not a flag" test the package's checks and readers share."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, _BOOLS)


def is_number(value) -> bool:
    """True for a real number (int, float or their NumPy kinds), False for a bool and anything else."""
    return isinstance(value, _REALS) and not isinstance(value, _BOOLS)


def _got(value) -> str:
    """``value`` as an error message shows it: repr and type, short for arrays."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} of type {type(value).__name__}"


def check_flag(flag, name: str) -> bool:
    """A flag is True or False (a NumPy bool too), never ``1``, ``"no"`` or None."""
    return check_bool(flag, name)


def check_count(n, name: str, *, minimum: int = 1, maximum: int | None = None,
                optional: bool = False) -> int | None:
    """``n`` as an int in ``[minimum, maximum]`` (a count, a size, a number of steps).

    A bool, a float (``2.0`` too) or a string is a ``TypeError``; out of range a ``ValueError``.
    ``optional``: None is allowed and returned.
    """
    if n is None and optional:
        return None
    if not is_integer(n):
        none = " or None" if optional else ""
        raise TypeError(f"{name} must be an int{none}, got {_got(n)}")
    if n < minimum or (maximum is not None and n > maximum):
        want = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an int {want}, got {n}")
    if n > _INT64_MAX:       # no array has that many elements, no NumPy seed or index is that big
        raise ValueError(f"{name} must be an int that fits in int64 (<= 2**63 - 1), got {n}")
    return int(n)


def check_seed(seed, name: str = "seed") -> int:
    """A seed: an int >= 0 (NumPy refuses negative seeds), not a bool, not a float."""
    return check_count(seed, name, minimum=0)


def _interval(low, high, low_open: bool, high_open: bool) -> str:
    if low is None and high is None:
        return "a finite number"
    if high is None:
        return f"a finite number {'>' if low_open else '>='} {low}"
    if low is None:
        return f"a finite number {'<' if high_open else '<='} {high}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def check_number(x, name: str, *, low=None, high=None, low_open: bool = False,
                 high_open: bool = False, optional: bool = False) -> float | None:
    """``x`` as a finite float in the interval ``low .. high`` (each end open or closed).

    Rates: ``lr`` > 0 is ``check_number(lr, "lr", low=0, low_open=True)``; Adam's betas are
    ``low=0, high=1, high_open=True``. NaN and inf are a ``ValueError``, a bool or a string a
    ``TypeError``. ``optional``: None is allowed and returned.
    """
    if x is None and optional:
        return None
    want = _interval(low, high, low_open, high_open)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype != np.bool_:
        x = x[()]                                   # a 0-d array is its number (a loss, say)
    if not is_number(x):
        raise TypeError(f"{name} must be {want}, got {_got(x)}")
    value = float(x)
    bad = (not np.isfinite(value)
           or (low is not None and (value <= low if low_open else value < low))
           or (high is not None and (value >= high if high_open else value > high)))
    if bad:
        raise ValueError(f"{name} must be {want}, got {x!r}")
    return value


def check_probability(p, name: str, *, high_open: bool = False) -> float:
    """A probability in ``[0, 1]`` (``[0, 1)`` with ``high_open``: dropout, label smoothing)."""
    return check_number(p, name, low=0, high=1, high_open=high_open)


def check_callable(fn, name: str, *, optional: bool = False, what: str = "a callable",
                   arity: int | None = None):
    """``fn`` is callable (None too when ``optional``); ``what`` says which (``"a function with
    signature softmax(x)"``); ``arity``: it must take that many positional arguments
    (:func:`~attention_np.paper._validate.check_arity`)."""
    if fn is None and optional:
        return None
    if not callable(fn):
        none = " or None" if optional else ""
        raise TypeError(f"{name} must be {what}{none}, got {_got(fn)}")
    check_arity(fn, name, arity)
    return fn


def check_choice(value, name: str, choices) -> str:
    """``value`` is one of ``choices`` (strings: ``activation``, ``scoring``, ``task``)."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise (ValueError if isinstance(value, str) else TypeError)(
            f"{name} must be one of {list(choices)}, got {_got(value)}")
    return value


def check_str(value, name: str, *, optional: bool = False) -> str | None:
    """A string (a title, a label, a path given as text)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str{' or None' if optional else ''}, got {_got(value)}")
    return value


def check_path(value, name: str = "path", *, optional: bool = False):
    """A file-system path: a str or an ``os.PathLike`` (not empty)."""
    if value is None and optional:
        return None
    if not isinstance(value, (str, os.PathLike)) or value == "":
        raise TypeError(f"{name} must be a path (str or os.PathLike){' or None' if optional else ''}, "
                        f"got {_got(value)}")
    return value


def check_tuple(value, name: str, *, item=None, length: int | None = None,
                nonempty: bool = False, sequence: bool = False) -> tuple:
    """``value`` as a tuple (a list or range too when ``sequence``), each item checked by
    ``item(x, f"{name}[i]")`` when given; ``length`` items exactly, at least one when ``nonempty``."""
    kinds = (tuple, list, range) if sequence else (tuple,)
    if not isinstance(value, kinds):
        want = "a tuple, list or range" if sequence else "a tuple"
        raise TypeError(f"{name} must be {want}, got {_got(value)}")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must have {length} items, got {len(value)}")
    if nonempty and not value:
        raise ValueError(f"{name} must not be empty")
    if item is not None:
        value = tuple(item(x, f"{name}[{i}]") for i, x in enumerate(value))
    return tuple(value)


def check_instance(value, cls, name: str, *, optional: bool = False, maker: str = ""):
    """``value`` is a ``cls`` (``maker`` says where one comes from)."""
    if value is None and optional:
        return None
    if not isinstance(value, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        hint = f" ({maker})" if maker else ""
        article = "an" if names[0] in "AEIOUaeiou" else "a"
        raise TypeError(f"{name} must be {article} {names}{' or None' if optional else ''}{hint}, "
                        f"got {_got(value)}")
    return value


def check_keys(value, name: str, keys, *, maker: str = "") -> dict:
    """``value`` is a dict holding every key of ``keys`` (a result a function reads by key: a
    study's output, a run's record); a ``TypeError`` when it is no dict, else a ``ValueError``
    naming the missing keys and, with ``maker``, where such a dict comes from."""
    from_ = f" (as {maker} returns it)" if maker else ""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict{from_}, got {_got(value)}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise ValueError(f"{name} has no {missing}: expected a dict with the keys {list(keys)}{from_}, "
                         f"got one with {sorted(map(str, value))[:12]}")
    return value


def check_saved(files, path, keys, *, maker: str) -> None:
    """The arrays ``files`` of a saved file (an ``.npz``'s ``.files``) hold every key of ``keys``;
    else a ``ValueError`` naming ``path``: a file another function (or version) wrote."""
    missing = [k for k in keys if k not in files]
    if missing:
        more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        raise ValueError(f"path {str(path)!r} is not a file {maker} wrote: it has no {missing[:8]}{more} "
                         f"(it holds {sorted(files)[:8]})")


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """A floating dtype (``np.float32``, ``np.float64``, ``"float32"``); an integer, bool or
    complex dtype, or something that is no dtype at all, is a ``TypeError`` naming ``name``
    (an int dtype would round every weight to an integer)."""
    if isinstance(dtype, _BOOLS) or dtype is None:
        raise TypeError(f"{name} must be a floating dtype (np.float32 or np.float64), got {_got(dtype)}")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a floating dtype (np.float32 or np.float64), "
                        f"got {_got(dtype)}") from None
    if not np.issubdtype(dt, np.floating) or dt.itemsize < 2:
        raise TypeError(f"{name} must be a floating dtype (np.float32 or np.float64), got {dt}")
    return dt


#: kind -> (the dtype test, the array it names): the ``kind`` of :func:`check_array`
_ARRAY_KINDS = {
    "float": (lambda d: np.issubdtype(d, np.floating), "floating-point"),
    "int": (lambda d: np.issubdtype(d, np.integer), "integer"),
    "bool": (lambda d: d == np.bool_, "bool"),
    "bool or int": (lambda d: d == np.bool_ or np.issubdtype(d, np.integer), "bool or 0/1"),
    "number": (lambda d: np.issubdtype(d, np.floating) or np.issubdtype(d, np.integer),
               "numeric (int or float)"),
}


def check_array(x, name: str, *, kind: str = "float", ndim: int | None = None,
                min_ndim: int | None = None, shape: tuple | None = None, layout: str = "",
                finite: bool = False) -> np.ndarray:
    """``x`` as an ndarray of ``kind`` (``"float"``, ``"int"``, ``"bool"``, ``"bool or int"``,
    ``"number"``: int or float) with ``ndim`` dims exactly (or at least ``min_ndim``) or the
    exact ``shape`` (None in ``shape`` matches any size), laid out as ``layout`` (``"(B, L)"``).
    ``finite``: NaN and inf are refused too. Not copied (``np.asarray``)."""
    layout = f" {layout}" if layout else ""         # no "array , got" when there is none
    a = _as_array(x, name, layout)
    _check_kind(a, name, kind, layout)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dims{layout}, got shape {a.shape}")
    if min_ndim is not None and a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dims{layout}, got shape {a.shape}")
    if shape is not None:
        _check_shape(a, name, shape, layout)
    if finite and a.size and not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got NaN or inf")
    return a


def _as_array(x, name: str, layout: str) -> np.ndarray:
    """``np.asarray(x)``; no array at all (None, text, a dict, a function) is a ``TypeError``."""
    if x is None or isinstance(x, (str, bytes, dict)) or callable(x):
        raise TypeError(f"{name} must be an array{layout}, got {_got(x)}")
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise TypeError(f"{name} must be an array{layout}, got {_got(x)} ({e})") from None


def _check_kind(a: np.ndarray, name: str, kind: str, layout: str) -> None:
    ok, want = _ARRAY_KINDS[kind]
    if not ok(a.dtype):
        article = "an" if want[0] in "aeiou" else "a"
        raise TypeError(f"{name} must be {article} {want} array{layout}, got dtype "
                        f"{a.dtype}")


def _check_shape(a: np.ndarray, name: str, shape: tuple, layout: str) -> None:
    """``a.shape`` is ``shape``, where None matches any size."""
    if a.ndim == len(shape) and all(want is None or got == want
                                    for got, want in zip(a.shape, shape, strict=False)):
        return
    want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + (",)" if len(shape) == 1
                                                                       else ")")
    said = f"{layout.strip()} = {want}" if layout else want
    raise ValueError(f"{name} must have shape {said}, got {a.shape}")


def check_ids(ids, name: str, high: int, *, ndim: int | None = None, min_ndim: int | None = None,
              layout: str = "", what: str = "vocabulary") -> np.ndarray:
    """Token ids: an integer array with every value in ``[0, high)`` (``high`` = the size of
    the ``what`` they index); an id past the end is a ``ValueError`` naming ``name``, not
    NumPy's ``IndexError``."""
    a = check_array(ids, name, kind="int", ndim=ndim, min_ndim=min_ndim, layout=layout)
    if a.size and (a.min() < 0 or a.max() >= high):
        raise ValueError(f"{name} must be in [0, {high}) (the {what}), got values in "
                         f"[{a.min()}, {a.max()}]")
    return a


def check_params_shapes(params, expected: dict, *, name: str = "params", against: str = "config",
                        extra_ok: bool = False) -> np.dtype:
    """``params`` holds exactly the arrays ``expected`` names (``{key: shape}``), with those
    shapes and one floating dtype: a config that disagrees with its parameters is refused
    before any work, naming the first key that disagrees. Returns the params' dtype."""
    check_params_dict(params, name, maker="the matching init function")
    missing = [k for k in expected if k not in params]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise ValueError(f"{name} is missing {missing[:3]}{more}, which {against} expects")
    extra = [] if extra_ok else [k for k in params if k not in expected]
    if extra:
        more = f" (and {len(extra) - 3} more)" if len(extra) > 3 else ""
        raise ValueError(f"{name} has {extra[:3]}{more}, which {against} does not expect "
                         f"(params made for another config?)")
    for key, shape in expected.items():
        if params[key].shape != tuple(shape):
            raise ValueError(f"{name}[{key!r}] has shape {params[key].shape} but {against} "
                             f"expects {tuple(shape)}")
    dtypes = sorted({str(params[k].dtype) for k in expected})
    if len(dtypes) > 1:
        raise TypeError(f"the arrays of {name} must share one dtype, got {dtypes}")
    return params[next(iter(expected))].dtype if expected else np.dtype(np.float64)


def check_fields(obj, checks: dict) -> None:
    """Run ``checks[field](value, "Class.field")`` for each field of the dataclass ``obj``
    (a config's ``__post_init__``): every field of a config is checked when it is made."""
    cls = type(obj).__name__
    for field_name, check in checks.items():
        check(getattr(obj, field_name), f"{cls}.{field_name}")
