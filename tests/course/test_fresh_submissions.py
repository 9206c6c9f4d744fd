"""A fresh, unseen corpus of student solutions, written from the student kit's contracts alone
(tests/course/course_submissions/fresh): (a) an independent oracle (tests/course/fresh_oracle.py, float64
NumPy and torch autograd, no import of attention_np.exercises) confirms every correct file agrees on
every generated input and every wrong file disagrees on at least one input the contract allows; (b)
the course checker must pass every correct file and reject every wrong one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises.loading import load_function
from tests.course.corpus_files import exercise_of, load_own

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh_oracle  # noqa: E402 (after the path is set)

HERE = Path(__file__).resolve().parent / "course_submissions" / "fresh"
CORRECT = sorted((HERE / "correct").glob("*.py"))
WRONG = sorted((HERE / "wrong").glob("*.py"))


_exercise = exercise_of


def _own_load(path):
    return load_own(path, "fresh")


def test_the_corpus_is_large_covers_every_exercise_and_has_its_headers():
    assert len(CORRECT) >= 20 and len(WRONG) >= 45
    for paths, kind in ((CORRECT, "style"), (WRONG, "slip")):
        for p in paths:
            lines = p.read_text().splitlines()
            assert re.fullmatch(r"# exercise: \w+", lines[0]), p.name
            assert re.fullmatch(rf"# {kind}: \S.*", lines[1]), p.name
        assert {_exercise(p) for p in paths} == set(fresh_oracle.EXERCISES) == set(ex.EXERCISES)


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_the_oracle_finds_a_correct_file_right_everywhere(path):
    assert fresh_oracle.verdict(_exercise(path), _own_load(path)) == []


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_the_oracle_finds_a_wrong_file_wrong_somewhere(path):
    assert fresh_oracle.verdict(_exercise(path), _own_load(path)) != []


def _check(path):
    name = _exercise(path)
    return ex.check(name, load_function(path, ex.function_name(name)))


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_the_checker_passes_a_correct_file(path):
    result = _check(path)
    assert result.ok, str(result)


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_the_checker_rejects_a_wrong_file(path):
    result = _check(path)
    assert not result.ok, f"accepted: {path.name}"
