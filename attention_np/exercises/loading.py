"""Load a student's function from a ``.py`` file or a notebook, with a one-line message for
everything that can go wrong (no traceback).

Standard library only, no import of ``attention_np``: the course build copies this file into the
student kit and the autograder.
"""

from __future__ import annotations

import ast
import contextlib
import json
import pathlib
import re
import sys
import types

#: notebook cells with these tags are left out: they call the checker, not the student's code (the
#: setup cell stays: it imports what the solutions use, and its `from check import check` is a stand-in)
SKIPPED_TAGS = ("check",)

#: the modules of the student kit a submission may import (``from check import check``): while a
#: file is loaded for checking or grading they are stand-ins whose ``check`` does nothing
STAND_INS = ("check",)


class CannotRun(Exception):
    """A submission that cannot be run: the message says what to do (one line)."""


def notebook_source(path) -> str:
    """The code cells of a notebook, joined, without the check cells and without IPython's
    ``%magic`` and ``!shell`` lines (the setup cell kept: its imports are the solutions')."""
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


def last_binding(source: str, name: str):
    """The last top-level statement of ``source`` that binds ``name`` (a ``def``, an assignment,
    an import), without running it; None if there is none or the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                  for t in node.targets):
            found = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name) == name for a in node.names):
            found = node
    return found


def defines(source: str, name: str) -> bool:
    """Does ``source`` define a top-level function or name ``name`` (without running it)?"""
    return last_binding(source, name) is not None


def is_home(path, exercise: str, function: str) -> bool:
    """Is ``path`` the exercise's own file: a notebook with a cell of that exercise (the kit marks
    its stub and check cells with ``"exercise"`` in their metadata) or a check cell calling
    ``check("<exercise>", ...)``, or a ``.py`` file named for the exercise or its function? A
    function the student also defines elsewhere (``attention`` again beside their
    ``mha_forward``) is a helper there; the grader grades it in its home."""
    p = pathlib.Path(path)
    if p.suffix != ".ipynb":
        return p.stem in (exercise, function)
    try:
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    call = re.compile(r"""check\(\s*["']""" + re.escape(exercise) + r"""["']""")
    for cell in cells:
        meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
        src = cell.get("source", "") if isinstance(cell, dict) else ""
        src = "".join(src) if isinstance(src, list) else str(src)
        if meta.get("exercise") == exercise or ("check" in meta.get("tags", []) and call.search(src)):
            return True
    return False


def is_stub(node) -> bool:
    """Is ``node`` a ``def`` whose body is a docstring (or nothing) and ``raise
    NotImplementedError``: the exercise's stub, untouched?"""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def skipped_check(*args, **kwargs) -> str:
    """The kit's ``check`` while a file is loaded by the checker or the grader: it does nothing
    (the file is being checked already) and says so if printed."""
    return "(check skipped: this file is being checked)"


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name, "The student kit's check, a no-op while a file is loaded.")
    module.check = skipped_check
    return module


def load_function(path, name: str, signature: str | None = None):
    """``name`` from the file at ``path`` (.py or .ipynb), run as a fresh module.

    While the file runs, ``import check`` and ``from check import check`` (a notebook's setup
    line, kept in a ``.py``) give a stand-in whose ``check`` does nothing, so a file behaves the
    same in the student kit, in the library and in the autograder (which has no ``check.py``).
    What the file prints while it loads goes to stderr: stdout is the checker's.

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
    module.check = skipped_check                    # a notebook's own check calls are no-ops here
    saved = {kit: sys.modules.get(kit) for kit in STAND_INS}
    for kit in STAND_INS:                           # ``from check import check`` finds the stand-in
        sys.modules[kit] = _stand_in(kit)
    try:
        with contextlib.redirect_stdout(sys.stderr):   # stdout is the checker's message
            exec(code, module.__dict__)             # noqa: S102 - the student's own file
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as e:      # noqa: BLE001 - SystemExit too: report, never a traceback
        raise CannotRun(f"{path} raised {type(e).__name__}: {e} while it was loaded (before any "
                        "check ran); the checker needs NumPy alone: remove other imports and "
                        "top-level code that fails") from None
    finally:
        for kit, mod in saved.items():
            if mod is None:
                sys.modules.pop(kit, None)
            else:
                sys.modules[kit] = mod
    fn = module.__dict__.get(name)
    if not callable(fn):
        want = f" (expected {signature})" if signature else ""
        raise CannotRun(f"{path} defines no function {name!r}{want}")
    return fn
