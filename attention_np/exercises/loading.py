"""Load a student's function from a ``.py`` file or a notebook, with a one-line message for
everything that can go wrong (no traceback).

Standard library only, no import of ``attention_np``: the course build copies this file into the
student kit and the autograder.
"""

from __future__ import annotations

import ast
import json
import pathlib
import types

#: notebook cells with these tags are left out (they call the checker, not the student's code)
SKIPPED_TAGS = ("check", "setup")


class CannotRun(Exception):
    """A submission that cannot be run: the message says what to do (one line)."""


def notebook_source(path) -> str:
    """The code cells of a notebook, joined, without the check and setup cells and without
    IPython's ``%magic`` and ``!shell`` lines."""
    try:
        nb = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CannotRun(f"{path} is not a readable notebook ({type(e).__name__}); save your "
                        "functions in a .py file instead") from None
    chunks = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        if any(t in cell.get("metadata", {}).get("tags", []) for t in SKIPPED_TAGS):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        lines = [("pass  # " + line) if line.lstrip().startswith(("%", "!")) else line
                 for line in src.splitlines()]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def source_of(path) -> str:
    """The Python source of a ``.py`` file or of a notebook's code cells."""
    p = pathlib.Path(path)
    if not p.is_file():
        raise CannotRun(f"{path}: no such file")
    if p.suffix == ".ipynb":
        return notebook_source(p)
    if p.suffix != ".py":
        raise CannotRun(f"{path} is not a .py file or a notebook (.ipynb): save your function in a "
                        ".py file and check that")
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CannotRun(f"{path} cannot be read as text ({type(e).__name__})") from None


def defines(source: str, name: str) -> bool:
    """Does ``source`` define a top-level function or name ``name`` (without running it)?"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name) == name for a in node.names):
            return True
    return False


def load_function(path, name: str, signature: str | None = None):
    """``name`` from the file at ``path`` (.py or .ipynb), run as a fresh module.

    Raises :class:`CannotRun` with a one-line message for a missing file, another file type, a
    syntax error, an error while the file runs (an import that fails, code at the top level) or a
    missing function.
    """
    source = source_of(path)
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        where = f"line {e.lineno}" if e.lineno else "somewhere"
        what = "a notebook cell" if str(path).endswith(".ipynb") else str(path)
        raise CannotRun(f"{what} has a syntax error at {where}: {e.msg}; fix it and check "
                        "again") from None
    module = types.ModuleType("student_solution")
    module.__file__ = str(path)
    module.check = lambda *args, **kwargs: None     # a notebook's own check calls are no-ops here
    try:
        exec(code, module.__dict__)                 # noqa: S102 - the student's own file
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as e:      # noqa: BLE001 - SystemExit too: report, never a traceback
        raise CannotRun(f"{path} raised {type(e).__name__}: {e} while it was loaded (before any "
                        "check ran); the checker needs NumPy alone: remove other imports and "
                        "top-level code that fails") from None
    fn = module.__dict__.get(name)
    if not callable(fn):
        want = f" (expected {signature})" if signature else ""
        raise CannotRun(f"{path} defines no function {name!r}{want}")
    return fn
