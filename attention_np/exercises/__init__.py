"""Exercises for a course on §3.2, with a checker that names the mistake.

>>> import attention_np.exercises as ex
>>> print(ex.check("softmax", ex.reference("softmax")))
PASSED: softmax, all 18 cases

Each exercise has a reference (``attention_np.paper``, the code a student reads, where it has
the function; the tiled forward and the positional table from the library), cases drawn from its
contract (:mod:`.generate`: every clause at every size the contract allows, 1 included, with the
value families it names: fully masked rows, huge logits, broadcasting, float32, ...), a
finite-difference gradcheck for the backward passes, hidden cases for the autograder (drawn the
same way from another seed), a catalogue of known mistakes
(:data:`EXERCISES`, ``ex.mistakes``) and behaviour probes (:mod:`.probes`) that measure what a wrong
answer does and name what is wrong, with a hint. The checking engine (:mod:`.engine`) and the
probes need NumPy alone: ``python -m attention_np course build OUT`` copies them into a student
kit with the cases' expected values (:mod:`.course`). The student notebooks are in ``exercises/``;
``python -m attention_np check NAME solution.py`` checks a file or a notebook.
"""

from __future__ import annotations

from attention_np._checks import check_callable, check_str
from attention_np.exercises import checker
from attention_np.exercises.attention_exercises import ATTENTION, ATTENTION_BACKWARD
from attention_np.exercises.basics_exercises import (
    CAUSAL_MASK,
    PADDING_MASK,
    SINUSOIDAL,
    SOFTMAX,
    SOFTMAX_BACKWARD,
)
from attention_np.exercises.checker import Case, CheckResult, Exercise, Mistake
from attention_np.exercises.efficient_exercises import DECODE_STEP, TILED_ATTENTION
from attention_np.exercises.multihead_exercises import MERGE_HEADS, MHA_BACKWARD, MHA_FORWARD, SPLIT_HEADS

#: name -> Exercise, in the order of the course
EXERCISES = {e.name: e for e in (
    SOFTMAX, SOFTMAX_BACKWARD, CAUSAL_MASK, PADDING_MASK, ATTENTION, ATTENTION_BACKWARD,
    SPLIT_HEADS, MERGE_HEADS, MHA_FORWARD, MHA_BACKWARD, TILED_ATTENTION, DECODE_STEP, SINUSOIDAL)}

__all__ = ["EXERCISES", "Case", "CheckResult", "Exercise", "Mistake", "check", "reference",
           "function_name"]


def _exercise(name) -> Exercise:
    check_str(name, "name")
    if name not in EXERCISES:
        raise ValueError(f"name: unknown exercise {name!r}; expected one of {sorted(EXERCISES)}")
    return EXERCISES[name]


def function_name(name: str) -> str:
    """The name the student's function has in a solution file, e.g. ``"attention_backward"``.

    Parameters
    ----------
    name : {"softmax", "softmax_backward", ...}
        One of :data:`EXERCISES`.
    """
    return _exercise(name).signature.split("(")[0]


def reference(name: str):
    """The reference of exercise ``name`` (what the checker compares against): ``attention_np.paper``
    where it has the function, else the library's own.

    Parameters
    ----------
    name : {"softmax", "softmax_backward", ...}
        One of :data:`EXERCISES`.
    """
    return _exercise(name).reference


def check(name: str, student_fn) -> CheckResult:
    """Run ``student_fn`` on every case of exercise ``name``.

    Parameters
    ----------
    name : {"softmax", "softmax_backward", ...}
        One of :data:`EXERCISES`.
    student_fn : callable
        The student's function, with the exercise's signature.

    Returns
    -------
    CheckResult
        ``result.ok`` is True when every case passes; ``result.status`` is "passed",
        "not implemented yet" (the stub still raises NotImplementedError), "mistake"
        (``result.mistake`` names what is wrong, the message gives a hint) or "failed";
        ``print(result)`` explains in one message that begins with ``PASSED``, ``MISTAKE:`` or
        ``FAILED:``.
    """
    exercise = _exercise(name)
    check_callable(student_fn, "student_fn", what=f"a function with signature {exercise.signature}")
    return checker.run_check(exercise, student_fn)
