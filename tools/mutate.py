"""A small AST mutation tester: does the test suite notice when the code is changed?

Each mutant changes one thing in one module: swaps an operator (+ -, * /, < <=, == !=, and or),
changes a constant (n -> n + 1, True -> False), deletes a statement or a ``raise`` (-> ``pass``),
or drops a keyword argument from a call. The package and tests are copied to a temporary
directory; each mutant is written there and the given test files run with ``pytest -x -q``.
A mutant the tests pass on *survives*: either the tests miss a real change, or the mutant is
equivalent (changes nothing observable), which only reading it can tell.

    python tools/mutate.py attention_np/core/masks.py tests/test_masks.py [more tests]
        [--budget SECONDS] [--timeout SECONDS] [--lines A-B]

Run one module at a time (the machine is shared); survivors are printed with their line.
"""

from __future__ import annotations

import argparse
import ast
import copy
import shutil
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("tests", nargs="+")
    ap.add_argument("--budget", type=float, default=600, help="stop after this many seconds")
    ap.add_argument("--timeout", type=float, default=60, help="per mutant (a hang counts as killed)")
    ap.add_argument("--lines", default=None, help="only mutate lines A-B")
    args = ap.parse_args(argv)
    root = Path.cwd()
    lo, hi = (int(x) for x in args.lines.split("-")) if args.lines else (0, 10**9)
    tree = ast.parse(Path(args.module).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("attention_np", "tests"):
            shutil.copytree(root / d, Path(tmp) / d, ignore=shutil.ignore_patterns("__pycache__"))
        for f in ("pyproject.toml",):
            if (root / f).exists():
                shutil.copy(root / f, tmp)
        target = Path(tmp) / args.module
        original = target.read_text()
        start, killed, survived, run = time.monotonic(), 0, [], 0
        try:
            for desc, line, t in mutants(tree):
                if not lo <= line <= hi:
                    continue
                if time.monotonic() - start > args.budget:
                    print(f"budget of {args.budget:.0f} s spent; stopping")
                    break
                try:
                    src = ast.unparse(t)
                except Exception:                          # an unrepresentable mutant: skip it
                    continue
                target.write_text(src)
                run += 1
                try:
                    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                        *args.tests], cwd=tmp, capture_output=True,
                                       timeout=args.timeout)
                    ok = r.returncode == 0
                except subprocess.TimeoutExpired:
                    ok = False
                if ok:
                    survived.append((line, desc))
                    print(f"SURVIVED {args.module}:{line}: {desc}", flush=True)
                else:
                    killed += 1
        finally:
            target.write_text(original)
    score = killed / run if run else float("nan")
    print(f"{args.module}: {run} mutants, {killed} killed, {len(survived)} survived, "
          f"score {100 * score:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
