"""The extras in pyproject.toml install what the notebooks and commands import."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from attention_np._optional import EXTRA_OF

ROOT = Path(__file__).resolve().parents[2]
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


def test_license_and_citation_agree_with_pyproject():
    # a project people teach and cite from ships its license text and a CITATION.cff that says
    # the version and license pyproject.toml declares
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith(f"{project['license']['text']} License\n")
    assert "Permission is hereby granted, free of charge" in license_text
    fields = dict(re.findall(r"^(cff-version|version|license): \"?([^\"\n]+)\"?$",
                             (ROOT / "CITATION.cff").read_text(), re.M))
    assert fields == {"cff-version": "1.2.0", "version": project["version"],
                      "license": project["license"]["text"]}
    assert "arXiv:1706.03762" in (ROOT / "CITATION.cff").read_text()
