"""The extras in pyproject.toml install what the notebooks and commands import."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from attention_np._optional import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")


def _extras() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    return {name: {re.split(r"[<>=!\[ ]", req)[0] for req in reqs} for name, reqs in extras.items()}


def _imports(notebook: Path) -> set:
    cells = json.loads(notebook.read_text())["cells"]
    found = set()
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_the_notebooks_extra_installs_every_import_of_every_notebook(notebook):
    third_party = _imports(notebook) - set(sys.stdlib_module_names) - {"numpy", "attention_np"}
    extras = _extras()
    # notebook 09 imports safetensors and tokenizers through attention_np.pretrained
    needs = third_party | (extras["pretrained"] if notebook.name.startswith("07") else set())
    missing = needs - extras["notebooks"]
    assert not missing, f"{notebook.name} imports {sorted(missing)}, not in the [notebooks] extra"


def test_every_extra_named_in_an_install_hint_exists():
    extras = _extras()
    for module, extra in EXTRA_OF.items():
        assert extra in extras and module in extras[extra], (module, extra)
