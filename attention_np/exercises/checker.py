"""The exercises' definitions and the bank of stored cases the engine checks against.

An :class:`Exercise` holds a reference (``attention_np.paper`` where it has the function), its public cases,
its hidden cases (the autograder's), and a catalogue of known mistakes, each a wrong
implementation with a name and a hint. :func:`build_record` runs the reference on every case
(float32 cases in float64, from the same float32 inputs) and every catalogued mistake on the
same cases, and stores the outputs: that record is all the checking engine
(:mod:`attention_np.exercises.engine`, NumPy only) and the behaviour probes
(:mod:`attention_np.exercises.probes`) need; the course build saves it for the student kit and
the autograder, which hold no reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

from attention_np._checks import (
    check_callable,
    check_float_dtype,
    check_instance,
    check_number,
    check_str,
    check_tuple,
)
from attention_np.exercises import engine, probes

CheckResult = engine.Report


def _check_tree(x, name: str) -> None:
    """``x`` is an output: an array, a number, None or a tuple, list or dict of them (what an
    exercise's function returns); a str or another object is a ``TypeError`` naming ``name``."""
    if x is None or isinstance(x, (np.ndarray, np.generic, int, float)):
        return
    if isinstance(x, (tuple, list)):
        for i, v in enumerate(x):
            _check_tree(v, f"{name}[{i}]")
        return
    if isinstance(x, dict):
        for k, v in x.items():
            _check_tree(v, f"{name}[{k!r}]")
        return
    raise TypeError(f"{name} must be an output (an array, a number, or a tuple, list or dict of them), "
                    f"got {type(x).__name__} ({x!r:.40})")


def _check_tol(tol) -> None:
    if tol is None:
        return
    check_tuple(tol, "tol", length=2, item=lambda t, name: check_number(t, name, low=0))


@dataclass
class Case:
    """One call of the exercise: ``fn(*args, **kwargs)``; ``expected`` overrides the reference
    (e.g. a finite-difference gradient); ``dtype`` is the floating dtype the output must have.
    Its points are not its own: :func:`build_record` spreads the exercise's points (set in the
    syllabus) over its cases.

    Attributes
    ----------
    label : str
        What the checker prints for this case.
    args : tuple
        The positional arguments.
    kwargs : dict
        The keyword arguments.
    dtype : dtype
        The floating dtype the output must have.
    expected : output tree, optional
        An array, a number, or a tuple, list or dict of them: the output instead of the
        reference's.
    tol : (rtol, atol), optional
        Two floats >= 0; default by dtype (see the engine's docstring).
    clauses : tuple of str
        The contract clauses it tests (``notebooks.CLAUSES`` keys).
    family : str, optional
        The value family it was drawn from (generate.py), if any.
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    dtype: object = np.float64
    expected: object = None
    tol: tuple | None = None
    clauses: tuple = ()
    family: str | None = None

    def __post_init__(self):
        check_str(self.label, "label")
        check_tuple(self.args, "args")
        check_instance(self.kwargs, dict, "kwargs")
        check_float_dtype(self.dtype)
        _check_tree(self.expected, "expected")
        _check_tol(self.tol)
        check_tuple(self.clauses, "clauses", item=lambda c, name: check_str(c, name))
        check_str(self.family, "family", optional=True)


@dataclass
class Mistake:
    """A known wrong answer: ``name`` (what the checker prints), ``wrong`` (an implementation of
    the mistake, the exercise's signature) and ``hint`` (teaches, does not give the answer).

    Attributes
    ----------
    name : str
    wrong : callable
        The wrong implementation, with the exercise's signature.
    hint : str
    """

    name: str
    wrong: object
    hint: str

    def __post_init__(self):
        check_str(self.name, "name")
        check_callable(self.wrong, "wrong")
        check_str(self.hint, "hint")


@dataclass
class Exercise:
    """An exercise: ``name``, the function signature, the paper's sentence, the reference
    implementation, a ``cases(seed)`` factory (``hidden`` gives the autograder's cases; by default
    the same factory with another seed), the catalogue of ``mistakes`` and the ``spec`` of
    :mod:`attention_np.exercises.generate` the cases are drawn from.

    Attributes
    ----------
    name, signature, paper : str
    reference : callable
        The reference implementation.
    cases : callable
        ``cases(seed)`` -> list of :class:`Case`, the public cases.
    mistakes : list of Mistake
        The catalogue of known mistakes.
    hidden : callable, optional
        ``hidden()`` -> list of :class:`Case`, the autograder's cases.
    outputs : tuple of str, optional
        Names of a tuple result's items, e.g. ``("dq", "dk", "dv")``.
    spec : attention_np.exercises.generate.Spec, optional
        What the cases are drawn from.
    """

    name: str
    signature: str
    paper: str
    reference: object
    cases: object
    mistakes: list
    hidden: object = None
    outputs: tuple | None = None
    spec: object = None

    def __post_init__(self):
        for name in ("name", "signature", "paper"):
            check_str(getattr(self, name), name)
        check_callable(self.reference, "reference")
        check_callable(self.cases, "cases")
        if not isinstance(self.mistakes, list):
            raise TypeError(f"mistakes must be a list of Mistake, got {type(self.mistakes).__name__}")
        for i, m in enumerate(self.mistakes):
            check_instance(m, Mistake, f"mistakes[{i}]")
        check_callable(self.hidden, "hidden", optional=True)
        if self.outputs is not None:
            check_tuple(self.outputs, "outputs", item=lambda o, name: check_str(o, name))
        from attention_np.exercises.generate import Spec  # generate imports this module
        check_instance(self.spec, Spec, "spec", optional=True)

    @property
    def function(self) -> str:
        return self.signature.split("(")[0]

    @property
    def arg_names(self) -> list:
        inner = self.signature[self.signature.index("(") + 1:-1]
        return [a.split("=")[0].strip() for a in inner.split(",") if a.strip()]

    def hidden_cases(self):
        if self.hidden is not None:
            return self.hidden()
        try:
            return self.cases(seed=100 + _seed_of(self.cases))
        except TypeError:
            return []


def _seed_of(factory) -> int:
    defaults = factory.__defaults__ or (0,)
    return int(defaults[0])


# ---------------------------------------------------------------- shared catalogue entries
SCALE_HINT = ("§3.2.1: for large d_k the dot products grow large and push the softmax into regions "
              "with tiny gradients. What keeps their variance at 1?")
D_MODEL_HINT = ("Each head computes dot products of width d_k, the width of one head (W_q.shape[1] "
                "// num_heads), not d_model.")
UNWEIGHTED_HINT = "The sum is an expectation under p: weight each dp_j by p_j."


def _upcast(x):
    if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float64)
    if isinstance(x, dict):
        return {k: _upcast(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_upcast(v) for v in x)
    return x


def _engine_case(exercise, case: Case, hidden: bool, points: float) -> engine.Case:
    if case.expected is not None:
        expected = case.expected
    else:
        expected = exercise.reference(*engine.copy_tree(_upcast(case.args)),
                                      **engine.copy_tree(_upcast(case.kwargs)))
    return engine.Case(case.label, tuple(case.args), dict(case.kwargs), expected,
                       np.dtype(case.dtype).name, case.tol, points, hidden, exercise.outputs)


def _wrong_output(mistake, case: engine.Case):
    return _share(engine.call(mistake.wrong, case.args, case.kwargs).out, case.expected)


def _share(out, expected):
    """``out`` with every array equal to its counterpart in ``expected`` (same shape, dtype and
    bits) replaced by that array: the bank stores it once (a mistake is right on many cases)."""
    if isinstance(out, np.ndarray) and isinstance(expected, np.ndarray):
        same = out.shape == expected.shape and out.dtype == expected.dtype and np.array_equal(
            out, expected, equal_nan=out.dtype.kind in "fc")
        return expected if same else out
    if isinstance(out, dict) and isinstance(expected, dict):
        return {k: _share(v, expected.get(k)) for k, v in out.items()}
    if isinstance(out, (tuple, list)) and isinstance(expected, (tuple, list)) and len(out) == len(expected):
        return type(out)(_share(o, e) for o, e in zip(out, expected, strict=True))
    return out


def build_record(exercise: Exercise, hidden: bool = False) -> dict:
    """The stored form of ``exercise``: its cases with expected values (the hidden ones too when
    ``hidden``), what each catalogued mistake returns on them, the probes' expected values. Each
    case is worth the exercise's points (:func:`~attention_np.exercises.syllabus.exercise_points`)
    over the number of its public and hidden cases."""
    # imported here: `python -m attention_np.exercises.syllabus` imports this module first
    from attention_np.exercises.syllabus import exercise_points

    public, secret = exercise.cases(), exercise.hidden_cases()
    points = exercise_points(exercise.name) / (len(public) + len(secret))
    cases = [_engine_case(exercise, c, False, points) for c in public]
    if hidden:
        for c in secret:
            c.label = f"hidden: {c.label}"
            cases.append(_engine_case(exercise, c, True, points))
    fingerprints = [engine.Fingerprint(m.name, m.hint, [_wrong_output(m, c) for c in cases])
                    for m in exercise.mistakes]
    probe_inputs = probes.INPUTS.get(exercise.name, lambda: {})()
    probe_expected = {k: exercise.reference(*engine.copy_tree(a), **engine.copy_tree(kw))
                      for k, (a, kw) in probe_inputs.items()}
    return {"signature": exercise.signature, "function": exercise.function,
            "arg_names": exercise.arg_names, "cases": cases, "fingerprints": fingerprints,
            "probe_expected": probe_expected}


@cache
def _record(name: str):
    from attention_np.exercises import EXERCISES
    return build_record(EXERCISES[name])


def run_check(exercise: Exercise, student_fn) -> engine.Report:
    """Check ``student_fn`` against ``exercise`` (see :func:`attention_np.exercises.check`)."""
    rec = _record(exercise.name)
    return check_record(exercise.name, rec, student_fn)


def check_record(name: str, rec: dict, student_fn, cases=None) -> engine.Report:
    """The engine's verdict on ``student_fn`` from a stored record (the kits call the same)."""
    return probes.check_record(name, rec, student_fn, cases)
