"""The records a course is written in: a :class:`Lesson` with its :class:`Question` s, and the
:class:`Session` s of the two-week plan.

Each field is named where it is written (``minutes=70, homework_minutes=240``), so a lesson
module reads without this file open; a misspelt field is a ``TypeError`` naming it, and a
question's ``kind`` or a lesson's ``explorer`` view outside the lists below is a ``ValueError``,
when the course is imported. Standard library only (plus :mod:`..notebooks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from attention_np.exercises.notebooks import NOTEBOOKS

#: a question's kind -> the words it opens with in the lesson
KINDS = {"predict": "Predict, then run.", "derive": "Derive by hand.",
         "break": "Break it and explain.", "explain": "Explain."}
#: a lesson's view of the explorer (``docs/explorer.md#NAME``) -> the words of the link to it
EXPLORER_VIEWS = {"eq1": "Eq. (1) live: d_k, scaled and unscaled", "masks": "the masks view",
                  "heads": "the heads of trained models"}


@dataclass(frozen=True)
class Question:
    """A question at the end of a lesson. ``quotes`` are outputs of the lesson's own cells that
    the answer relies on (each must appear in the notebook's committed outputs), never a value
    measured from the machine (time, memory), which moves from run to run: such a value is a
    ``ranges`` entry ``(pattern, low, high)`` instead, ``pattern`` a regular expression whose one
    group is the printed number; the answer states the range, and the committed output's value lies
    in it (tests/course/test_syllabus.py)."""

    kind: str                    # a key of KINDS
    text: str                    # what the student reads at the end of the lesson
    answer: str                  # the solutions kit only
    rubric: str                  # what earns each of its 3 points: "1 pt: ...; 1 pt: ...; 1 pt: ..."
    quotes: tuple = ()
    ranges: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Question.kind must be one of {list(KINDS)}, got {self.kind!r}")


@dataclass(frozen=True)
class Lesson:
    """A lesson of the course: ``notebooks/{stem}.ipynb``, what a student will be able to do after
    it, what it assumes, its time, its questions, and the paper's sections it teaches."""

    number: int                  # its place in the course order, from 1
    stem: str                    # notebooks/{stem}.ipynb
    title: str
    paper: tuple                 # the paper's sections it teaches
    objectives: tuple            # each ends the sentence "A student can ..."
    prerequisites: tuple         # what it assumes
    minutes: int                 # in class
    homework_minutes: int
    why: str                     # why the lesson sits here in the order
    questions: tuple             # (Question, ...), 3 to 6
    figures: tuple               # files (figures/..., docs/img/...) or plots the lesson draws
    explorer: str | None = None  # a key of EXPLORER_VIEWS
    project: str | None = None   # the task of a lesson without functions to write (rubric: rubrics.py)

    def __post_init__(self):
        if self.explorer is not None and self.explorer not in EXPLORER_VIEWS:
            raise ValueError(f"Lesson.explorer of lesson {self.number} must be None or one of "
                             f"{list(EXPLORER_VIEWS)}, got {self.explorer!r}")

    @property
    def exercises(self) -> tuple:
        """The functions of the exercise notebook that goes with this lesson."""
        return tuple(name for _, lessons, exercises in NOTEBOOKS.values() if self.stem in lessons
                     for name in exercises)

    @property
    def exercise_notebook(self) -> str | None:
        return next((stem for stem, (_, lessons, _) in NOTEBOOKS.items() if self.stem in lessons),
                    None)


@dataclass(frozen=True)
class Session:
    """A 90-minute session of the two-week unit."""

    lessons: tuple               # lesson numbers
    in_class: tuple              # ((activity, minutes), ...) besides the lessons' own minutes
    homework: str
    carry: tuple = ()            # ((what, minutes, session it is due at), ...): part of its lessons' homework
