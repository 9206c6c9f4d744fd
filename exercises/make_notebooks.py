"""Regenerate the student notebooks in exercises/ (stubs, no solutions), then execute them.

    python exercises/make_notebooks.py

The notebooks' content (titles, lesson links, hints, each stub's contract, the written
questions) lives in :mod:`attention_np.exercises.notebooks`; ``python -m attention_np course
build OUT`` writes the same notebooks for a course (checked by the kit's NumPy-only check.py),
with solution notebooks beside them. Each stub cell is tagged ``stub`` with
``metadata.exercise``; tests/course/test_exercise_notebooks.py replaces it with the library's solution.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

import attention_np.exercises as ex
from attention_np.exercises.notebooks import NOTEBOOKS, notebook

HERE = Path(__file__).resolve().parent


def main() -> None:
    signatures = {name: e.signature for name, e in ex.EXERCISES.items()}
    papers = {name: e.paper for name, e in ex.EXERCISES.items()}
    for stem in NOTEBOOKS:
        nb = nbformat.from_dict(notebook(stem, "repo", signatures, papers))
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(HERE)}}).execute()
        nbformat.write(nb, HERE / f"{stem}.ipynb")
        print("wrote", HERE / f"{stem}.ipynb")


if __name__ == "__main__":
    main()
