"""The lessons as they are handed out: a student copy without the answers of its predict questions.

A "predict, then run" question of :mod:`.syllabus` names a cell of its lesson; the committed
output of that cell is the answer. :data:`PREDICT_CELLS` links each such question to its cell by
the cell's notebook id (explicit data, checked by ``tests/course/test_handout.py``: the linked
cell's outputs hold every line the question's answer quotes). From it

- :func:`student_lesson`: the lesson with those cells' outputs removed (the cells keep their
  code and get the tag ``predict-then-run``) and what reads each output, up to the next heading,
  held back (prose folded under "After you ran it", outputs removed), for ``OUT/student/lessons/``;
- :func:`predict_outputs_markdown`: the removed outputs, question by question, for
  ``OUT/solutions/predict_outputs.md`` (images beside it), with the full lessons in
  ``OUT/solutions/lessons/``;
- :func:`fold_for_site`: the lesson with those cells tagged ``hide-output``, which myst-nb renders
  as a folded output under a "Show code cell output" control (``docs/conf.py``).

Standard library only.
"""

from __future__ import annotations

import base64
import copy
import json
import pathlib
import re

from attention_np.exercises.syllabus import KINDS, LESSONS, Lesson

#: lesson stem -> the id of the cell each of its predict questions names, in the questions' order
PREDICT_CELLS = {
    "01_scaled_dot_product_attention": ("55dfc696", "5a655eda"),
    "02_why_scale_by_sqrt_dk": ("05ca8769",),
    "03_multi_head_attention": ("55aa46d3",),
    "04_backward_passes": ("6ee71573",),
    "05_attention_that_learns": ("c86f81d3",),
    "06_positional_encoding": ("18bf4602",),
    "07_tiling_and_kv_cache": ("051d5129",),
    "08_encoder_decoder": ("e5edf07f",),
    "09_real_model_attention": ("b3ef23a4",),
}
PREDICT_TAG = "predict-then-run"
FOLD_TAG = "hide-output"          # myst-nb: the output folded behind "Show code cell output"


def predict_questions(les: Lesson) -> list:
    """[(question number, question, cell id)] of a lesson's predict questions.

    Raises ValueError when :data:`PREDICT_CELLS` does not give one cell per predict question."""
    questions = [(i, q) for i, q in enumerate(les.questions, 1) if q.kind == "predict"]
    cells = PREDICT_CELLS.get(les.stem, ())
    if len(cells) != len(questions):
        raise ValueError(f"{les.stem} has {len(questions)} predict questions but PREDICT_CELLS names "
                         f"{len(cells)} cells: link each to the cell whose output answers it")
    return [(i, q, cell) for (i, q), cell in zip(questions, cells, strict=True)]


def _cell(nb: dict, cell_id: str, stem: str) -> dict:
    for cell in nb["cells"]:
        if cell.get("id") == cell_id:
            return cell
    raise ValueError(f"{stem} has no cell with id {cell_id!r} (PREDICT_CELLS): was the cell replaced?")


def _tagged(nb: dict, les: Lesson, tag: str, strip: bool) -> dict:
    nb = copy.deepcopy(nb)
    for _, _, cell_id in predict_questions(les):
        cell = _cell(nb, cell_id, les.stem)
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if tag not in tags:
            tags.append(tag)
        if strip:
            cell["outputs"], cell["execution_count"] = [], None
    return nb


NOTE_TAG = "predict-note"
AFTER_TAG = "after-you-ran-it"    # the student copy's folded reading of a predict cell's output
AFTER_SUMMARY = "After you ran it: what the output shows"
HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)


def answer_window(nb: dict, cell_id: str, stem: str = "") -> list:
    """The cells that show or read a predict cell's output: ``[(index, text)]``, the code cells right
    after it (a plot of what it computed; text ``None``), then the markdown up to the next code cell
    or heading (the markdown cell that holds the heading gives the text above it, ``""`` when the
    heading opens it)."""
    cells = nb["cells"]
    start = cells.index(_cell(nb, cell_id, stem))
    window = []
    for i in range(start + 1, len(cells)):
        cell = cells[i]
        if cell["cell_type"] != "markdown":
            if any(text is not None for _, text in window):
                break                                  # a new computation after the reading
            window.append((i, None))
            continue
        text = "".join(cell["source"])
        heading = HEADING.search(text)
        window.append((i, text if heading is None else text[:heading.start()]))
        if heading is not None:
            break
    return window


def _fold(text: str) -> str:
    return f"<details><summary><b>{AFTER_SUMMARY}</b></summary>\n\n{text.strip()}\n\n</details>\n"


