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
        committed = handout.kit_links(_committed(les))["cells"]
        copy = json.loads((student / "lessons" / f"{les.stem}.ipynb").read_text())["cells"]
        notes = [i for i, c in enumerate(copy) if handout.NOTE_TAG in c["metadata"].get("tags", [])]
        # a note before each predict cell, naming its question; nothing else added or removed
        assert [copy[i + 1]["id"] for i in notes] == [c for _, _, c in handout.predict_questions(les)]
        for (number, _, _), i in zip(handout.predict_questions(les), notes, strict=True):
            assert f"Question {number} at the end of this lesson" in "".join(copy[i]["source"])
        copy = [c for i, c in enumerate(copy)
                if i not in notes and not c.get("id", "").startswith("after-run-")]
        assert [c.get("id") for c in copy] == [c.get("id") for c in committed]
        # what reads a predict cell's output is held back (test below); every other cell is as committed
        window = {committed[i]["id"] for cell in hidden
                  for i, _ in handout.answer_window({"cells": committed}, cell, les.stem)}
        for a, b in zip(copy, committed, strict=True):
            if a.get("id") not in hidden | window:
                assert a == b


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


#: (lesson, question) -> the key words of its answer (each is in the syllabus answer): what the prose
#: around the predict cell may not say where the student reads it before running the cell
KEY_WORDS = {
    (1, 1): ("plain average", "uniform", "1/3"),
    (1, 4): ("cat",),
    (2, 2): ("nearly one-hot", "0.92", "0.25"),
    (3, 1): ("whatever h is", "16,777,216", "131,072", "16,384"),
    (4, 1): ("exactly 0", "not NaN"),
    (5, 1): ("no measurable loss", "about chance", "100.0%", "11.6%"),
    (6, 1): ("of order one", "1.3e+00", "float64 rounding"),
    (7, 1): ("below 4", "grows about 2×"),
    (8, 1): ("exactly 0", "of order one", "3.74"),
    (9, 1): ("previous-token head", "near 0", "0.002"),
}
NUMBER = re.compile(r"\d+(?:[.,]\d+)+%?")


def _key_words(les, number, q) -> list:
    """The question's key words, the numbers its quotes print, and the values its ranges match in the
    committed output."""
    words = list(KEY_WORDS[les.number, number])
    words += [n for quote in q.quotes for n in NUMBER.findall(quote)]
    printed = _printed(_committed(les))
    words += [m.group(0) for pattern, _, _ in q.ranges for m in [re.search(pattern, printed)] if m]
    return words


def _states(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(_norm(word))}(?![\w])", _norm(text), re.IGNORECASE) is not None


def test_every_predict_question_has_key_words_from_its_answer():
    assert sorted(KEY_WORDS) == sorted((les.number, n) for les, n, _ in PREDICTS)
    for les, number, q in PREDICTS:
        for word in KEY_WORDS[les.number, number]:
            assert _states(q.answer, word), (les.stem, number, word)


def _visible(nb, les, number) -> str:
    """What a student sees around a predict question's cell before running it: the markdown cell just
    above the cell (its last paragraph leads into the cell), and the answer window without its folds."""
    cell_id = dict((n, c) for n, _, c in handout.predict_questions(les))[number]
    ids = [c.get("id") for c in nb["cells"]]
    i = ids.index(cell_id)
    above = [c for c in nb["cells"][max(0, i - 2):i] if c["cell_type"] == "markdown"
             and handout.NOTE_TAG not in c["metadata"].get("tags", [])][-1:]
    parts = ["".join(c["source"]).split("\n\n")[-1] for c in above]
    for j in range(i + 1, len(nb["cells"])):
        cell = nb["cells"][j]
        if cell["cell_type"] == "code":
            if parts[len(above):] and any(p for p in parts[len(above):]):
                break
            parts.append(handout.output_text(cell))
            continue
        text = "".join(cell["source"])
        text = re.sub(r"<details>.*?</details>", "", text, flags=re.DOTALL)
        heading = handout.HEADING.search(text)
        parts.append(text if heading is None else text[:heading.start()])
        if heading is not None:
            break
    return "\n".join(parts)


@pytest.mark.parametrize("les,number,q", PREDICTS, ids=[f"{le.number}.{n}" for le, n, _ in PREDICTS])
def test_the_student_copy_does_not_state_the_answer_around_the_cell(kit, les, number, q):
    student, _ = kit
    copy = json.loads((student / "lessons" / f"{les.stem}.ipynb").read_text())
    visible = _visible(copy, les, number)
    stated = [w for w in _key_words(les, number, q) if _states(visible, w)]
    assert not stated, (les.stem, number, stated)
    # what was held back is still there, folded under "After you ran it"
    committed = _committed(les)
    cell_id = dict((n, c) for n, _, c in handout.predict_questions(les))[number]
    for i, text in handout.answer_window(committed, cell_id, les.stem):
        if text and text.strip():
            own = committed["cells"][i]["id"]
            folded = next(c for c in copy["cells"] if c.get("id") in (f"after-run-{own}", own)
                          and handout.AFTER_TAG in c["metadata"].get("tags", []))
            assert handout.AFTER_TAG in folded["metadata"]["tags"]
            assert _norm(text) in _norm("".join(folded["source"]))
            assert "".join(folded["source"]).startswith(f"<details><summary><b>{handout.AFTER_SUMMARY}")
        elif text is None:
            shown = next(c for c in copy["cells"] if c.get("id") == committed["cells"][i]["id"])
            assert shown["outputs"] == [] and shown["execution_count"] is None


def test_the_check_reads_the_answer_where_it_was_on_the_page():
    # lesson 1's committed page says it right under the first predict cell: the check sees it there
    les, number, q = PREDICTS[0]
    assert (les.number, number) == (1, 1)
    visible = _visible(_committed(les), les, number)
    assert _states(visible, "plain average")
