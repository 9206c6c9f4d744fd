"""A small AST mutation tester: does the test suite notice when the code is changed?

Each mutant changes one thing in one module: swaps an operator (+ -, * /, < <=, == !=, and or),
changes a constant (n -> n + 1, True -> False), deletes a statement or a ``raise`` (-> ``pass``),
or drops a keyword argument from a call. The package and tests are copied to a temporary
directory; each mutant is written there and the given test files run with ``pytest -x -q``.
A mutant the tests pass on *survives*: either the tests miss a real change, or the mutant is
equivalent (changes nothing observable), which only reading it can tell.

    python tools/mutate.py attention_np/paper/masks.py tests/paper/test_masks.py [more tests]
        [--out tools/mutation/masks.json] [--only-survivors] [--budget SECONDS]
        [--timeout SECONDS] [--lines A-B]
    python tools/mutate.py --report tools/mutation/*.json

Speed: NumPy, pytest, hypothesis (and torch, if a test file names it) are imported once; each
mutant runs in a forked child that imports the mutated package fresh from the copy (no
bytecode is written, so no stale ``.pyc`` can stand in for a mutant) and calls ``pytest.main``.
Hypothesis runs with a derandomized 10-example profile, so a rerun gives the same verdicts.

``--out`` records every mutant's verdict in a JSON file (key: index, line, change) and resumes
from it: mutants already recorded for the same module source are not run again, so a run can
be split over several sittings (``--budget``). ``--only-survivors`` re-runs the recorded
survivors only (after new tests were added) and keeps their first verdict as ``before``.
``--report`` prints the before/after table; survivors listed in ``equivalent.json`` beside the
result files (``"MODULE:LINE: CHANGE": "reason"``) are left out of the score over
non-equivalent mutants.

Where the tests for survivors go: a test that kills a real survivor goes in the test file of the
module it tests (``attention_np/kernels/tiles.py`` -> ``tests/kernels/``, beside that module's other
tests; the test folders mirror the package), never in a file of its own for mutation-found cases.
Its docstring's first line says, in words, what mutant it kills ("Kills ``<`` -> ``<=`` in the
window's left edge"), not the line number, which the next edit of the module makes stale. An
equivalent survivor gets its reason in ``equivalent.json`` instead (docs/mutation.md).
"""

from __future__ import annotations

import argparse
import ast
import copy
import gc
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
            ast.MatMult: ast.Mult, ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
            ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
            ast.In: ast.NotIn, ast.NotIn: ast.In}
SWAP_BOOL = {ast.And: ast.Or, ast.Or: ast.And}


def _in_docstring(node, parents) -> bool:
    p = parents.get(node)
    return isinstance(p, ast.Expr) and isinstance(node, ast.Constant) and isinstance(node.value, str)