def student_lesson(nb: dict, les: Lesson) -> dict:
    """``nb`` without the outputs of the cells its predict questions name (tagged ``predict-then-run``),
    each such cell after a note (tagged ``predict-note``) that names its question, and without the
    answer on the page: what reads the output, up to the next heading (:func:`answer_window`), is
    held back: its prose folded under "After you ran it" (tagged ``after-you-ran-it``; a heading in
    the same cell stays open, the folded text before it in a cell ``after-run-<id>`` of its own), its
    code cells' outputs removed."""
    nb = _tagged(nb, les, PREDICT_TAG, strip=True)
    notes = {cell: number for number, _, cell in predict_questions(les)}
    held = {}                                     # cell index -> prose to fold (None: a code cell)
    for cell_id in notes:
        held.update(answer_window(nb, cell_id, les.stem))
    cells = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("id") in notes:
            text = (f"**Predict first.** Question {notes[cell['id']]} at the end of this lesson asks what "
                    "the next cell prints: write your prediction down, then run it.")
            cells.append({"cell_type": "markdown", "id": f"predict-note-{cell['id']}",
                          "metadata": {"tags": [NOTE_TAG]}, "source": [text]})
        if i in held and held[i] is None:
            cell["outputs"], cell["execution_count"] = [], None
        elif i in held:
            rest = "".join(cell["source"])[len(held[i]):]
            if not rest.strip():                  # all of the cell reads the output: fold it in place
                cell["source"] = [_fold(held[i])]
                cell["metadata"].setdefault("tags", []).append(AFTER_TAG)
            else:                                 # the reading, folded, then the heading in a cell of its own
                if held[i].strip():
                    cells.append({"cell_type": "markdown", "id": f"after-run-{cell['id']}",
                                  "metadata": {"tags": [AFTER_TAG]}, "source": [_fold(held[i])]})
                cell["source"] = rest.splitlines(keepends=True)
        cells.append(cell)
    return {**nb, "cells": cells}


def fold_for_site(nb: dict, les: Lesson) -> dict:
    """``nb`` with the cells its predict questions name tagged ``hide-output`` (folded on the site)."""
    return _tagged(nb, les, FOLD_TAG, strip=False)


def output_text(cell: dict) -> str:
    """The text a cell printed (its streams and the plain text of its results), as one string."""
    parts = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain", "")
        if out.get("data", {}).get("image/png") and not out.get("text"):
            continue                                   # a figure's "<Figure ...>" repr says nothing
        parts.append("".join(text) if isinstance(text, list) else text)
    return "".join(parts)


def _images(cell: dict) -> list:
    return [out["data"]["image/png"] for out in cell.get("outputs", [])
            if out.get("data", {}).get("image/png")]


def predict_outputs_markdown(notebooks: dict, image_dir: str = "predict_outputs") -> tuple:
    """(Markdown, {file name: PNG bytes}): every predict question's cell and the output it prints.

    ``notebooks``: lesson stem -> the committed notebook (a dict)."""
    lines = ["# Predict, then run: the expected outputs", "",
             "The student copies of the lessons (`student/lessons/`) hand out these cells without "
             "their output; here is what each prints (the full lessons are in `lessons/`). "
             "Answers and rubrics: `lesson_answers.md`.", ""]
    images = {}
    for les in LESSONS:
        nb = notebooks[les.stem]
        for number, q, cell_id in predict_questions(les):
            cell = _cell(nb, cell_id, les.stem)
            lines += [f"## Lesson {les.number}, question {number}", "",
                      f"**{KINDS[q.kind]}** {q.text}", "", f"The cell (`{les.stem}.ipynb`, id `{cell_id}`):",
                      "", "```python", "".join(cell["source"]).rstrip(), "```", "", "Its output:", "",
                      "```text", output_text(cell).rstrip(), "```", ""]
            for k, png in enumerate(_images(cell), 1):
                name = f"lesson{les.number}_q{number}_{k}.png"
                images[name] = base64.b64decode("".join(png) if isinstance(png, list) else png)
                lines += [f"![figure {k} of the cell]({image_dir}/{name})", ""]
    return "\n".join(lines), images


DOCS_LINK = re.compile(r"\[([^\]]+)\]\(\.\./docs/[^)\s]*\)")


def kit_links(nb: dict) -> dict:
    """``nb`` with its links made right in the kit's ``lessons/`` folder: an exercise notebook
    (``../exercises/X.ipynb``) is ``../X.ipynb`` there; a page of the course site (``../docs/...``)
    is not in the kit, so the link keeps its text only."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]).replace("](../exercises/", "](../")
            cell["source"] = DOCS_LINK.sub(r"\1", text).splitlines(keepends=True)
    return nb


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def write(root, student: pathlib.Path, solutions: pathlib.Path) -> None:
    """Write ``student/lessons/`` (student copies), ``solutions/lessons/`` (as committed) and
    ``solutions/predict_outputs.md`` from the lessons of ``root/notebooks``."""
    root = pathlib.Path(root)
    notebooks = {les.stem: json.loads((root / "notebooks" / f"{les.stem}.ipynb").read_text(encoding="utf-8"))
                 for les in LESSONS}
    (student / "lessons").mkdir(parents=True)
    (solutions / "lessons").mkdir(parents=True)
    for les in LESSONS:
        nb = kit_links(notebooks[les.stem])
        copy_for_students = _dump(student_lesson(nb, les))
        (student / "lessons" / f"{les.stem}.ipynb").write_text(copy_for_students, encoding="utf-8")
        (solutions / "lessons" / f"{les.stem}.ipynb").write_text(_dump(nb), encoding="utf-8")
    text, images = predict_outputs_markdown(notebooks)
    (solutions / "predict_outputs.md").write_text(text, encoding="utf-8")
    if images:
        (solutions / "predict_outputs").mkdir()
        for name, data in images.items():
            (solutions / "predict_outputs" / name).write_bytes(data)
