"""docs/mutation.md's references hold: the line ranges it quotes are the ranges a recorded run
mutated, the names it gives those ranges exist in today's module, and the modules and test files
it says the measured code and the survivors' tests live in exist (and the old survivor files do
not)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "mutation.md").read_text()
RESULTS = {p.name: json.loads(p.read_text()) for p in (ROOT / "tools" / "mutation").glob("*.json")
           if p.name != "equivalent.json"}


def _section(heading: str) -> str:
    return PAGE.split(heading, 1)[1].split("\n## ", 1)[0]


def _table_cells(section: str, column: int) -> list[str]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]
    return [row[column] for row in rows[2:]]                  # no header, no separator


def test_every_quoted_line_range_is_the_range_a_recorded_run_mutated():
    """``--lines A-B`` and "lines A-B at COMMIT" name lines of the source the run mutated (today's
    module has moved on): each must be a ``--lines`` recorded in a result file of that module,
    and every mutant recorded there must lie in it."""
    quoted = set(re.findall(r"--lines (\d+)-(\d+)", PAGE)) | set(
        re.findall(r"lines (\d+)-(\d+) (?:at|of the source at) [0-9a-f]{7}", PAGE))
    assert quoted, "the page quotes no line range any more: drop this test"
    for lo, hi in quoted:
        runs = [(name, data) for name, data in RESULTS.items()
                if any(f"--lines {lo}-{hi}" in run for run in data.get("runs", []))]
        assert runs, f"no result file records a run with --lines {lo}-{hi}"
        for name, data in runs:
            lines = {m["line"] for m in data["mutants"].values()}
            assert lines and min(lines) >= int(lo) and max(lines) <= int(hi), name


def test_the_names_given_to_the_lazy_shift_range_exist_in_todays_module():
    """The page names the region of kernels/tiled_forward.py its run mutated by its functions and
    class, not by today's line numbers (which every edit moves): those names must still exist."""
    section = _section("## The 0.2 kernels' fast lane")
    source = (ROOT / "attention_np" / "kernels" / "tiled_forward.py").read_text()
    defined = {n.name for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for name in ("forward_tiles", "LazyShift"):
        assert f"`{name}`" in section
        assert name in defined, f"kernels/tiled_forward.py has no {name} any more: update docs/mutation.md"


def test_where_the_measured_modules_live_now_exists():
    cells = _table_cells(_section("# Mutation testing"), 1)
    paths = [p for cell in cells for p in re.findall(r"`([a-z_/]+\.py)`", cell)]
    assert len(paths) >= 15
    for path in paths:
        assert (ROOT / "attention_np" / path).is_file(), path


def test_where_the_survivors_tests_live_now_exists_and_the_old_files_are_gone():
    cells = _table_cells(_section("## Where the tests that kill survivors go"), 1)
    folder = None
    named = []
    for cell in cells:
        for path in re.findall(r"`([\w/]+\.py)`", cell):
            if "/" in path:
                folder = path.rsplit("/", 1)[0]
            named.append(path if "/" in path else f"{folder}/{path}")
    assert len(named) >= 14
    for path in named:
        text = " ".join((ROOT / path).read_text().lower().split())
        assert "found by mutation testing" in text, path
    for old in ("tests/test_mutation_survivors.py", "tests/test_mutation_survivors_split.py"):
        assert not (ROOT / old).exists(), f"{old} is back: its tests belong in their modules' files"
