"""The checker: run a student's function on the cases of an exercise and name the mistake.

An :class:`Exercise` holds a reference (the library's own implementation), its cases (edges
included: fully masked rows, huge logits, broadcasting, L != S, float32) and a catalogue of
known mistakes, each a wrong implementation with a name and a hint. When the student's answer
is wrong, every catalogued wrong variant is run on the same inputs; a variant that reproduces
the student's outputs on every case names the mistake.

Tolerances: float64 outputs must agree with the float64 reference to ``1e-9`` (relative, plus
``1e-12`` absolute; any correct order of summation is within ~1e-14). float32 outputs must be
float32 and agree with the float64 reference within ``2e-5 * (1 + |ref|)``, about 170 float32
ulps of 1: a fixed error budget that holds on any CPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np


class CheckError(Exception):
    """A result has the wrong type, shape or dtype (a message for the student)."""


@dataclass
class Case:
    """One call of the exercise: ``fn(*args, **kwargs)``; ``expected`` overrides the reference
    (e.g. a finite-difference gradient); ``dtype`` is the floating dtype the output must have."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    dtype: object = np.float64
    expected: object = None
    tol: tuple | None = None        # (rtol, atol); default by dtype, see the module docstring


@dataclass
class Mistake:
    """A known wrong answer: ``name`` (what the checker prints), ``wrong`` (an implementation of
    the mistake, the exercise's signature) and ``hint`` (teaches, does not give the answer)."""

    name: str
    wrong: object
    hint: str


@dataclass
class Exercise:
    """An exercise: ``name``, the function signature, the paper's sentence, the reference
    implementation, a ``cases()`` factory and the catalogue of ``mistakes``."""

    name: str
    signature: str
    paper: str
    reference: object
    cases: object
    mistakes: list


@dataclass
class CheckResult:
    """What :func:`check` found. ``status`` is one of "passed", "not implemented yet",
    "mistake" (``mistake`` names it), "failed"; ``message`` explains it to the student."""

    exercise: str
    status: str
    message: str
    mistake: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        return f"[{self.exercise}] {self.status.upper()}: {self.message}"


_RAISED = object()


def _call(fn, case: Case):
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
    try:
        with np.errstate(all="ignore"):     # overflow in a wrong answer is reported, not warned
            return fn(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as e:          # noqa: BLE001 - a student's error is a result to report
        return (_RAISED, f"{type(e).__name__}: {e}")


def _leaves(x, prefix="output"):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from _leaves(x[k], f"{prefix}[{k!r}]")
    elif isinstance(x, (tuple, list)):
        for i, item in enumerate(x):
            yield from _leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, x


def _structure(x):
    if isinstance(x, dict):
        return ("dict", tuple(sorted(x)))
    if isinstance(x, (tuple, list)):
        return ("seq", len(x))
    return "leaf"


def compare(out, ref, dtype=np.float64, tol=None):
    """None when ``out`` matches ``ref``; otherwise a sentence saying how it differs."""
    if isinstance(out, tuple) and out and out[0] is _RAISED:
        return f"raised {out[1]}"
    if _structure(out) != _structure(ref) and not (isinstance(out, (tuple, list))
                                                   and isinstance(ref, (tuple, list))
                                                   and len(out) == len(ref)):
        return f"returned {type(out).__name__} of the wrong structure (expected like {_structure(ref)})"
    for (name, o), (_, r) in zip(_leaves(out), _leaves(ref), strict=False):
        r = np.asarray(r)
        try:
            o = np.asarray(o)
        except Exception:           # noqa: BLE001
            return f"{name} is not an array"
        if o.shape != r.shape:
            return f"{name} has shape {o.shape}, expected {r.shape}"
        if r.dtype == bool:
            if o.dtype != bool:
                return f"{name} has dtype {o.dtype}, expected a bool mask"
            if not np.array_equal(o, r):
                return f"{name} differs at {int((o != r).sum())} of {r.size} entries"
            continue
        if np.issubdtype(r.dtype, np.floating) and o.dtype != np.dtype(dtype):
            return f"{name} has dtype {o.dtype}, expected {np.dtype(dtype)} (keep the input's dtype)"
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        if not np.array_equal(np.isnan(o64), np.isnan(r64)):
            return f"{name} has NaN where the answer has none" if np.isnan(o64).any() else \
                f"{name} has numbers where the answer has NaN"
        if tol is None:
            tol = (1e-9, 1e-12) if np.dtype(dtype) == np.float64 else (2e-5, 2e-5)
        if not np.allclose(o64, r64, rtol=tol[0], atol=tol[1], equal_nan=True):
            with np.errstate(invalid="ignore"):
                err = np.nanmax(np.abs(o64 - r64))
            return f"{name} differs from the answer by up to {err:.3g}"
    return None


def _same(a, b) -> bool:
    """Do two results (possibly raised errors) agree, loosely (to diagnose, not to grade)?"""
    a_raised = isinstance(a, tuple) and a and a[0] is _RAISED
    b_raised = isinstance(b, tuple) and b and b[0] is _RAISED
    if a_raised or b_raised:
        return a_raised and b_raised
    if _structure(a) != _structure(b) and not (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))):
        return False
    la, lb = list(_leaves(a)), list(_leaves(b))
    if len(la) != len(lb):
        return False
    for (_, x), (_, y) in zip(la, lb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if x.dtype == bool or y.dtype == bool:
            if not np.array_equal(x, y):
                return False
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore"):
            if not np.allclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True):
                return False
    return True


def run_check(exercise: Exercise, student_fn) -> CheckResult:
    """Check ``student_fn`` against ``exercise`` (see :func:`attention_np.exercises.check`)."""
    cases = exercise.cases()
    outs = []
    try:
        for case in cases:
            outs.append(_call(student_fn, case))
    except NotImplementedError:
        return CheckResult(exercise.name, "not implemented yet",
                           f"{exercise.signature} still raises NotImplementedError: write it, "
                           "then run the check again.")
    failures = []
    for case, out in zip(cases, outs, strict=True):
        ref = case.expected if case.expected is not None else exercise.reference(
            *copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        if isinstance(ref, tuple) and ref and ref[0] is _RAISED:
            raise RuntimeError(f"the reference failed on case {case.label}: {ref[1]}")
        why = compare(out, ref, case.dtype, case.tol)
        if why is not None:
            failures.append((case, why))
    if not failures:
        return CheckResult(exercise.name, "passed", f"all {len(cases)} cases pass")
    for m in exercise.mistakes:
        if all(_same(out, _call(m.wrong, case)) for case, out in zip(cases, outs, strict=True)):
            case, why = failures[0]
            return CheckResult(exercise.name, "mistake",
                               f"{m.name}. Hint: {m.hint} (first failing case: {case.label}: {why})",
                               mistake=m.name)
    case, why = failures[0]
    return CheckResult(exercise.name, "failed",
                       f"{len(failures)} of {len(cases)} cases fail; first: {case.label}: {why}")
