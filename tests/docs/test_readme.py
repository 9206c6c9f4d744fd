"""Every ```python block in README.md and docs/*.md runs as written (blocks of one file share a namespace)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


# ---- shell blocks: what a reader pastes into a terminal
SHELL_DOCS = [*DOCS, ROOT / "CONTRIBUTING.md"]
COMMANDS_ALLOWED = {"pip", "python", "bash", "ruff", "lint-imports", "jupyter", "cd", "sphinx-build"}


def shell_commands(path):
    """(block, simple commands) of every ```bash block: comments dropped, split at && ; | and lines."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
        text = re.sub(r"(^|\s)#.*$", "", block, flags=re.M).replace("\\\n", " ")
        out.append((block, [c.strip() for c in re.split(r"&&|;|\||\n", text) if c.strip()]))
    return out


@pytest.mark.parametrize("path", [p for p in SHELL_DOCS if shell_commands(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_blocks_paste_into_a_shell(path):
    """Each ```bash block is valid shell (bash -n), every command in it is a program a reader has,
    and every `python -m attention_np ...` parses with the real command line (a usage synopsis
    with [a|b] belongs in a ```text block: pasted, its | would start pipes)."""
    import shlex
    import subprocess

    from attention_np.cli import build_parser
    parser, _, _ = build_parser()
    parser.exit = lambda status=0, message=None: pytest.fail(f"{path.name}: {message}")   # no SystemExit
    for block, commands in shell_commands(path):
        r = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert r.returncode == 0, f"{path.name}: not valid shell: {r.stderr}\n{block}"
        for command in commands:
            words = shlex.split(command)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):    # VAR=value cmd
                words = words[1:]
            if words[:2] == ["nice", "-n"]:                                     # nice -n 10 cmd
                words = words[3:]
            assert words and words[0] in COMMANDS_ALLOWED, f"{path.name}: {command!r} in\n{block}"
            if words[:3] == ["python", "-m", "attention_np"] and "--help" not in words:
                argv = words[3:]
                if argv and argv[0] in ("check", "course"):
                    continue                 # their positional arguments name the reader's own files
                parser.parse_args(argv or ["tour"])


def test_the_readme_test_command_is_what_ci_runs():
    """The README's test command is a line of .ci/run, exactly; CONTRIBUTING's "what CI runs" line
    is its pytest part; and the test extra installs pytest-xdist, which its ``-n``/``--dist`` need."""
    import tomllib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command, = [line for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
                for line in block.splitlines() if 'pip install -e ".[test]"' in line]
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    pytest_part = command.rsplit(" && ", 1)[1]
    assert pytest_part.startswith("python -m pytest -n auto --dist loadfile"), command
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert f"\n{pytest_part}   # everything, notebooks included: what CI runs\n" in contributing
    with open(ROOT / "pyproject.toml", "rb") as f:
        test_extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!\[ ]", req)[0] == "pytest-xdist" for req in test_extra), test_extra
