"""Diagnoses measured from the cases themselves: the smallest failing case shown at a glance, and
the behaviour that explains every failing case, named by what was measured.

NumPy only and no import of ``attention_np`` (the course build copies this file into the student
kit and the autograder, next to :mod:`engine`). Everything here is computed from a case's inputs,
its stored expected value and what the submission returned, so it works on any case set: the
shapes of the inputs say which axis has size 1, their dtypes which precision was asked for, a bool
input with a row of False is a mask with a fully masked row. Nothing here holds a solution.

- :func:`smallest` picks the failing case with the fewest input entries (as hypothesis shrinks: the
  kit cannot compute new expected values, so it shrinks over the stored cases);
- :func:`show` draws it: the inputs, then for a bool mask the expected and returned pictures side
  by side (rows of ``1`` and ``.``), for an array which indices of which axes differ and by what
  factor;
- :func:`measure` names the behaviour when one measured property explains every failing output (a
  constant factor and the size it equals, an axis permutation or reversal, a shift by one position,
  the complement of a mask, NaN or wrong values only on fully masked rows, values right but the
  dtype not kept) or when the failing cases are exactly those with one property (an axis of size
  1, float32 inputs, a mask with a fully masked row, ...). It says only what it measured.
"""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised, at_path, is_integer, leaves, named_leaves


def _permutations(items):
    items = list(items)
    if len(items) <= 1:
        yield tuple(items)
        return
    for i, x in enumerate(items):
        for rest in _permutations(items[:i] + items[i + 1:]):
            yield (x, *rest)


def _combinations(items, r):
    items = list(items)
    if r == 0:
        yield ()
        return
    for i, x in enumerate(items):
        for rest in _combinations(items[i + 1:], r - 1):
            yield (x, *rest)


def _index_grid(shape):
    """Every index tuple of ``shape``, in order."""
    return [tuple(int(i) for i in idx) for idx in np.ndindex(*shape)]

#: an (argument, axis) -> the paper's name of its size (used to name a measured factor)
PAPER_SIZES = {("q", -1): "d_k", ("q", -2): "L", ("k", -2): "S", ("v", -1): "d_v",
               ("k", -1): "d_k", ("query", -1): "d_model", ("query", -2): "L", ("key", -2): "S",
               ("dp", -1): "n", ("k_cache", -2): "t", ("k_cache", -1): "d_k"}


# ======================================================================== the smallest case
def entries(case) -> int:
    """The number of input entries of ``case`` (an array counts its entries, anything else 1)."""
    n = 0
    for v in (*case.args, *case.kwargs.values()):
        if isinstance(v, dict):
            n += sum(np.size(a) for a in v.values())
        elif isinstance(v, np.ndarray):
            n += v.size
        else:
            n += 1
    return n


def smallest(cases, results):
    """``(case, result)`` of the failing public case with the fewest input entries, then the
    fewest output entries (None when no public case fails: a hidden case is never shown)."""
    failing = [(entries(c), sum(np.size(v) for _, v in leaves(c.expected)), i)
               for i, (c, r) in enumerate(zip(cases, results, strict=False)) if not r.passed and not r.hidden]
    if not failing:
        return None
    i = min(failing)[2]
    return cases[i], results[i]


def _fmt_input(name, v):
    if isinstance(v, dict):
        return f"{name} = {{{', '.join(f'{k!r}: {_shape_words(a)}' for k, a in v.items())}}}"
    if isinstance(v, np.ndarray):
        if v.size <= 12 and v.ndim <= 2:
            if v.dtype == bool:
                body = np.array2string(v.astype(int), separator=", ").replace("\n", "")
                return f"{name} = {body} (bool, 1 = True)"
            body = np.array2string(v, precision=3, separator=", ", suppress_small=True).replace("\n", "")
            return f"{name} = {body}" + ("" if v.dtype == np.float64 else f" ({v.dtype})")
        return f"{name}: {_shape_words(v)}"
    return f"{name} = {v!r}"


def _shape_words(a):
    a = np.asarray(a)
    return f"{a.dtype} {tuple(a.shape)}"


def _picture(m):
    """Rows of ``1`` (True) and ``.`` (False) of a 2-D bool array."""
    return ["".join("1" if x else "." for x in row) for row in np.atleast_2d(m)]


def _side_by_side(e, o, limit=8):
    """The expected and returned bool arrays (last two axes; the first slices of the others)."""
    e2, o2 = np.asarray(e), np.asarray(o)
    lines = []
    lead = _index_grid(e2.shape[:-2])[:2] if e2.ndim > 2 else [()]
    for idx in lead:
        pe, po = _picture(e2[idx] if idx else e2), _picture(o2[idx] if idx else o2)
        if len(pe) > limit or len(pe[0]) > 3 * limit:
            continue
        w = max(len(pe[0]), len("expected"))
        head = f"[{', '.join(map(str, idx))}, :, :] " if idx else ""
        lines.append(f"{head}{'expected'.ljust(w)}   returned")
        lines += [f"{' ' * len(head)}{a.ljust(w)}   {b}" for a, b in zip(pe, po, strict=False)]
    return lines


