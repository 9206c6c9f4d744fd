"""Student copies of the lessons: every "predict, then run" question's cell is handed out without
its output, the output is in the solutions, and the site folds it (tests/site checks the page)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attention_np.exercises import handout
from attention_np.exercises.syllabus import LESSONS

ROOT = Path(__file__).resolve().parents[2]
PREDICTS = [(les, n, q) for les in LESSONS for n, q in enumerate(les.questions, 1) if q.kind == "predict"]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _committed(les):
    return json.loads((ROOT / "notebooks" / f"{les.stem}.ipynb").read_text(encoding="utf-8"))


def _printed(nb) -> str:
    return _norm("\n".join(handout.output_text(c) for c in nb["cells"]))


def test_every_predict_question_is_linked_to_one_cell():
    assert len(PREDICTS) >= 10
    for les in LESSONS:
        linked = handout.predict_questions(les)
        assert [n for n, _, _ in linked] == [n for le, n, _ in PREDICTS if le is les]
        ids = [c["id"] for c in _committed(les)["cells"]]
        assert all(ids.count(cell) == 1 for _, _, cell in linked), les.stem


@pytest.mark.parametrize("les,number,q", PREDICTS, ids=[f"{le.number}.{n}" for le, n, _ in PREDICTS])
def test_the_linked_cell_prints_what_the_answer_quotes(les, number, q):
    # the link is right: the quoted lines are the linked cell's output, and no other cell's
    nb = _committed(les)
    cell_id = dict((n, c) for n, _, c in handout.predict_questions(les))[number]
    cell = next(c for c in nb["cells"] if c.get("id") == cell_id)
    assert cell["cell_type"] == "code" and (q.quotes or q.ranges)
    for quote in q.quotes:
        assert _norm(quote) in _norm(handout.output_text(cell)), (les.stem, quote)
        others = [c.get("id") for c in nb["cells"]
                  if c is not cell and _norm(quote) in _norm(handout.output_text(c))]
        assert not others, (les.stem, quote, others)
    for pattern, _, _ in q.ranges:
        assert re.search(pattern, _norm(handout.output_text(cell))), (les.stem, pattern)
        others = [c.get("id") for c in nb["cells"]
                  if c is not cell and re.search(pattern, _norm(handout.output_text(c)))]
        assert not others, (les.stem, pattern, others)


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    student, solutions = out / "student", out / "solutions"
    handout.write(ROOT, student, solutions)
    return student, solutions


@pytest.mark.parametrize("les,number,q", PREDICTS, ids=[f"{le.number}.{n}" for le, n, _ in PREDICTS])
def test_student_copy_hides_the_answer_and_the_solutions_hold_it(kit, les, number, q):
    student, solutions = kit
    copy = json.loads((student / "lessons" / f"{les.stem}.ipynb").read_text())
    cell_id = dict((n, c) for n, _, c in handout.predict_questions(les))[number]
    cell = next(c for c in copy["cells"] if c.get("id") == cell_id)
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert handout.PREDICT_TAG in cell["metadata"]["tags"]
    printed = _printed(copy)
    for quote in q.quotes:
        assert _norm(quote) not in printed, (les.stem, quote)         # nowhere in the student copy
    for pattern, _, _ in q.ranges:
        assert not re.search(pattern, printed), (les.stem, pattern)
    full = json.loads((solutions / "lessons" / f"{les.stem}.ipynb").read_text())
    assert full == handout.kit_links(_committed(les))          # as committed, links made right in the kit
    outputs = _norm((solutions / "predict_outputs.md").read_text())
    assert _norm(q.text) in outputs
    for quote in q.quotes:
        assert _norm(quote) in outputs
    for pattern, _, _ in q.ranges:
        assert re.search(pattern, outputs), (les.stem, pattern)


def test_student_copy_keeps_every_other_output(kit):
    student, _ = kit
    for les in LESSONS:
        hidden = {c for _, _, c in handout.predict_questions(les)}
        committed = _committed(les)["cells"]
        copy = json.loads((student / "lessons" / f"{les.stem}.ipynb").read_text())["cells"]
        notes = [i for i, c in enumerate(copy) if handout.NOTE_TAG in c["metadata"].get("tags", [])]
        # a note before each predict cell, naming its question; nothing else added or removed
        assert [copy[i + 1]["id"] for i in notes] == [c for _, _, c in handout.predict_questions(les)]
        for (number, _, _), i in zip(handout.predict_questions(les), notes, strict=True):
            assert f"Question {number} at the end of this lesson" in "".join(copy[i]["source"])
        copy = [c for i, c in enumerate(copy) if i not in notes]
        assert [c.get("id") for c in copy] == [c.get("id") for c in committed]
        for a, b in zip(copy, committed, strict=True):
            if a.get("id") not in hidden:
                assert a.get("outputs") == b.get("outputs") and a["metadata"] == b["metadata"]


def test_images_of_a_predict_cell_go_to_the_solutions(kit):
    _, solutions = kit
    md = (solutions / "predict_outputs.md").read_text()
    n_images = sum(len([o for o in c.get("outputs", []) if "image/png" in o.get("data", {})])
                   for les in LESSONS for c in _committed(les)["cells"]
                   if c.get("id") in {cell for _, _, cell in handout.predict_questions(les)})
    linked = [line for line in md.splitlines() if line.startswith("![")]
    assert len(linked) == n_images
    for line in linked:
        path = solutions / line.split("](")[1].rstrip(")")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_site_copy_folds_exactly_the_predict_cells():
    for les in LESSONS:
        nb = _committed(les)
        folded = handout.fold_for_site(nb, les)
        tagged = [c.get("id") for c in folded["cells"]
                  if "hide-output" in c.get("metadata", {}).get("tags", [])]
        assert tagged == [c.get("id") for c in nb["cells"]
                          if c.get("id") in {cell for _, _, cell in handout.predict_questions(les)}]
        assert [c.get("outputs") for c in folded["cells"]] == [c.get("outputs") for c in nb["cells"]]


def test_a_missing_link_is_refused_by_name():
    les = LESSONS[0]
    nb = _committed(les)
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != handout.PREDICT_CELLS[les.stem][0]]
    with pytest.raises(ValueError, match=f"{les.stem} has no cell with id"):
        handout.student_lesson(nb, les)


def test_the_copies_are_valid_notebooks(kit):
    nbformat = pytest.importorskip("nbformat")
    for folder in kit:
        for path in sorted((folder / "lessons").glob("*.ipynb")):
            nbformat.validate(nbformat.read(path, as_version=4))
