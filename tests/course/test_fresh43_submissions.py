"""A third unseen corpus of student solutions (session 43), written from the student kit alone
(tests/course/course_submissions/fresh43): 31 correct files written unlike the model solutions and
99 wrong ones, each a realistic slip, most of them right on "typical" shapes and wrong on an edge the
contract allows (an axis of size 1, one head, d_k != d_v, L != S, S = 1, t = 0, a query with no
key, float32 kept, an input written to, a broadcast batch axis). (a) An independent oracle
(tests/course/fresh43_oracle.py: float64 NumPy and torch autograd, no import of attention_np) finds
every correct file right on every generated input, for its fixed draw and for draws hypothesis
picks, and every wrong file wrong on at least one input the contract allows; (b) the course checker
passes every correct file and rejects every wrong one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention_np.exercises as ex
from attention_np.exercises.loading import load_function
from tests.course.corpus_files import exercise_of, load_own

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh43_oracle  # noqa: E402 (after the path is set)

HERE = Path(__file__).resolve().parent / "course_submissions" / "fresh43"
CORRECT = sorted((HERE / "correct").glob("*.py"))
WRONG = sorted((HERE / "wrong").glob("*.py"))


_exercise = exercise_of


def _own_load(path):
    return load_own(path, "fresh43")


def test_the_corpus_is_large_covers_every_exercise_and_has_its_headers():
    assert len(CORRECT) >= 26 and len(WRONG) >= 80
    for paths, kind in ((CORRECT, "style"), (WRONG, "slip")):
        for p in paths:
            lines = p.read_text().splitlines()
            assert re.fullmatch(r"# exercise: \w+", lines[0]), p.name
            assert re.fullmatch(rf"# {kind}: \S.*", lines[1]), p.name
        assert {_exercise(p) for p in paths} == set(fresh43_oracle.EXERCISES) == set(ex.EXERCISES)
    for name in ex.EXERCISES:
        assert sum(_exercise(p) == name for p in CORRECT) >= 2, name
        assert sum(_exercise(p) == name for p in WRONG) >= 5, name


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_the_oracle_finds_a_correct_file_right_everywhere(path):
    assert fresh43_oracle.verdict(_exercise(path), _own_load(path)) == []


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(1, 2**31))
def test_the_oracle_finds_a_correct_file_right_on_other_draws(path, seed):
    assert fresh43_oracle.verdict(_exercise(path), _own_load(path), seed=seed) == []


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_the_oracle_finds_a_wrong_file_wrong_somewhere(path):
    assert fresh43_oracle.verdict(_exercise(path), _own_load(path), limit=1) != []


def test_the_oracle_can_fail():
    # a right answer perturbed in its last place but one is refused: the tolerance is not loose
    def off(x):
        e = fresh43_oracle._softmax64(x)
        return (e * (1 + 1e-8)).astype(x.dtype)
    assert fresh43_oracle.verdict("softmax", off)


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


def test_the_instructors_guide_states_this_corpus():
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "instructors.md").read_text().split())
    named = sum(_check(p).status == "mistake" for p in WRONG)
    assert f"fresh43/` ({len(CORRECT)} correct solutions, {len(WRONG)} wrong ones)" in text
    assert f"now {named} of {len(WRONG)} wrong ones are named" in text
