"""The course, as records: the nine lessons, their questions, and the two-week plan.

This is where a course is edited. Each lesson is one module beside this file (``lesson01.py`` ...
``lesson09.py``: its objectives, prerequisites, minutes, questions with their answers and rubrics,
figures, explorer view and project), written in the records of :mod:`.records`, whose fields are
documented there; the order of the lessons and the sessions of the two-week unit are below. After an
edit, ``python -m attention_np.exercises.syllabus --write`` (from the repository root) rewrites every
document and notebook cell made from them (:mod:`attention_np.exercises.syllabus`), and
``tests/course/test_syllabus.py`` checks the course against its lessons.

Plain Python records rather than a data file: every field is named where it is written and checked
when the course is imported (a misspelt field or an unknown kind is an error naming it), the
regular expressions of a question's ``ranges`` are raw strings, and nothing but the standard
library reads them (Python 3.10 has no TOML reader). Standard library only.
"""

from __future__ import annotations

from attention_np.exercises.syllabus_data import (
    lesson01,
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson08,
    lesson09,
)
from attention_np.exercises.syllabus_data.records import Session

#: the lessons in course order
LESSONS = tuple(m.LESSON for m in (lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07,
                                   lesson08, lesson09))

SESSION_MINUTES = 90
#: the most homework one session may leave (minutes): a longer lesson's homework is carried to a later session
MAX_HOMEWORK_MINUTES = 180

#: the two-week unit: six 90-minute sessions; lessons 7-9 follow as its extension
SESSIONS = (
    Session(
        lessons=(1,),
        in_class=(("questions 1-2 in pairs, then start `softmax`", 30),),
        homework="exercise 01 (`softmax`, `padding_mask`, `attention`) and lesson 1's questions 3-4",
    ),
    Session(
        lessons=(2,),
        in_class=(("question 1 (footnote 4's variance) at the board", 15),),
        homework="lesson 2's questions 2-4",
    ),
    Session(
        lessons=(3,),
        in_class=(("start `split_heads`, then question 3", 20),),
        homework="exercise 03 (`split_heads`, `merge_heads`, `mha_forward`) and lesson 3's questions",
    ),
    Session(
        lessons=(4,),
        in_class=(("question 2 (the softmax VJP) on paper", 20),),
        homework="exercise 04's `softmax_backward` and `attention_backward`, and lesson 4's questions",
        carry=(("exercise 04's `mha_backward` (lesson 4's step-by-step derivation of it)", 90, 6),),
    ),
    Session(
        lessons=(5,),
        in_class=(("plan the project: choose one change and write the prediction", 30),),
        homework="the project of lesson 5 and its questions",
    ),
    Session(
        lessons=(6,),
        in_class=(("questions 1-2, then a review of the unit", 20),),
        homework="exercise 06 (`sinusoidal`), lesson 6's questions 3-4 and its appendix (claim 6, read at "
                 "home)",
    ),
)
EXTENSION = (7, 8, 9)
