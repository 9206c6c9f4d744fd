"""The checking engine: run a student's function on stored cases and say what is wrong.

NumPy and the standard library only, and no import of ``attention_np``: the course build copies
this file (with :mod:`probes`) into the student kit and the autograder. The cases and their
expected values come from a *bank* (built from the library's references by
:mod:`attention_np.exercises.bank`, stored as JSON + .npz in the kits).

Each call gets fresh copies of its inputs while the engine keeps a second copy; after the call
the two are compared, so a function that writes into an input is caught (nothing hides it).

Every message begins with ``PASSED``, ``MISTAKE:`` (what is wrong, then a hint that teaches) or
``FAILED:`` (when nothing more specific can be said). Two raised errors are never "the same
result", and NaN never equals NaN.

Tolerances: float64 outputs agree with the float64 expected value to ``1e-9`` relative plus
``1e-12`` absolute. float32 outputs must be float32; their expected value is computed in float64
from the same float32 inputs, and they must agree within ``1e-4 * (1 + |expected|)`` (a float32
computation done in either precision passes; a wrong formula is off by far more). A case may
set its own tolerance (the gradchecks compare with central differences).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

F64_TOL = (1e-9, 1e-12)
F32_TOL = (1e-4, 1e-4)


class Raised:
    """A call that raised: never equal to anything, another Raised included."""

    def __init__(self, exc: BaseException):
        self.text = f"{type(exc).__name__}: {exc}"
        self.type = type(exc).__name__

    def __repr__(self):
        return f"Raised({self.text})"


class NotImplementedYet(Exception):
    """The stub still raises NotImplementedError."""


class TimeLimit(BaseException):
    """Raised inside a call by the autograder's alarm (a BaseException: ``except Exception`` in a
    student's code does not swallow it)."""