def _where_differs(o, e):
    """Which indices of which axes hold the differences, as words ("" when every index does)."""
    bad = ~_close(o, e)
    parts = []
    for ax in range(bad.ndim):
        hit = np.flatnonzero(bad.any(axis=tuple(a for a in range(bad.ndim) if a != ax)))
        n = bad.shape[ax]
        if 0 < len(hit) < n:
            if len(hit) == 1 and hit[0] == n - 1:
                where = f"only the last index ({hit[0]})"
            elif len(hit) == 1 and hit[0] == 0:
                where = "only index 0"
            else:
                where = f"indices {hit.tolist()[:8]}"
            parts.append(f"axis {ax - bad.ndim} (size {n}): {where}")
    return "; ".join(parts)


def _close(o, e, rtol=1e-6, atol=1e-9):
    o, e = np.asarray(o, dtype=np.float64), np.asarray(e, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return (o == e) | (np.abs(o - e) <= atol + rtol * np.abs(e))


def _want_dtype(case, e):
    """The dtype an output must have: the case's for a float answer (a float32 case stores its
    answer in float64), the answer's own otherwise."""
    e = np.asarray(e)
    if np.issubdtype(e.dtype, np.floating) and getattr(case, "dtype", None):
        return np.dtype(case.dtype)
    return e.dtype


def _leaf_lines(name, o, e, want=None):
    e = np.asarray(e)
    want = e.dtype if want is None else want
    try:
        o = np.asarray(o)
    except Exception:           # noqa: BLE001
        return [f"{name}: returned {type(o).__name__}"]
    if e.dtype == bool:
        return _mask_lines(name, o, e)
    if not np.issubdtype(o.dtype, np.number) and o.dtype != bool:
        return [f"{name}: dtype {o.dtype}"]
    if o.shape != e.shape:
        return [f"{name}: shape {o.shape}, expected {e.shape}"]
    o64, e64 = o.astype(np.float64), e.astype(np.float64)
    f32 = np.float32 in (o.dtype, want)
    bad = ~_close(o64, e64, 1e-4 if f32 else 1e-9, 1e-4 if f32 else 1e-12)
    if not bad.any():
        return [f"{name}: right values" + (f", dtype {o.dtype} (expected {want})" if o.dtype != want
                                           else "")]
    lines = [f"{name} {o.shape}: {int(bad.sum())} of {e.size} entries differ" + _how_differs(o64, e64, bad)]
    if e.size <= 12 and e.ndim <= 2:
        lines += [f"  expected {np.array2string(e64, precision=4, separator=', ')}".replace("\n", ""),
                  f"  returned {np.array2string(o64, precision=4, separator=', ')}".replace("\n", "")]
    return lines


def _mask_lines(name, o, e):
    """A returned mask beside the expected one: how many entries differ, both pictures."""
    if o.shape != e.shape:
        return [f"{name}: shape {o.shape}, expected {e.shape}"]
    pic = _side_by_side(e, o) if e.ndim >= 2 else [f"expected {_picture(e)[0]}",
                                                    f"returned {_picture(o.astype(bool))[0]}"]
    return [f"{name} ({int((o != e).sum())} of {e.size} entries differ):"] + pic


def _how_differs(o, e, bad):
    """The words after "k of n entries differ": how many are NaN, where they are, and the factor
    or the largest difference there (float64 arrays ``o``, ``e``; ``bad`` marks the differences)."""
    words = ""
    nan = np.isnan(o) & ~np.isnan(e)
    if nan.any():
        words += f" ({int(nan.sum())} are NaN)"
    where = _where_differs(o, e)
    if where:
        words += f"; {where}"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = o[bad] / e[bad]
    if ratio.size and np.all(np.isfinite(ratio)) and np.allclose(ratio, ratio[0], rtol=1e-6):
        words += f"; there, returned = {ratio[0]:.4g} x expected"
    elif not nan.any():
        words += f"; by up to {float(np.max(np.abs(o - e)[bad])):.3g}"
    return words


def show(case, result, arg_names=None, output_names=None) -> str:
    """The smallest failing case drawn for a student: its inputs, then each output."""
    names = list(arg_names or []) + [f"argument {i + 1}" for i in range(len(arg_names or []),
                                                                        len(case.args))]
    ins = [_fmt_input(n, v) for n, v in zip(names, case.args, strict=False)]
    ins += [_fmt_input(k, v) for k, v in case.kwargs.items()]
    lines = [f"Smallest failing case ({case.label}): " + "; ".join(ins)]
    out = result.out
    if isinstance(out, Raised):
        lines.append(f"  it raised {out.text}")
        return "\n".join(lines)
    for name, path in named_leaves(case.expected, output_names or case.outputs):
        try:
            o = at_path(out, path) if path else out
        except (KeyError, IndexError, TypeError):
            lines.append(f"  {name}: missing")
            continue
        if isinstance(o, (tuple, list, dict)) and not isinstance(at_path(case.expected, path), (tuple, list)):
            lines.append(f"  {name}: returned a {type(o).__name__}")
            continue
        e = at_path(case.expected, path)
        lines += [f"  {x}" for x in _leaf_lines(name, o, e, _want_dtype(case, e))]
    return "\n".join(lines)


# ======================================================================== measured behaviours
def _arrays(case, arg_names):
    names = list(arg_names or []) + [f"argument {i + 1}" for i in range(len(arg_names or []),
                                                                        len(case.args))]
    return list(zip(names, case.args, strict=False)) + list(case.kwargs.items())


def _masks(case):
    return [v for v in (*case.args, *case.kwargs.values())
            if isinstance(v, np.ndarray) and v.dtype == bool and v.ndim >= 1]


def _full_rows(case, shape):
    """A bool array of ``shape[:-1]``: the rows whose mask allows no key (None without a mask)."""
    ms = _masks(case)
    if len(ms) != 1 or ms[0].ndim < 2:
        return None
    full = ~ms[0].any(-1)
    try:
        return np.broadcast_to(full, shape[:-1])
    except ValueError:
        return None


def _factors(case, arg_names):
    """``(value, words)`` sizes a measured factor may equal: each array's last two axis sizes and
    each integer argument, their square roots and inverses."""
    out = []
    for name, v in _arrays(case, arg_names):
        if isinstance(v, np.ndarray) and v.dtype != bool:
            for ax in (-1, -2):
                if v.ndim >= -ax and v.shape[ax] > 1:
                    size = PAPER_SIZES.get((name, ax), f"{name}.shape[{ax}]")
                    out.append((v.shape[ax], size))
        elif is_integer(v) and v > 1:
            out.append((int(v), name))
    words = []
    for n, w in out:
        words += [(float(n), w), (float(np.sqrt(n)), f"sqrt({w})"), (1 / n, f"1/{w}"), (1 / float(np.sqrt(n)),
                                                                                   f"1/sqrt({w})")]
    return words


def _leaf_kind(o, e, case, arg_names):
    """What one wrong output does, measured: ``(key, words)``; ``key`` is equal for two cases when
    the same property explains both (a factor by the size it equals, an axis by its position)."""
    e = np.asarray(e)
    try:
        o = np.asarray(o)
    except Exception:           # noqa: BLE001
        return ("not an array",), "is not an array"
    if e.dtype == bool:
        return _mask_kind(o, e)
    if not np.issubdtype(o.dtype, np.number):
        return ("dtype", str(o.dtype)), f"has dtype {o.dtype}"
    o64, e64 = o.astype(np.float64), e.astype(np.float64)
    if o.shape != e.shape:
        return _shape_kind(o64, e64)
    want = _want_dtype(case, e)
    tight = 1e-4 if np.float32 in (o.dtype, want) else 1e-9
    loose = o.dtype != want and np.all(_close(o64, e64, 1e-4, 1e-4))
    if np.all(_close(o64, e64, tight, tight * 1e-3)) or loose:
        if o.dtype != want:
            return ("dtype", str(o.dtype), str(want)), (f"has the right values but dtype {o.dtype} "
                                                        f"for a {want} answer")
        return ("right",), "is right"
    tol = (1e-4, 1e-5) if np.float32 in (o.dtype, want) else (1e-6, 1e-9)
    return (_value_kind(o64, e64, case, arg_names, want, tol) or _axis_kind(o64, e64, tol)
            or _where_kind(o64, e64, tol))


def _value_kind(o, e, case, arg_names, want, tol):
    """NaN, inf, float32 precision, a sign or a constant factor, or wrong only on the fully
    masked rows (None when none of these)."""
    nan = np.isnan(o) & ~np.isnan(e)
    found = _full_rows_kind(o, e, case, nan, tol)
    if found is not None:
        return found
    if nan.any():
        return ("nan",), f"has NaN at {int(nan.sum())} of {e.size} entries"
    if want == np.float64 and np.all(_close(o, e, 1e-5, 1e-6)):
        err = float(np.max(np.abs(o - e) / (np.abs(e) + 1e-6)))
        return ("precision",), (f"agrees with the answer only to about {err:.1g} (relative): float32 "
                                "precision in a float64 result")
    inf = np.isinf(o) & np.isfinite(e)
    if inf.any():
        return ("inf",), f"has inf at {int(inf.sum())} of {e.size} entries"
    if np.all(_close(o, -e, *tol)):
        return ("sign",), "has the wrong sign"
    return _scale_kind(o, e, case, arg_names, tol)


def _full_rows_kind(o, e, case, nan, tol):
    """Wrong (NaN or other values) only on the rows the case's mask fully masks, or None."""
    full = _full_rows(case, e.shape)
    bad = ~_close(o, e, *tol)
    if full is None or not full.any() or not bad.any():
        return None
    if not np.all(bad <= np.broadcast_to(full[..., None], e.shape)):
        return None
    what = "NaN" if np.all(nan[bad]) else "wrong values"
    return ("full_rows", what), f"is right except on the fully masked rows, where it has {what}"


def _scale_kind(o, e, case, arg_names, tol):
    """``o`` is ``c`` times ``e`` for one constant ``c`` other than 1 (and the sizes ``c`` equals),
    or None."""
    ee = float((e * e).sum())
    c = float((o * e).sum() / ee) if ee > 0 else 0.0
    if c != 0 and abs(c - 1) > 1e-5 and np.all(_close(o, c * e, *tol)):
        named = frozenset(w for v, w in _factors(case, arg_names) if abs(c - v) <= tol[0] * abs(v))
        return ("scale", named or round(c, 6)), c
    return None


def _axis_kind(o, e, tol):
    """The answer transposed, reversed, rotated or shifted by one along an axis (or None): the first
    of :func:`_axis_moves` that turns ``o`` into ``e``."""
    return next(((key, words) for key, words, undoes in _axis_moves(o, e, tol) if undoes()), None)


def _axis_moves(o, e, tol):
    """``(key, words, undoes)`` for each move along an axis, in the order they are tried:
    ``undoes()`` says whether moving ``o`` back gives ``e``."""
    def close(x):
        return bool(np.all(_close(x, e, *tol)))
    axes = range(-1, -o.ndim - 1, -1)
    if o.ndim >= 2 and o.shape[-1] == o.shape[-2]:
        yield (("permuted", "last two"), "is the transpose of the answer (its last two axes swapped)",
               lambda: close(np.swapaxes(o, -1, -2)))
    for ax in (ax for ax in axes if o.shape[ax] > 1):
        yield ("flip", ax), f"is the answer reversed along axis {ax}", lambda ax=ax: close(np.flip(o, ax))
    for ax, s in ((ax, s) for ax in axes for s in (1, -1) if o.shape[ax] > 2):
        yield (("roll", ax), (f"is the answer with its entries along axis {ax} rotated by one "
                              "(the first moved to the end, or the last to the front)"),
               lambda ax=ax, s=s: close(np.roll(o, s, ax)))
    for ax, s in ((ax, s) for ax in axes for s in (1, -1)):
        yield (("shift", ax, s), (f"is the answer shifted by one position along axis {ax} "
                                  f"({'towards the end' if s == 1 else 'towards the start'})"),
               lambda ax=ax, s=s: _shifted(o, e, ax, s, *tol))


def _where_kind(o, e, tol):
    """Wrong only at the first or last index of an axis: ``("ends", {(axis, "first"/"last")},
    {axes of size 1})``; an axis of size 1 holds every wrong entry (its one index is its first and
    its last), so it counts for either end when the cases are compared. Else wrong values."""
    bad = ~_close(o, e, *tol)
    ends = set()
    for ax in range(-1, -o.ndim - 1, -1):
        n = o.shape[ax]
        hit = np.flatnonzero(bad.any(axis=tuple(a for a in range(o.ndim) if a != o.ndim + ax)))
        if n > 1 and len(hit) == 1 and hit[0] in (0, n - 1):
            ends.add((ax, "last" if hit[0] == n - 1 else "first"))
    ones = frozenset(ax for ax in range(-1, -o.ndim - 1, -1) if o.shape[ax] == 1)
    if ends:
        return ("ends", frozenset(ends), ones), _ends_words(ends)
    return ("values", frozenset(), ones), "has wrong values"


def _ends_words(ends):
    ax, end = sorted(ends)[0]
    return f"is right except at the {end} index of axis {ax}"


def _shifted(o, e, ax, s, rtol=1e-6, atol=1e-9):
    """``o`` equals ``e`` moved by ``s`` positions along ``ax`` (compared where both are defined),
    and differs from ``e``."""
    n = o.shape[ax]
    if n < 3:
        return False
    a = np.take(o, range(s, n) if s > 0 else range(0, n + s), ax)
    b = np.take(e, range(0, n - s) if s > 0 else range(-s, n), ax)
    return bool(np.all(_close(a, b, rtol, atol)))


def _shape_kind(o, e):
    if o.size == e.size and o.ndim == e.ndim and o.ndim <= 5:
        for perm in _permutations(range(o.ndim)):
            if perm != tuple(range(o.ndim)) and o.transpose(perm).shape == e.shape and np.all(
                    _close(o.transpose(perm), e)):
                axes = ", ".join(str(p - o.ndim) for p in perm)
                if perm == (*range(o.ndim - 2), o.ndim - 1, o.ndim - 2):
                    return ("permuted", "last two"), (f"is the transpose of the answer (shape {o.shape}, "
                                                      f"expected {e.shape})")
                return ("permuted", perm), (f"has shape {o.shape}: its axes, taken in the order "
                                            f"({axes}), give the answer {e.shape}")
    if o.size == e.size and np.all(_close(o.reshape(e.shape), e)):
        return ("reshaped", o.shape), (f"has shape {o.shape}, expected {e.shape}; the values are right "
                                       "in memory order (an axis of size 1 added, dropped or moved)")
    return ("shape", o.ndim - e.ndim), f"has shape {o.shape}, expected {e.shape}"


def _mask_kind(o, e):
    if o.dtype != bool:
        if o.shape == e.shape and np.issubdtype(o.dtype, np.number) and np.array_equal(o != 0, e):
            return ("dtype", str(o.dtype), "bool"), f"has the right entries as {o.dtype}, not bool"
        return ("dtype", str(o.dtype), "bool"), f"has dtype {o.dtype}, not bool"
    if o.shape != e.shape:
        return _shape_kind(o.astype(float), e.astype(float))
    return _mask_moved(o, e) or _mask_counted(o, e)


def _mask_moved(o, e):
    """The answer's complement, reversed along an axis, or moved one key (or None)."""
    if np.array_equal(o, ~e):
        return ("complement",), "is the complement of the answer (True and False swapped)"
    for ax in range(-1, -o.ndim - 1, -1):
        if o.shape[ax] > 1 and np.array_equal(np.flip(o, ax), e):
            return ("flip", ax), f"is the answer reversed along axis {ax}"
    for s in (1, -1):
        if _shifted(o.astype(float), e.astype(float), -1, s):
            return ("shift", -1, s), (f"is the answer moved one key to the {'right' if s == 1 else 'left'} "
                                      f"(every row's boundary off by one)")
    return None


def _mask_counted(o, e):
    """Which entries a wrong mask of the right shape gets wrong: True on every blocked entry, the
    transpose, only extra or only missing Trues, or both."""
    extra, missing = int((o & ~e).sum()), int((~o & e).sum())
    if (~e).any() and np.all(o[~e]) and missing:
        return ("blocked_true",), (f"is True at every entry the answer blocks (False), and at only "
                                   f"{int((o & e).sum())} of the {int(e.sum())} entries it allows")
    if o.ndim >= 2 and o.shape[-1] == o.shape[-2] and np.array_equal(np.swapaxes(o, -1, -2), e):
        return ("transposed",), "is the transpose of the answer"
    if missing == 0:
        return ("extra",), f"is True at {extra} entries where the answer is False (and nowhere less)"
    if extra == 0:
        return ("fewer",), f"is False at {missing} entries where the answer is True (and nowhere more)"
    return ("values",), (f"is True at {extra} entries where the answer is False, False at {missing} "
                         "where it is True")


_NAMES = {
    "complement": ("mask polarity flipped", "True and False are swapped everywhere: True means may attend."),
    "blocked_true": ("True on the blocked entries (polarity flipped)", "True means may attend: "
                     "the entries your mask sets True are the ones the contract blocks."),
    "flip": ("reversed along an axis", "Compare the first and last entries of that axis with the "
             "contract: which end comes first?"),
    "shift": ("off by one position", "Count, for one row, which positions it should cover: the "
              "boundary (a < or <=, a +1 or -1) is one too far."),
    "transposed": ("transposed", "An array has the shape (and axis order) of what it stands for: the "
                   "gradient of W (d_in, d_out) is (d_in, d_out); a mask's rows are the queries."),
    "permuted": ("axes in the wrong order", "Print the shapes: the contract names each axis; move or "
                 "swap the axes so they come in its order."),
    "reshaped": ("the right values in the wrong shape", "Compare your shape with the contract's: an "
                 "axis of size 1 is added, dropped or in the wrong place."),
    "sign": ("wrong sign", "Check the sign of each term against the derivation."),
    "full_rows": ("wrong on fully masked rows", "A query whose mask allows no key has no weights: the "
                  "contract says its output is 0 (no NaN, no uniform average)."),
    "only_end": ("wrong only at one end of an axis", "Every index but one end of that axis is right: "
                 "check a range's end (range(n - 1), [:-1], [1:]) and the first or last step."),
    "shape": ("wrong shape", "Print the shape of each output and compare it with the contract's."),
    "precision": ("float32 precision in a float64 result", "Part of the computation runs in float32 "
                  "(an .astype(np.float32), a dtype=np.float32 array, a float32 constant): keep every "
                  "step in the input's dtype."),
    "roll": ("entries rotated by one along an axis", "One entry sits at the wrong end: check the order "
             "of a concatenate (what comes first) or an index that wraps around."),
    "inf": ("inf in the output", "inf comes from a division by 0 or an exp of a large number: "
            "print the sums you divide by and the largest exponent."),
    "nan": ("NaN in the output", "NaN comes from inf - inf, 0 * inf or 0 / 0: an exp of a large "
            "number, or a division by a sum that is 0."),
    "dtype": ("dtype not kept", "Return the dtype the contract asks for: a float32 input gives a float32 "
              "output, a float64 input a float64 output; bool masks are bool."),
}


def _scale_words(key, c):
    named = key[1]
    if isinstance(named, frozenset):
        return f"{c:.4g} = {' = '.join(sorted(named))} times the answer"
    return f"{c:.4g} times the answer"


def _leaf_report(cases, results, arg_names, names):
    """``{output name: [(key, words) per failing case]}`` of the wrong outputs."""
    per = {}
    for case, r in zip(cases, results, strict=False):
        if r.passed or isinstance(r.out, Raised) or r.written:
            continue
        for (name, path), (_, ok) in zip(named_leaves(case.expected, names or case.outputs),
                                             r.parts or [(None, False)], strict=False):
            if ok and r.parts:
                continue
            try:
                o = at_path(r.out, path) if path else r.out
            except (KeyError, IndexError, TypeError):
                per.setdefault(name, []).append((("missing",), "is missing"))
                continue
            per.setdefault(name, []).append(_leaf_kind(o, at_path(case.expected, path), case, arg_names))
    return per


def _consistent(kinds):
    """The key shared by every failing case's kind (a scale: the sizes it equals in every case)."""
    keys = [k for k, _ in kinds]
    if keys[0][0] == "scale":
        return _consistent_scale(kinds)
    if any(k[0] == "ends" for k in keys) and all(k[0] in ("ends", "values") for k in keys):
        return _consistent_end(keys)
    return keys[0] if all(k == keys[0] for k in keys) else None


def _consistent_scale(kinds):
    """One factor on every failing case: the sizes it equals in each (when some size is common to
    all), else the factor itself when it is the same everywhere; None otherwise."""
    keys = [k for k, _ in kinds]
    if not all(k[0] == "scale" for k in keys):
        return None
    named = [k[1] for k in keys]
    if all(isinstance(n, frozenset) for n in named):
        common = frozenset.intersection(*named)
        if common:
            return ("scale", common)
    cs = [c for _, c in kinds]
    return ("scale", round(cs[0], 4)) if np.allclose(cs, cs[0], rtol=1e-4) else None


def _consistent_end(keys):
    """``("only_end", axis, "first"/"last")`` when one end of one axis holds every wrong entry of
    every case (an axis of size 1 counts for either end), else None."""
    def candidates(k):
        return set(k[1]) | {(ax, end) for ax in k[2] for end in ("first", "last")}
    common = set.intersection(*(candidates(k) for k in keys))
    real = common & {e for k in keys for e in k[1]}
    if real:
        return ("only_end", *sorted(real)[0])
    return None


# ---------------------------------------------------------------- which cases fail
def _features(case, arg_names):
    """``{words: True/False}``: properties of one case's inputs, read from their shapes, dtypes and
    values (which axis has size 1, float32, a mask with a fully masked row, ...)."""
    f, floats = {}, []
    arguments = _arrays(case, arg_names)
    for name, v in arguments:
        floats += _argument_features(name, v, f)
    if floats:
        f["the inputs are float32"] = all(a.dtype == np.float32 for a in floats)
    _pair_features(arguments, f)
    _head_width_feature(dict(arguments), f)
    return f


def _head_width_feature(args, f):
    """Multi-head inputs (params and num_heads): whether a head is not d_model // num_heads wide."""
    p, h = args.get("params"), args.get("num_heads")
    if isinstance(p, dict) and is_integer(h) and h > 0 and {"W_q", "W_v"} <= set(p):
        d = h * (p["W_q"].shape[0] // h)
        f["the heads are not d_model // num_heads wide"] = p["W_q"].shape[1] != d or p["W_v"].shape[1] != d


def _argument_features(name, v, f) -> list:
    """Add the properties of one argument to ``f``; returns its float arrays (a dict's arrays)."""
    if isinstance(v, dict):
        _dict_features(name, v, f)
        return [a for a in v.values() if isinstance(a, np.ndarray)]
    if isinstance(v, np.ndarray):
        _array_features(name, v, f)
        return [v] if np.issubdtype(v.dtype, np.floating) else []
    if isinstance(v, str):
        f[f"{name} = {v!r}"] = True
    elif is_integer(v):
        f[f"{name} = 1"] = v == 1
    elif v is None:
        f[f"{name} is None"] = True
    return []


def _pair_features(arguments, f):
    """Add to ``f`` how the integer arguments compare, and whether the first two arrays (not masks)
    differ in their second-to-last size or in their number of axes."""
    ints = [(n, v) for n, v in arguments if is_integer(v)]
    for (a, x), (b, y) in _combinations(ints, 2):
        f[f"{a} > {b}"], f[f"{a} < {b}"] = x > y, x < y
    for (a, x), (b, y) in ((a, b) for a in arguments for b in ints if isinstance(a[1], np.ndarray)
                           and np.issubdtype(a[1].dtype, np.integer)):
        f[f"an entry of {a} equals {b}"] = bool((x == y).any())      # a length equal to S
    arrs = [(n, v) for n, v in arguments if isinstance(v, np.ndarray) and v.dtype != bool]
    if len(arrs) >= 2 and all(v.ndim >= 2 for _, v in arrs[:2]):
        (a, x), (b, y) = arrs[:2]
        f[f"{a}.shape[-2] != {b}.shape[-2]"] = x.shape[-2] != y.shape[-2]
        f[f"{a} and {b} have different numbers of axes"] = x.ndim != y.ndim


def _dict_features(name, v, f):
    """A dict of weights: which are not square, which pairs differ in width."""
    mats = [(k, a) for k, a in v.items() if isinstance(a, np.ndarray) and a.ndim == 2]
    for k, a in mats:
        f[f"{name}[{k!r}] is not square"] = a.shape[0] != a.shape[1]
    for (k, a), (j, b) in _combinations(mats, 2):
        f[f"{name}[{k!r}] and {name}[{j!r}] differ in width"] = a.shape[1] != b.shape[1]


def _array_features(name, v, f):
    """An array: a mask's fully masked rows; the axes of size 1 or 0, large or -inf entries."""
    if v.dtype == bool:
        f["a mask is given"] = True
        if v.ndim >= 2:
            f["the mask has a fully masked row"] = bool((~v.any(-1)).any())
        return
    if np.issubdtype(v.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            fin = np.abs(v[np.isfinite(v)])
        f[f"{name} has entries above 100 in size"] = bool(fin.size and fin.max() > 100)
        f[f"{name} has -inf entries"] = bool(np.isneginf(v).any())
    f[f"{name} has {v.ndim} axes"] = True
    for ax in range(v.ndim):
        if v.shape[ax] == 1:
            f[f"axis {ax - v.ndim} of {name} has size 1"] = True
    for n in range(1, v.ndim + 1):
        f[f"{name} has at least {n} axes of size 1"] = sum(s == 1 for s in v.shape) >= n
    f[f"{name} has an axis of size 0"] = 0 in v.shape
    if v.ndim and np.issubdtype(v.dtype, np.integer):
        f[f"{name} holds a 0"] = bool((v == 0).any())


def separating(cases, marks, arg_names):
    """The case properties true on exactly the marked cases (e.g. the failing ones); [] when fewer
    than two cases are unmarked or none separates."""
    fails = [bool(m) for m in marks]
    if sum(not f for f in fails) < 2 or not any(fails):
        return []                       # a property of one passing case would be a coincidence
    feats = [_features(c, arg_names) for c in cases]
    words = sorted({w for f in feats for w in f})
    found = [w for w in words if [bool(f.get(w, False)) for f in feats] == fails]
    return found or _any_weight_not_square(words, feats, fails) or _either_size_one(words, feats, fails)


def _either_size_one(words, feats, fails):
    """The failing cases are those with an axis of size 1 in one of two places, when no single
    property separates them."""
    ones = [w for w in words if w.endswith(("size 1", "= 1"))]     # an axis of size 1 somewhere
    return [f"{a}, or {b}" for a, b in _combinations(ones, 2)
            if [bool(f.get(a, False) or f.get(b, False)) for f in feats] == fails]


def _any_weight_not_square(words, feats, fails):
    """The failing cases are those where SOME weight of a dict is not square (the heads are not
    d_model / num_heads wide: W_q on some cases, W_v on others), when no single weight separates."""
    found = []
    for name in sorted({w.split("[")[0] for w in words if w.endswith("] is not square")}):
        its = [w for w in words if w.startswith(f"{name}[") and w.endswith("] is not square")]
        if [any(f.get(w, False) for w in its) for f in feats] == fails:
            found.append(f"a weight of {name} is not square (its heads are not d_model / num_heads wide)")
    return found


_ONLY_HINT = ("Every other case passes: run the smallest failing case and compare it with a passing "
              "one; the property above is what your code does not handle.")


def _raise_words(results):
    errs = sorted({r.out.type for r in results if not r.passed and isinstance(r.out, Raised)})
    return ", ".join(errs)


# ---------------------------------------------------------------- the verdict's measurement
def measure(cases, results, arg_names=None, output_names=None):
    """``(finding or None, sentences)``: a :class:`Finding` when one measured property explains
    every failing case, and in any case the sentences that say what was measured."""
    fails = [r for r in results if not r.passed]
    where = separating(cases, [not r.passed for r in results], arg_names)
    only = (f"the failing cases are exactly those where {' (equally: where '.join(where[:2])}"
            + (")" if len(where) > 1 else "")) if where else ""
    raised = [r for r in fails if isinstance(r.out, Raised)]
    if raised and len(raised) == len(fails):
        return _when_every_failure_raises(fails, where, only)
    per = _leaf_report(cases, results, arg_names, output_names)
    if raised:
        said = _partly_raised(cases, results, arg_names, per)
        if only:
            return Finding(f"wrong only when {where[0]}", "; ".join(said + [only]), _ONLY_HINT), said + [only]
        return None, said
    return _when_outputs_are_wrong(cases, per, where, only)


def _when_every_failure_raises(fails, where, only):
    """Every failing case raised: named by the property that separates them, if one does."""
    what = f"it raises {_raise_words(fails)} ({fails[0].out.text[:160]})"
    if only:
        return Finding(f"raises an error when {where[0]}", f"{what}; {only}",
                       "Run the smallest failing case yourself and read the traceback: the "
                       "property above is what your code does not handle."), [what, only]
    return None, [what]


def _when_outputs_are_wrong(cases, per, where, only):
    """No failing case raised: named when every wrong output has a name (:func:`_output_words`),
    or by the property that separates the failing cases."""
    sentences, names, hints = [], [], []
    for name, kinds in per.items():
        said, named, hint = _output_words(name, kinds)
        sentences.append(said)
        names.append(named)
        hints += [hint] if hint else []
    if only:
        sentences.append(only)
    if names and all(names):
        name = _joined_name(list(per), names, isinstance(cases[0].expected, (tuple, list)))
        if where:
            name += f", only when {where[0]}"
        return Finding(name, "; ".join(sentences), " ".join(dict.fromkeys(hints))), sentences
    if only:
        return Finding(f"wrong only when {where[0]}", "; ".join(sentences), _ONLY_HINT), sentences
    return None, sentences


def _partly_raised(cases, results, arg_names, per):
    """Sentences for failing cases of which some raised: which (and where), and what the others do."""
    fails = [r for r in results if not r.passed]
    raised = [r for r in fails if isinstance(r.out, Raised)]
    at = separating(cases, [isinstance(r.out, Raised) for r in results], arg_names)
    said = [f"{len(raised)} of {len(fails)} failing cases raise {_raise_words(fails)}"
            + (f", exactly those where {at[0]}" if at else "")]
    for name, kinds in per.items():
        words = list(dict.fromkeys(k[1] for k in kinds if isinstance(k[1], str)))
        if words:
            said.append(f"on the others {name} " + "; on another case ".join(words[:2]))
    return said


def _output_words(name, kinds):
    """``(sentence, name or None, hint or None)`` of one output over the failing cases."""
    key = _consistent(kinds)
    if key is None:
        said = list(dict.fromkeys(k[1] if isinstance(k[1], str) else "is " + _scale_words(k[0], k[1])
                                  for k in kinds))
        return f"{name} " + "; on another case ".join(said[:2]) + ("; ..." if len(said) > 2 else ""), \
            None, None
    if key[0] == "scale":
        return (f"{name} is " + _scale_words(key, kinds[0][1]) + " on every failing case",
                "off by a constant factor" + (f" ({' = '.join(sorted(key[1]))})"
                                              if isinstance(key[1], frozenset) else ""),
                "A constant factor is a scale applied once too often or not at all: look for "
                "1/sqrt(d_k), a mean instead of a sum, or a size used in place of another.")
    if key == ("permuted", "last two"):
        key = ("transposed",)
    named, hint = _NAMES.get(key[0], (None, None))
    words = _ends_words({key[1:]}) if key[0] == "only_end" else kinds[0][1]
    return f"{name} {words} on every failing case", named, hint


def _joined_name(outputs, names, several):
    """One name for the wrong outputs: 'dq, dk off by ...', 'wrong shape (v_cache)', or per output."""
    uniq = list(dict.fromkeys(names))
    if not several:
        return f"output {uniq[0]}" if uniq[0].startswith("off by") else uniq[0]
    if len(uniq) == 1:
        return f"{', '.join(outputs)} {uniq[0]}" if uniq[0].startswith("off by") else \
            f"{uniq[0]} ({', '.join(outputs)})"
    return "; ".join(f"{n} {m}" if m.startswith("off by") else f"{n}: {m}"
                     for n, m in zip(outputs, names, strict=True))
