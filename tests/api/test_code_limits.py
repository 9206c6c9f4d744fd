"""The house's size limits (0.4): no function a reader cannot hold in their head.

Measured here, on the package's own source with :mod:`ast`:

- **branches** of a function: its decision points, each ``if``/``elif``, ``for``, ``while``,
  ``except``, ``with``, ``assert``, ``match`` case, comprehension loop, conditional expression and
  every extra operand of ``and``/``or`` (nested functions and lambdas counted in their own right
  and in their parent's). At most 12 in ``paper/``, ``variants/``, ``kernels/`` and ``compose/``,
  at most 15 elsewhere;
- **lines** of a module: at most 800;
- **positional arguments** of a call in ``kernels/`` and ``compose/``: at most 6 (name the rest);
- **tuples** passed between functions in ``kernels/`` and ``compose/`` (a returned tuple literal): at
  most 4 values (a typed record beyond that);
- **the shared checks**: "a number, not a bool" is :func:`attention_np._checks.is_number` /
  ``is_integer``, not ``isinstance(v, bool)`` written by hand.

When the test was written (0.4) 75 functions, 2 modules, 19 calls or tuples and 10 number checks
were over these limits; none is now, and the test has no list of exceptions.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "attention_np"
STRICT = {"paper", "variants", "kernels", "compose"}
BRANCHY = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.With,
           ast.AsyncWith, ast.Assert, ast.comprehension, ast.match_case)





def branches(fn: ast.AST) -> int:
    """The decision points of ``fn`` (see the module docstring)."""
    n = 0
    for node in ast.walk(fn):
        if node is fn:
            continue
        if isinstance(node, BRANCHY):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
    return n


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        yield rel, ast.parse(path.read_text(), filename=str(path)), path.read_text().count("\n")


def layer(rel: pathlib.PurePath) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else ""


def functions():
    """``("module.py:Qual.name", node, limit)`` for every function, methods and nested ones named by
    their enclosing class or function."""
    for rel, tree, _ in modules():
        limit = 12 if layer(rel) in STRICT else 15
        yield from _defs(tree, f"{rel.as_posix()}:", limit)


def _defs(parent: ast.AST, prefix: str, limit: int):
    for node in ast.iter_child_nodes(parent):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node, limit
            yield from _defs(node, f"{prefix}{node.name}.", limit)
        elif isinstance(node, ast.Lambda):          # a rule table's lambdas are held too
            yield f"{prefix}<lambda line {node.lineno}>", node, limit
            yield from _defs(node, prefix, limit)
        elif isinstance(node, ast.ClassDef):
            yield from _defs(node, f"{prefix}{node.name}.", limit)
        else:
            yield from _defs(node, prefix, limit)


def test_branches_within_limits():
    over = []
    for name, node, limit in functions():
        n = branches(node)
        if n > limit:
            over.append(f"{name} (line {node.lineno}): {n} branches > {limit}")
    assert not over, "functions over their branch limit:\n" + "\n".join(over)


def test_modules_within_800_lines():
    big = [f"{rel}: {n} lines" for rel, _, n in modules() if n > 800]
    assert not big, "modules over 800 lines:\n" + "\n".join(big)


def _wide(where: str) -> list:
    """``module:function-called`` for each call of more than 6 positional arguments, and
    ``module:return@function`` for each returned tuple of more than 4, in the layer ``where``."""
    wide = []
    for rel, tree, _ in modules():
        if layer(rel) != where:
            continue
        for name, fn, _ in _defs(tree, f"{rel.as_posix()}:", 0):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and len(node.args) > 6:
                    wide.append(f"{name} calls {ast.unparse(node.func)}() with {len(node.args)} positional")
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                        and len(node.value.elts) > 4:
                    wide.append(f"{name} returns a tuple of {len(node.value.elts)}")
    return sorted(set(wide))


@pytest.mark.parametrize("where", ["kernels", "compose"])
def test_calls_and_tuples_stay_narrow(where):
    """At most 6 positional arguments in a call, at most 4 values in a returned tuple."""
    wide = _wide(where)
    assert not wide, "\n".join(wide)


def _is_bool_test(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
        and len(node.args) == 2 and isinstance(node.args[1], ast.Name) and node.args[1].id == "bool"


NUMBER_TYPES = {"int", "float", "integer", "floating", "number", "Real", "Integral", "Number"}


def hand_number_checks(tree) -> list:
    """Lines of ``not isinstance(v, bool)``, or ``isinstance(v, bool)`` joined by ``or``/``and`` to
    an ``isinstance`` of a number type: "a number, not a bool" written by hand."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _is_bool_test(node.operand):
            lines.add(node.lineno)
        if isinstance(node, ast.BoolOp) and any(_is_bool_test(v) for v in node.values):
            others = [v for v in node.values if not _is_bool_test(v)]
            if any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "isinstance" and len(n.args) == 2
                   and NUMBER_TYPES & {getattr(t, "id", getattr(t, "attr", "")) for t in ast.walk(n.args[1])}
                   for v in others for n in ast.walk(v)):
                lines.add(node.lineno)
    return sorted(lines)


def test_number_checks_are_shared():
    """"A number, not a bool" is the shared checks' job (``_checks.py``, ``paper/_validate.py``)."""
    copies = []
    for rel, tree, _ in modules():
        if rel.as_posix() in ("_checks.py", "paper/_validate.py"):
            continue
        found = hand_number_checks(tree)
        if found:
            copies.append(f"{rel}: lines {found}")
    assert not copies, "hand-written number checks (use the shared checks):\n" + "\n".join(copies)


def test_the_measure_counts_what_it_says():
    """The counter itself, on functions whose decision points are known by reading them."""
    src = '''
def f(a, b):
    if a and b or a:        # if, and, or: 3
        pass
    elif b:                 # 1
        pass
    for i in range(3):      # 1
        x = [j for j in range(i) if j]   # comprehension: 1
    y = 1 if a else 2       # 1
    try:
        pass
    except ValueError:      # 1
        pass
    with open("x"):          # 1
        pass
    while False:            # 1
        assert a            # 1
'''
    fn = ast.parse(src).body[0]
    assert branches(fn) == 11
    assert branches(ast.parse("def g():\n    return 1\n").body[0]) == 0


def test_the_number_check_finder_finds_hand_copies_only():
    copies = ("ok = isinstance(v, int) and not isinstance(v, bool)\n"
              "bad = isinstance(v, bool) or not isinstance(v, (int, float))\n"
              "flag = isinstance(v, bool)\n"                       # a flag's test: not a copy
              "node = isinstance(n, ast.Constant) and isinstance(n.value, bool)\n")
    assert hand_number_checks(ast.parse(copies)) == [1, 2]
