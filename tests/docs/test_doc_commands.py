"""Every command of a ```bash block in README.md, CONTRIBUTING.md and docs/*.md runs as pasted.

Each command is one of three kinds, and :func:`kind` says which (a new command must fit one):

- **run here**, from the root of this checkout, as pasted; a long one with a smaller value of the
  budget it offers itself (:data:`BUDGETS`: ``--budget``, ``--steps``), and an output folder of its
  own (``--out``, ``course build OUT``) in a scratch folder;
- **what CI runs**: installs, the suite, lint, the site build: ``.ci/run`` runs that command (the
  test reads it there), or, for ``pip install -e ".[X]"``, X is an extra of pyproject.toml;
- **covered**: a command that takes minutes and has no budget (the diff of every case), run by the
  test file named in :data:`COVERED`, which must hold its arguments; or one that names the
  reader's own files (:data:`READERS_OWN`).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.docs.test_readme import SHELL_DOCS, shell_commands

ROOT = Path(__file__).resolve().parents[2]
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
with open(ROOT / "pyproject.toml", "rb") as _f:
    EXTRAS = set(tomllib.load(_f)["project"]["optional-dependencies"])

#: an option that bounds a command's time -> the value the test runs it with
BUDGETS = {"--budget": "5", "--steps": "40"}     # train: and --target 0 (its exit status, for 40 steps)
#: commands that run for minutes with no budget option -> the test file that runs the same call
COVERED = {"python -m attention_np diff": "tests/cli/test_diff.py",
           "python -m attention_np diff --framework all --dtype all --seed 0": "tests/cli/test_diff.py"}
#: commands that act on the reader's own files (a solution, a Gradescope folder)
READERS_OWN = ("python check.py ", "AUTOGRADER_ROOT=")
#: programs whose commands are what CI runs
CI_PROGRAMS = ("pip", "ruff", "lint-imports", "bash docs/build.sh", "python -m pytest", "ATTENTION_NP_SITE=",
               "NPY_DISABLE_CPU_FEATURES=")


def _commands():
    seen = {}
    for path in SHELL_DOCS:
        for _, commands in shell_commands(path):
            for command in commands:
                seen.setdefault(" ".join(command.split()), path.relative_to(ROOT).as_posix())
    return seen


COMMANDS = _commands()


def kind(command: str) -> str:
    if command in COVERED:
        return "covered"
    if command.startswith(READERS_OWN):
        return "reader's own"
    if command.startswith(CI_PROGRAMS):
        return "ci"
    return "run"


def _ci_text() -> str:
    """.ci/run without comments, its $off spelled out, whitespace collapsed."""
    text = re.sub(r"(^|\s)#.*$", "", CI, flags=re.M)
    off, = re.findall(r'^off="([^"]*)"', text, flags=re.M)
    return " ".join(text.replace('"$off"', f'"{off}"').split())


def test_every_command_has_a_kind_and_each_kind_is_used():
    kinds = {c: kind(c) for c in COMMANDS}
    assert set(kinds.values()) == {"run", "ci", "covered", "reader's own"}, kinds


@pytest.mark.parametrize("command", [c for c in COMMANDS if kind(c) == "ci"])
def test_what_ci_runs(command):
    m = re.fullmatch(r'pip install -e "?\.(?:\[(\w+)\])?"?', command)
    if m:                                # an extra this checkout defines (CI installs test, docs, lint)
        assert m.group(1) is None or m.group(1) in EXTRAS, command
        return
    ci = _ci_text()
    if command == "python -m pytest tests/kernels/test_sdpa.py":     # one file of the suite CI runs
        assert "python -m pytest -n auto --dist loadfile" in ci and (ROOT / command.split()[-1]).is_file()
    else:                                        # CI adds -q (and -rs) to what a reader types
        forms = {command, command.replace("python -m pytest ", "python -m pytest -q "),
                 command.replace(" -q", "").replace("python -m pytest ", "python -m pytest -q -rs "),
                 command.replace("pip install -e", "pip install -q -e")}
        assert any(f in ci for f in forms), f"{COMMANDS[command]}: {command!r} is not a command of .ci/run"


@pytest.mark.parametrize("command", [c for c in COMMANDS if kind(c) == "covered"])
def test_long_commands_are_run_by_a_test(command):
    test = (ROOT / COVERED[command]).read_text(encoding="utf-8")
    missing = [a for a in shlex.split(command)[3:] if f'"{a}"' not in test]
    assert not missing, (command, COVERED[command], missing)


def _as_run(command: str, scratch: Path) -> list:
    words = shlex.split(command)
    for i, w in enumerate(words[:-1]):
        if w in BUDGETS:
            words[i + 1] = BUDGETS[w]
        if w == "--out" and words[:3] == ["python", "-m", "attention_np"]:
            words[i + 1] = str(scratch / "out")
    if words[3:5] == ["course", "build"]:
        words[5] = str(scratch / words[5])
    if words[:4] == ["python", "-m", "attention_np", "train"] and "--help" not in words:
        if "--steps" not in words:
            words += ["--steps", BUDGETS["--steps"]]
        words += ["--target", "0"]        # 40 steps do not reach 99 %: the exit status says so otherwise
    return [sys.executable if w == "python" else w for w in words]


@pytest.mark.parametrize("command", [c for c in COMMANDS if kind(c) == "run"])
def test_the_command_runs_as_pasted(command, tmp_path):
    argv = _as_run(command, tmp_path)
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if "{" in command:                           # brace expansion: bash's, as a reader's shell does it
        argv = ["bash", "-c", shlex.join(argv).replace("'", "")]
    if "tools/mutate.py" in command and "--report" in command and "/tmp/" in command:
        # the README's report of the run above it: make that run first, as the reader did
        run, = [c for c in COMMANDS if "tools/mutate.py" in c and "--out /tmp/" in c]
        subprocess.run(_as_run(run, tmp_path), cwd=ROOT, env=env, capture_output=True, timeout=600,
                       check=True)
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{COMMANDS[command]}: {command}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    assert "Traceback" not in r.stderr, r.stderr[-1500:]
