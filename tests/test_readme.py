"""Every ```python block in README.md and docs/*.md runs as written (blocks of one file share a namespace)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(path, monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {}
    for i, block in enumerate(python_blocks(path)):
        try:
            exec(compile(block, f"{path.name} block {i + 1}", "exec"), namespace)
        except Exception as e:  # name the block in the failure
            pytest.fail(f"{path.name} python block {i + 1} failed: {e!r}\n{block}")