# ---------------------------------------------------------------- copies and calls
def copy_tree(x, memo=None):
    """A deep copy of arrays, tuples, lists and dicts (everything else is shared). An array
    that appears twice (self-attention: query is key is value) is one array in the copy too."""
    memo = {} if memo is None else memo
    if isinstance(x, np.ndarray):
        if id(x) not in memo:
            memo[id(x)] = x.copy()
        return memo[id(x)]
    if isinstance(x, dict):
        return {k: copy_tree(v, memo) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(copy_tree(v, memo) for v in x)
    return x


def _written(given, kept, name):
    """Names of the arrays in ``given`` that no longer equal ``kept``."""
    if isinstance(kept, np.ndarray):
        g = np.asarray(given)
        if g.shape != kept.shape or g.dtype != kept.dtype or not np.array_equal(g, kept, equal_nan=True):
            return [name]
        return []
    if isinstance(kept, dict):
        return [w for k in kept for w in _written(given.get(k) if isinstance(given, dict) else None,
                                                    kept[k], f"{name}[{k!r}]")]
    if isinstance(kept, (list, tuple)):
        if not isinstance(given, (list, tuple)) or len(given) != len(kept):
            return [name]
        return [w for i, (g, k) in enumerate(zip(given, kept, strict=True))
                for w in _written(g, k, f"{name}[{i}]")]
    return []


@dataclass
class Call:
    """What one call did: ``out`` (or a :class:`Raised`) and the inputs it wrote into."""

    out: object
    written: list


def call(fn, args, kwargs=None, names=None) -> Call:
    """``fn(*args, **kwargs)`` on fresh copies; reports the arguments it wrote into."""
    kwargs = kwargs or {}
    given_a, given_k = copy_tree((tuple(args), dict(kwargs)))
    kept_a, kept_k = copy_tree((tuple(args), dict(kwargs)))
    try:
        with np.errstate(all="ignore"):     # overflow in a wrong answer is reported, not warned
            out = fn(*given_a, **given_k)
    except NotImplementedError as e:
        raise NotImplementedYet(str(e)) from None
    except TimeLimit:
        raise
    except RecursionError as e:
        out = Raised(e)
    except Exception as e:          # noqa: BLE001 - a student's error is a result to report
        out = Raised(e)
    names = list(names or []) + [f"argument {i + 1}" for i in range(len(names or []), len(args))]
    written = [w for i, (g, k) in enumerate(zip(given_a, kept_a, strict=True))
               for w in _written(g, k, names[i])]
    written += [w for key in kept_k for w in _written(given_k[key], kept_k[key], key)]
    return Call(out, written)


# ---------------------------------------------------------------- comparing
def leaves(x, prefix="output"):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from leaves(x[k], f"{prefix}[{k!r}]")
    elif isinstance(x, (tuple, list)):
        for i, item in enumerate(x):
            yield from leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, x


def _shape_of(x):
    if isinstance(x, dict):
        return ("dict", tuple(sorted(x)))
    if isinstance(x, (tuple, list)):
        return ("sequence", len(x))
    return "array"


def compare(out, expected, dtype="float64", tol=None):
    """None when ``out`` matches ``expected``; otherwise a sentence saying how it differs."""
    if isinstance(out, Raised):
        return f"raised {out.text}"
    so, se = _shape_of(out), _shape_of(expected)
    if so != se:
        if se == "array":
            return f"returned a {type(out).__name__}, expected one array"
        if se[0] == "dict":
            return f"returned {type(out).__name__}, expected a dict with keys {list(se[1])}"
        if so == "array" or so[0] != "sequence":
            return f"returned {type(out).__name__}, expected a tuple of {se[1]}"
        return f"returned {so[1]} items, expected {se[1]}"
    for (name, o), (_, e) in zip(leaves(out), leaves(expected), strict=False):
        e = np.asarray(e)
        try:
            o = np.asarray(o)
        except Exception:           # noqa: BLE001
            return f"{name} is not an array"
        if o.shape != e.shape:
            return f"{name} has shape {o.shape}, expected {e.shape}"
        if e.dtype == bool:
            if o.dtype != bool:
                return f"{name} has dtype {o.dtype}, expected a bool mask"
            if not np.array_equal(o, e):
                return f"{name} differs at {int((o != e).sum())} of {e.size} entries"
            continue
        if not np.issubdtype(o.dtype, np.number):
            return f"{name} has dtype {o.dtype}, expected numbers"
        if dtype is None:               # values only (to tell whether a mistake is visible)
            dtype = "float64" if o.dtype == np.float64 else "float32"
        elif np.issubdtype(e.dtype, np.floating) and o.dtype != np.dtype(dtype):
            return f"{name} has dtype {o.dtype}, expected {np.dtype(dtype)} (keep the input's dtype)"
        o64, e64 = o.astype(np.float64), e.astype(np.float64)
        if np.isnan(o64).any():
            return f"{name} has NaN at {int(np.isnan(o64).sum())} of {o.size} entries"
        rtol, atol = tol or (F64_TOL if np.dtype(dtype) == np.float64 else F32_TOL)
        with np.errstate(invalid="ignore", over="ignore"):
            bad = ~((o64 == e64) | (np.abs(o64 - e64) <= atol + rtol * np.abs(e64)))
        if bad.any():
            with np.errstate(invalid="ignore", over="ignore"):
                err = np.max(np.abs(o64 - e64)[bad])
            return (f"{name} differs from the answer at {int(bad.sum())} of {e.size} entries, "
                    f"by up to {err:.3g}")
    return None


def same(a, b, rtol=1e-6, atol=1e-9) -> bool:
    """Two results agree (to diagnose, not to grade): a raised error never agrees, NaN never
    equals NaN, shapes and dtype kinds must match."""
    if isinstance(a, Raised) or isinstance(b, Raised) or _shape_of(a) != _shape_of(b):
        return False
    for (_, x), (_, y) in zip(leaves(a), leaves(b), strict=False):
        try:
            x, y = np.asarray(x), np.asarray(y)
        except Exception:           # noqa: BLE001
            return False
        if x.shape != y.shape or (x.dtype == bool) != (y.dtype == bool):
            return False
        if x.dtype == bool:
            if not np.array_equal(x, y):
                return False
            continue
        if not (np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
            return False
        x, y = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = (x == y) | (np.abs(x - y) <= atol + rtol * np.abs(y))
        if not ok.all():                # NaN compares False: never equal
            return False
    return True


def finite_result(x) -> bool:
    """A result made of arrays without NaN (inf allowed, e.g. in masks)."""
    if isinstance(x, Raised):
        return False
    try:
        return all(not np.isnan(np.asarray(v, dtype=np.float64)).any() for _, v in leaves(x))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- the bank's records
@dataclass
class Case:
    """One stored call: ``fn(*args, **kwargs)`` must give ``expected`` (a ``dtype`` output)."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    expected: object = None
    dtype: str = "float64"
    tol: tuple | None = None
    points: float = 1.0
    hidden: bool = False


@dataclass
class Fingerprint:
    """A catalogued mistake: its name, hint and what it returns on each case (in case order)."""

    name: str
    hint: str
    outputs: list


@dataclass
class Finding:
    """What a probe found: ``what`` is wrong (a sentence), ``hint`` teaches, ``name`` is short."""

    name: str
    what: str
    hint: str


@dataclass
class CaseResult:
    label: str
    passed: bool
    why: str | None
    points: float
    hidden: bool
    out: object = None
    written: list = field(default_factory=list)


@dataclass
class Report:
    """The verdict on one exercise: ``status`` is "passed", "mistake", "failed" or
    "not implemented yet"; ``message`` begins with PASSED, MISTAKE: or FAILED:."""

    exercise: str
    status: str
    message: str
    mistake: str | None = None
    cases: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------- the verdict
def run_cases(fn, cases, arg_names=None, on_case=None):
    """Run every case; returns a list of :class:`CaseResult` (raises NotImplementedYet)."""
    results = []
    for case in cases:
        c = call(fn, case.args, case.kwargs, arg_names)
        why = compare(c.out, case.expected, case.dtype, case.tol)
        if c.written and why is None:
            why = f"wrote into its input ({', '.join(c.written)})"
        r = CaseResult(case.label, why is None, why, case.points, case.hidden, c.out, c.written)
        results.append(r)
        if on_case is not None:
            on_case(case, r)
    return results


def match_fingerprint(results, cases, fingerprints):
    """The first catalogued mistake the student's outputs reproduce: on every case where the
    mistake gives a NaN-free result the student agrees with it; where the mistake raises or
    gives NaN, the student fails too; and at least one reproduced case is wrong."""
    for fp in fingerprints:
        informative, ok = 0, True
        for r, case, m_out in zip(results, cases, fp.outputs, strict=False):
            if finite_result(m_out):
                if not same(r.out, m_out, rtol=1e-4, atol=1e-6):
                    ok = False
                    break
                if compare(m_out, case.expected, None, case.tol) is not None:
                    informative += 1
            elif r.passed:
                ok = False
                break
        if ok and informative:
            return fp
    return None


def verdict(exercise, fn, cases, fingerprints=(), probes=(), arg_names=None, signature=None,
            results=None) -> Report:
    """Check ``fn`` on ``cases``; when it is wrong, name what is wrong.

    The diagnosis, first match wins: an input written to; a catalogued mistake reproduced
    (``fingerprints``); a probe (a function ``probe(fn) -> Finding | None`` that measures a
    property, see :mod:`probes`); the dtype rule; otherwise FAILED with the first failing case.
    """
    signature = signature or exercise
    try:
        if results is None:
            results = run_cases(fn, cases, arg_names)
    except NotImplementedYet:
        return Report(exercise, "not implemented yet",
                      f"FAILED: not implemented yet: {signature} still raises NotImplementedError: "
                      "write it, then run the check again.")
    failures = [r for r in results if not r.passed]
    n = len(results)
    written = sorted({w for r in results for w in r.written})
    if written:
        return _mistake(exercise, results, Finding(
            "wrote into an input",
            f"your function changed its input{'s' if len(written) > 1 else ''} {', '.join(written)}",
            "The caller still needs its arrays after the call. Operations like x -= m, "
            "np.exp(x, out=x) or x[...] = ... write into the caller's array: compute into a new "
            "array (y = x - m) instead."), failures)
    if not failures:
        return Report(exercise, "passed", f"PASSED: {exercise}, all {n} cases", cases=results)
    fp = match_fingerprint(results, cases, fingerprints)
    if fp is not None:
        return _mistake(exercise, results, Finding(fp.name, fp.name, fp.hint), failures)
    for probe in probes:
        try:
            with np.errstate(all="ignore"):
                finding = probe(fn)
        except (NotImplementedYet, TimeLimit):
            raise
        except Exception:           # noqa: BLE001 - a probe that cannot run says nothing
            finding = None
        if finding is not None:
            return _mistake(exercise, results, finding, failures)
    if any("could not be broadcast" in (r.why or "") for r in failures) and all(
            "could not be broadcast" in (r.why or "") or " has shape " in (r.why or "") for r in failures):
        return _mistake(exercise, results, Finding(
            "shapes that do not broadcast", "your function raises a broadcasting error (or returns "
            "the wrong shape) on the failing cases",
            "A reduction drops its axis: x.sum(-1) of (..., n) is (...), which no longer lines up "
            "with x. Keep it with keepdims=True (or index [..., None]) so it broadcasts back."),
            failures)
    if all(r.why and r.why.startswith("returned ") for r in failures):
        return _mistake(exercise, results, Finding(
            "returns the wrong structure", f"it {failures[0].why}",
            f"Return exactly what the contract of {signature} says (a tuple where it asks for "
            "several results, in that order)."), failures)
    if all(r.why and "keep the input's dtype" in r.why for r in failures):
        return _mistake(exercise, results, Finding(
            "dtype not kept", failures[0].why.split(" (keep")[0],
            "A float32 input gives a float32 output. float64 creeps in through NumPy float64 "
            "scalars (np.sqrt(d_k) is one: use math.sqrt), dtype=float arrays (np.zeros(n) is "
            "float64) or np.array(x, dtype=float); compute in any precision you like, then cast "
            "back with .astype(x.dtype)."), failures)
    first = failures[0]
    return Report(exercise, "failed",
                  f"FAILED: {exercise}: {len(failures)} of {n} cases fail; first: {first.label}: "
                  f"{first.why}", cases=results)


def _mistake(exercise, results, finding, failures):
    where = f" (first failing case: {failures[0].label}: {failures[0].why})" if failures else ""
    return Report(exercise, "mistake",
                  f"MISTAKE: {exercise}: {finding.name}"
                  f"{'' if finding.what == finding.name else ': ' + finding.what}. "
                  f"Hint: {finding.hint}{where}",
                  mistake=finding.name, cases=results)
