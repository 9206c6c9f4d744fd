"""The files of an unseen corpus of student solutions (tests/course/course_submissions/<corpus>/
{correct,wrong}/*.py): each names its exercise on its first line (``# exercise: NAME``) and is
loaded by the tests on their own, without the course kit's loader."""

from __future__ import annotations

import importlib.util
import re


def exercise_of(path) -> str:
    """The exercise a corpus file says it solves (``# exercise: NAME``)."""
    return re.search(r"^# exercise: (\w+)$", path.read_text(), re.M).group(1)


def load_own(path, corpus: str):
    """The function of ``path`` named for its exercise, imported as a module of its own
    (``corpus`` keeps the module names of two corpora apart)."""
    spec = importlib.util.spec_from_file_location(f"{corpus}_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, exercise_of(path))