def mutants(tree: ast.Module):
    """Yield ``(description, lineno, mutated_tree)`` for every simple mutation of ``tree``."""
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    nodes = list(ast.walk(tree))
    for i, node in enumerate(nodes):
        changes = []
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAP_BIN:
            changes.append((f"{type(node.op).__name__} -> {SWAP_BIN[type(node.op)].__name__}",
                            lambda n: setattr(n, "op", SWAP_BIN[type(n.op)]())))
        if isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                if type(op) in SWAP_CMP:
                    def f(n, j=j):
                        n.ops[j] = SWAP_CMP[type(n.ops[j])]()
                    changes.append((f"{type(op).__name__} -> {SWAP_CMP[type(op)].__name__}", f))
        if isinstance(node, ast.BoolOp):
            changes.append((f"{type(node.op).__name__} -> {SWAP_BOOL[type(node.op)].__name__}",
                            lambda n: setattr(n, "op", SWAP_BOOL[type(n.op)]())))
        if isinstance(node, ast.Constant) and not _in_docstring(node, parents):
            v = node.value
            if isinstance(v, bool):
                changes.append((f"{v} -> {not v}", lambda n: setattr(n, "value", not n.value)))
            elif isinstance(v, (int, float)):
                changes.append((f"{v!r} -> {v + 1!r}", lambda n: setattr(n, "value", n.value + 1)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            changes.append(("drop unary -", None))
        if isinstance(node, ast.Call):
            for j, kw in enumerate(node.keywords):
                if kw.arg is not None:
                    def f(n, j=j):
                        del n.keywords[j]
                    changes.append((f"drop keyword {kw.arg}=", f))
        if isinstance(node, (ast.Raise, ast.Assign, ast.AugAssign, ast.Expr, ast.Return)) \
                and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            changes.append((f"delete {type(node).__name__}", "delete"))
        for desc, change in changes:
            t = copy.deepcopy(tree)
            target = list(ast.walk(t))[i]
            if change == "delete":
                _replace(t, target, ast.Pass())
            elif change is None:                          # drop unary minus
                _replace(t, target, target.operand)
            else:
                change(target)
            yield desc, getattr(node, "lineno", 0), ast.fix_missing_locations(t)


def _replace(tree, old, new):
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list) and old in value:
                value[value.index(old)] = ast.copy_location(new, old)
                return
            if value is old:
                setattr(parent, field, ast.copy_location(new, old))
                return


PROFILE = "mutation"
# No plugin autoload (entry-point scans), only hypothesis's; no gc-heavy unraisable-exception hook.
PYTEST_OPTS = ["-p", "_hypothesis_pytestplugin", "-p", "no:unraisableexception",
               "-p", "no:threadexception"]


def _preload(tests):
    """Import the slow third-party modules once, in the parent, so each fork starts warm."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    from hypothesis import settings
    settings.register_profile(PROFILE, deadline=None, derandomize=True, max_examples=10,
                              database=None)
    if any("torch" in Path(t).read_text() for t in tests):
        import torch  # noqa: F401
    with tempfile.TemporaryDirectory() as empty:           # import pytest's own modules once
        fd, keep = os.open(os.devnull, os.O_WRONLY), os.dup(1)
        os.dup2(fd, 1)
        try:
            pytest.main(["-q", "-p", "no:cacheprovider", *PYTEST_OPTS, empty])
        finally:
            os.dup2(keep, 1)
    gc.freeze()                   # the children's gc passes skip (and do not copy) the parent's objects


def _run_forked(tmp: str, tests, timeout: float) -> bool:
    """Run the tests on the copy in a forked child; ``True`` if they pass (the mutant survives)."""
    import pytest
    pid = os.fork()
    if pid == 0:                                           # the child: never returns
        try:
            os.chdir(tmp)
            sys.path.insert(0, tmp)
            sys.dont_write_bytecode = True
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", *PYTEST_OPTS,
                                f"--hypothesis-profile={PROFILE}", *tests])
            os._exit(int(code))
        except BaseException:
            os._exit(99)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:                    # a hang counts as killed
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.02)


def _run_subprocess(tmp: str, tests, timeout: float) -> bool:
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                           cwd=tmp, capture_output=True, timeout=timeout,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def _load(out):
    if out and Path(out).exists():
        return json.loads(Path(out).read_text())
    return None


def _save(out, data):
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(data, indent=1) + "\n")


EQUIVALENT = "equivalent.json"


def _with_equivalents(path):
    """A result file, its survivors marked from ``equivalent.json`` beside it:
    ``{"attention_np/core/softmax.py:30: 0 -> 1": "why nothing observable changes", ...}``."""
    data = json.loads(Path(path).read_text())
    eq_file = Path(path).with_name(EQUIVALENT)
    reasons = json.loads(eq_file.read_text()) if eq_file.exists() else {}
    for m in data["mutants"].values():
        why = reasons.get(f"{data['module']}:{m['line']}: {m['desc']}")
        if why and m["status"] == "survived":
            m["equivalent"] = why
    return data


def _percent(part, whole) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def _row(name, n, kb, ka, eq):
    return (f"| {name} | {n} | {eq} | {kb} | {_percent(kb, n)} ({_percent(kb, n - eq)}) "
            f"| {ka} | {_percent(ka, n)} ({_percent(ka, n - eq)}) |")


def report(paths) -> int:
    """Print the before/after table of the given result files."""
    missing = [x for x in paths if not Path(x).is_file()]
    if missing:
        print(f"--report: no result file {', '.join(missing)}; a run writes one with --out FILE "
              f"(python tools/mutate.py MODULE TESTS --out FILE)", file=sys.stderr)
        return 2
    print("| module | mutants | equivalent | killed before | score before (of non-equivalent) "
          "| killed after | score after (of non-equivalent) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    tot = [0, 0, 0, 0, 0]
    paths = [x for x in paths if Path(x).name != EQUIVALENT]
    for path in paths:
        data = _with_equivalents(path)
        ms = data["mutants"].values()
        n = len(ms)
        kb = sum(m.get("before", m["status"]) == "killed" for m in ms)
        ka = sum(m["status"] == "killed" for m in ms)
        eq = sum(m["status"] == "survived" and bool(m.get("equivalent")) for m in ms)
        for i, x in enumerate((n, kb, ka, eq)):
            tot[i] += x
        print(_row(data["module"], n, kb, ka, eq))
    n, kb, ka, eq = tot[:4]
    if len(paths) > 1 and n:
        print(_row("all", n, kb, ka, eq))
    for path in paths:
        data = _with_equivalents(path)
        for m in data["mutants"].values():
            if m["status"] == "survived":
                why = m.get("equivalent")
                print(f"{data['module']}:{m['line']}: {m['desc']}: "
                      + (f"equivalent: {why}" if why else "REAL (not killed)"))
    return 0


def _test_folder(module: str) -> str:
    """The folder of a module's tests: the test folders mirror the package
    (``attention_np/kernels/tiles.py`` -> ``tests/kernels/``)."""
    parts = Path(module).parts
    sub = parts[1:-1] if parts and parts[0] == "attention_np" else parts[:-1]
    return "/".join(("tests", *sub[:1])) + "/"


#: what a mutant may change or a test imports: copied; the rest of the checkout is linked (read only)
COPIED = ("attention_np", "tests", "tools", "pyproject.toml")


def _scratch_copy(root: Path, tmp: Path) -> None:
    """The checkout in ``tmp``: :data:`COPIED` copied (the mutant is written into the copy), every
    other top-level entry (notebooks, docs, exercises, ... that the tests read) a symbolic link."""
    for entry in sorted(root.iterdir()):
        if entry.name == ".git" or entry.name.startswith(".pytest") or entry.name == "__pycache__":
            continue
        if entry.name in COPIED and entry.is_dir():
            shutil.copytree(entry, tmp / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
        elif entry.name in COPIED:
            shutil.copy(entry, tmp)
        else:
            (tmp / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", nargs="?")
    ap.add_argument("tests", nargs="*")
    ap.add_argument("--budget", type=float, default=600, help="stop after this many seconds")
    ap.add_argument("--timeout", type=float, default=60, help="per mutant (a hang counts as killed)")
    ap.add_argument("--lines", default=None, help="only mutate lines A-B")
    ap.add_argument("--out", default=None, help="JSON file: record verdicts, resume from it")
    ap.add_argument("--only-survivors", action="store_true", help="re-run the recorded survivors")
    ap.add_argument("--widen", action="store_true", help="with --only-survivors: the survivors "
                    "of a fast first pass re-run with more (slow) test files; the verdict still "
                    "counts as the first one (before any new test)")
    ap.add_argument("--recheck", action="store_true", help="with --only-survivors: also re-run "
                    "the mutants that survived before and were killed after (do the tests as they "
                    "are now still kill them?)")
    ap.add_argument("--subprocess", action="store_true", help="one pytest process per mutant "
                    "(slow; where os.fork is missing)")
    ap.add_argument("--report", nargs="+", metavar="JSON", help="print the table of result files")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.report)
    if not args.module or not args.tests:
        ap.error("give a MODULE and at least one test file")
    if args.only_survivors and not args.out:
        ap.error("--only-survivors needs --out (the file the survivors are read from)")
    root = Path.cwd()
    lo, hi = (int(x) for x in args.lines.split("-")) if args.lines else (0, 10**9)
    source = Path(args.module).read_text()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    data = _load(args.out)
    if data is not None and data.get("source_sha256") != digest:
        if args.only_survivors:
            ap.error(f"{args.out} was recorded for another version of {args.module}; run all again")
        print(f"{args.out}: the module changed since it was recorded; starting afresh")
        data = None
    if data is None:
        data = {"module": args.module, "source_sha256": digest, "mutants": {}}
    data.setdefault("runs", []).append(" ".join(["python tools/mutate.py", *(argv or sys.argv[1:])]))
    recorded = data["mutants"]
    eq_file = Path(args.out).with_name(EQUIVALENT) if args.out else None
    equivalent = json.loads(eq_file.read_text()) if eq_file and eq_file.exists() else {}
    use_fork = hasattr(os, "fork") and not args.subprocess
    if use_fork:
        _preload(args.tests)
    tree = ast.parse(source)
    with tempfile.TemporaryDirectory() as tmp:
        _scratch_copy(root, Path(tmp))
        target = Path(tmp) / args.module
        original = target.read_text()
        run_one = _run_forked if use_fork else _run_subprocess
        if not run_one(tmp, args.tests, args.timeout):         # every verdict below relies on this
            print(f"the tests fail on the unmutated copy: {' '.join(args.tests)} (no mutant was run; "
                  f"`python -m pytest -x {' '.join(args.tests)}` in this checkout shows why)",
                  file=sys.stderr)
            return 1
        start, killed, survived, run = time.monotonic(), 0, [], 0
        try:
            for idx, (desc, line, t) in enumerate(mutants(tree)):
                if not lo <= line <= hi:
                    continue
                key = f"{idx}:{line}:{desc}"
                prev = recorded.get(key)
                if args.only_survivors and (prev is None or prev["status"] != "survived"
                                            or f"{args.module}:{line}: {desc}" in equivalent):
                    if not (args.recheck and prev is not None and prev.get("before") == "survived"
                            and f"{args.module}:{line}: {desc}" not in equivalent):
                        continue               # an equivalent mutant survives any test: skip it
                if not args.only_survivors and prev is not None:
                    continue
                if time.monotonic() - start > args.budget:
                    print(f"budget of {args.budget:.0f} s spent; stopping (rerun to resume)")
                    break
                try:
                    src = ast.unparse(t)
                except Exception:                          # an unrepresentable mutant: skip it
                    continue
                target.write_text(src)
                run += 1
                ok = run_one(tmp, args.tests, args.timeout)
                rec = {"line": line, "desc": desc, "status": "survived" if ok else "killed"}
                if prev is not None and not args.widen:
                    rec["before"] = prev.get("before", prev["status"])
                    if ok and prev.get("equivalent"):
                        rec["equivalent"] = prev["equivalent"]
                recorded[key] = rec
                if ok:
                    survived.append((line, desc))
                    print(f"SURVIVED {args.module}:{line}: {desc}", flush=True)
                else:
                    killed += 1
                if run % 10 == 0:
                    _save(args.out, data)
        finally:
            target.write_text(original)
            _save(args.out, data)
    score = killed / run if run else float("nan")
    print(f"{args.module}: {run} mutants run now, {killed} killed, {len(survived)} survived, "
          f"score {100 * score:.1f} %; {len(recorded)} recorded in {args.out}")
    if survived:
        print(f"a test that kills a survivor goes in {_test_folder(args.module)}, in the file of "
              f"the tests of {Path(args.module).name}, its docstring saying what mutant it kills")
    return 0


if __name__ == "__main__":
    sys.exit(main())
