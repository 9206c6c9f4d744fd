"""What the product says stands on its own: no issue numbers (a reader of the package, the docs,
the lessons or the tests cannot look them up; say what the thing is instead; CHANGELOG.md may cite
them), and no reference to a module, or a file of the repository, that does not exist."""

from __future__ import annotations

import functools
import importlib
import json
import re
import subprocess
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".py", ".md", ".ipynb", ".rst", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".html", ".js",
        ".css", ".sh", ".cff")


def _tracked(*paths: str) -> list[Path]:
    """The repository's files under ``paths`` (git's list when there is one, else a walk)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              *paths], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        files = [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = [f for p in paths for f in ([ROOT / p] if (ROOT / p).is_file() else (ROOT / p).rglob("*"))]
    # tools/mutation/*.json: records of past runs, with the paths and names of their day
    return [f for f in files if f.is_file() and f.suffix in TEXT and f.parent.name != "mutation"]


@functools.cache
def _read(path: Path) -> str:
    """The text a reader reads: a notebook's cells (not its outputs, which its code prints)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
    return text


PRODUCT = _tracked("attention_np", "docs", "notebooks", "tests", "benchmarks", "tools", "README.md",
                   "CONTRIBUTING.md", "pyproject.toml")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_no_issue_numbers_outside_the_changelog():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}"
             for p in PRODUCT if p.name != "CHANGELOG.md" and "ssue" in _read(p)          # (fast)
             for i, line in enumerate(_read(p).splitlines(), 1) if ISSUE.search(line)]
    assert found == [], "say what the thing is instead of its issue number:\n" + "\n".join(found)


def test_the_issue_pattern_sees_what_it_should():
    n = 14                                     # (not written out: this file is searched too)
    for text in (f"(issue {n})", f"issue {n}'s", f"Issue {n} split", f"issues {n} and 26",
                 f"issue #{n}"):
        assert ISSUE.search(text), text
    for text in ("the issue's scale", "issues found", "tissue 3"):
        assert not ISSUE.search(text), text


def _resolves(dotted: str) -> bool:
    """``attention_np.a.b.c``: the longest importable prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


DOTTED = re.compile(r"attention_np(?:\.[A-Za-z_]\w*)+")
PLACEHOLDER = re.compile(r"(^|\.)([A-Z]|[A-Z][A-Z_]*NAME|unknown_\w+)(\.|$)")   # attention_np.X, ...


def test_every_dotted_name_in_the_package_docs_and_lessons_exists():
    """``attention_np.exercises.bank`` (say) in a docstring, a doc or a lesson names a module
    that exists, or an attribute of one."""
    names = {}
    for p in PRODUCT:
        if p.parts[len(ROOT.parts)] in ("attention_np", "docs", "notebooks") or p.name == "README.md":
            for name in DOTTED.findall(_read(p)):
                names.setdefault(name, p.relative_to(ROOT))
    dead = sorted(f"{name} (in {where})" for name, where in names.items()
                  if not PLACEHOLDER.search(name) and not _resolves(name))
    assert len(names) > 100
    assert dead == []


EXTENSION = re.compile(r"\.(?:py|md|ipynb|json)\b")
PATH = re.compile(r"(?<![\w/.-])((?:attention_np|tests|docs|benchmarks|tools|notebooks)/[\w/*.-]+)$")


def _paths(text: str) -> set[str]:
    """The repository paths in ``text``: found from their extensions (a fast literal search), then
    read backwards (a regex run over the whole text would take seconds)."""
    found = set()
    for ext in EXTENSION.finditer(text):
        before = PATH.search(text[max(0, ext.start() - 200):ext.start()])
        if before:
            found.add(before.group(1) + ext.group(0))
    return found
# historical or external paths, each named as such where it appears
NOT_OURS = {
    "docs/specs.md",                                    # Gradescope's autograder_samples repository
    "tests/test_mutation_survivors.py",                 # the old survivor files, held absent by
    "tests/test_mutation_survivors_split.py",           # tests/docs/test_mutation_page.py
}


def test_every_repository_path_named_in_the_product_exists():
    """A path such as ``kernels/tiled_forward.py`` or ``tests/kernels/test_tiled.py`` named in code,
    docs, lessons or tests exists (``NN_*`` and ``NAME`` stand for any; docs/mutation.md records
    the paths of the runs it reports and has its own test)."""
    dead = []
    for p in PRODUCT:
        rel = p.relative_to(ROOT).as_posix()
        if rel in ("docs/mutation.md", "tools/mutate.py"):
            continue
        for path in _paths(_read(p)):
            if path in NOT_OURS or re.search(r"NAME|NN_|/X\.py", path):
                continue
            if not (list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                dead.append(f"{path} (in {rel})")
    assert sorted(dead) == []
