"""The student notebooks in exercises/: committed without solutions, and each check cell reports
success when the stub cells are replaced by the library's own solutions (CI runs them all)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers import require

# a busy machine can take more than nbclient's 60 s default to start a kernel
STARTUP_S = 300
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "exercises").glob("*.ipynb"))


def _cells(nb, tag):
    return [c for c in nb.cells if tag in c.metadata.get("tags", [])]


def test_every_exercise_has_a_notebook():
    nbformat = require("nbformat")
    import attention_np.exercises as ex
    covered = [c.metadata["exercise"] for p in NOTEBOOKS
               for c in _cells(nbformat.read(p, as_version=4), "stub")]
    assert sorted(covered) == sorted(ex.EXERCISES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_notebook_has_no_solution(path):
    nbformat = require("nbformat")
    nb = nbformat.read(path, as_version=4)
    stubs, checks = _cells(nb, "stub"), _cells(nb, "check")
    assert stubs and len(stubs) == len(checks)
    for cell in stubs:
        assert cell.source.rstrip().endswith("raise NotImplementedError  # your code here")
    for cell in checks:                      # committed executed: the stub's honest report
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.startswith("FAILED: not implemented yet"), text


def test_notebooks_pass_with_the_reference_solution(monkeypatch):
    # Every notebook, its stub cells replaced by the library's solutions, run in ONE kernel
    # (a kernel start costs seconds on a loaded 2-core machine; the notebooks share no names
    # that matter: each check cell checks the function defined just above it).
    nbformat = require("nbformat")
    nbclient = require("nbclient")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    cells = []
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            if "stub" in cell.metadata.get("tags", []):
                name = cell.metadata["exercise"]
                cell.source = (f"from attention_np.exercises import function_name, reference\n"
                               f"globals()[function_name({name!r})] = reference({name!r})")
            cell.metadata["notebook"] = path.name
            cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", startup_timeout=STARTUP_S,
                            resources={"metadata": {"path": str(ROOT / "exercises")}}).execute()
    checks = _cells(nb, "check")
    import attention_np.exercises as ex
    assert sorted(c.metadata["exercise"] for c in checks) == sorted(ex.EXERCISES)
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.startswith(f"PASSED: {cell.metadata['exercise']},"), (cell.metadata["notebook"], text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_links_its_lesson_and_has_answer_cells(path):
    nbformat = require("nbformat")
    nb = nbformat.read(path, as_version=4)
    links = re.findall(r"\(\.\./notebooks/([^)]+\.ipynb)\)", nb.cells[0].source)
    assert links and all((ROOT / "notebooks" / link).is_file() for link in links), links
    questions, answers = _cells(nb, "question"), _cells(nb, "answer")
    assert len(questions) == len(answers) >= 2
    assert all(c.source == "*Your answer here.*" for c in answers)


def test_solution_notebooks_pass_every_check(tmp_path):
    # the course build's solution notebooks, run with the kit's checker (NumPy alone)
    nbformat = require("nbformat")
    nbclient = require("nbclient")
    from attention_np.exercises import course_kit
    out = course_kit.build(tmp_path / "course")["solutions"]
    cells = []
    for path in sorted(out.glob("*.ipynb")):
        cells += [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    nb = nbformat.v4.new_notebook(cells=cells)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", startup_timeout=STARTUP_S,
                            resources={"metadata": {"path": str(out)}}).execute()
    checks = _cells(nb, "check")
    assert len(checks) == 13
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.startswith(f"PASSED: {cell.metadata['exercise']},"), text
