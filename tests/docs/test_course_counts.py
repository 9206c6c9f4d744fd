"""Counts the README and the instructors' guide state about the course, computed from what they
count (the exercise notebooks, the exercises, the mistake catalogue), and printed line ranges of
the lessons checked against the files they cite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises.notebooks import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]


def _text(rel: str) -> str:
    return " ".join((ROOT / rel).read_text(encoding="utf-8").split())


def test_the_readme_counts_the_course_as_it_is():
    readme = _text("README.md")
    notebooks = sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb"))
    assert notebooks == sorted(NOTEBOOKS)
    said = re.search(r"`exercises/` holds (\d+) student notebooks \((\d+) functions to write", readme)
    assert said, "README's course paragraph no longer says how many notebooks and functions"
    assert (int(said[1]), int(said[2])) == (len(notebooks), len(ex.EXERCISES))
    mistakes = sum(len(e.mistakes) for e in ex.EXERCISES.values())
    assert re.findall(r"(\d+) catalogued mistakes", readme) == [str(mistakes)]


def test_the_instructors_guide_counts_the_exercises_and_mistakes():
    text = _text("docs/instructors.md")
    mistakes = sum(len(e.mistakes) for e in ex.EXERCISES.values())
    for n_ex, n_mis in re.findall(r"(\d+) exercises, (\d+) catalogued mistakes", text):
        assert (int(n_ex), int(n_mis)) == (len(ex.EXERCISES), mistakes)


CITED = re.compile(r"(attention_np/[\w/]+\.py), lines (\d+)-(\d+):\n\n")


def _printed_ranges():
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", []))
                for m in CITED.finditer(text):
                    found.append((path.name, m[1], int(m[2]), int(m[3]), text[m.end():]))
    return found


def test_lessons_print_line_ranges():
    assert len(_printed_ranges()) >= 2          # lesson 4 (sdpa_backward) and lesson 7 (tiled_forward)


@pytest.mark.parametrize("lesson,cited,first,last,printed", _printed_ranges(),
                         ids=[f"{r[0]}:{r[1]}" for r in _printed_ranges()])
def test_a_printed_line_range_is_the_file_today(lesson, cited, first, last, printed):
    lines = (ROOT / cited).read_text(encoding="utf-8").splitlines()[first - 1:last]
    shown = printed.splitlines()[:len(lines)]
    assert [s.rstrip() for s in shown] == [s.rstrip() for s in lines], (
        f"{lesson} prints {cited}, lines {first}-{last}, which the file no longer holds there: "
        "rerun the lesson")
