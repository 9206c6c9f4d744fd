"""Wrong solutions made from the right ones: one small change (a *mutant*) at a time in the model
solutions (:mod:`attention_np.exercises.solutions`), for the kit's audit of itself (:mod:`.audit`).

A mutant changes one node of one line of an exercise's solution cell (the exercise's function and
the helpers :data:`~attention_np.exercises.solutions.SOLUTIONS` lists with it), never a comment, a
docstring or a ``def`` line. The kinds:

- ``operator``: ``+ <-> -``, ``* -> /``, ``/ -> *``, ``@ -> *``, ``** -> *``, ``// -> /``, a unary
  ``-`` or ``~`` dropped, ``and <-> or``;
- ``comparison``: ``<`` to ``<=`` and to ``>=`` (and the like for ``<=``, ``>``, ``>=``),
  ``== <-> !=``, ``is <-> is not``, the two branches of ``np.where`` swapped;
- ``axis``: an axis ``a`` (``axis=``, ``swapaxes``, ``concatenate``, a reduction's first argument)
  to ``a - 1`` and ``a + 1``, an ``axis=`` dropped, ``keepdims`` dropped or made False, a
  transpose (``.T``, ``np.swapaxes``) dropped;
- ``constant``: an integer ``n`` to ``n + 1`` and ``n - 1``, a float ``c`` to ``2c`` and ``c / 2``,
  ``True <-> False``, ``"top_left" <-> "bottom_right"``;
- ``index``: an index or slice bound ``i`` to ``i + 1`` and ``i - 1``, a slice bound dropped, a
  ``None`` (new axis) dropped or moved, ``...`` dropped, a parameter's name ``W_q -> W_k``,
  ``W_k -> W_q``, ``W_v -> W_k``, ``W_o -> W_v`` (biases and the bare ``"q"`` alike), so
  ``shape[-1] -> shape[-2]`` and ``p["W_k"] -> p["W_q"]``;
- ``dtype``: ``math.f -> np.f`` (a float64 NumPy scalar), a ``dtype=`` dropped, a returned array
  cast to float32 and to float64;
- ``call``: ``max <-> min``, ``maximum <-> minimum``, ``sum -> mean``, the two arrays of a
  ``concatenate`` swapped, two neighbouring arguments swapped (``f(q, k)`` -> ``f(k, q)``),
  another keyword argument dropped;
- ``statement``: an assignment that rebinds a name already bound, or an ``if`` block, deleted.

Each mutant is named by its exercise, the function and line of ``solutions.py`` it changes, what
it changes and its kind: ``attention L50 (attention): math.sqrt(q.shape[-1]) -> math.sqrt(q.shape[-2])
(index)``. In a
mutant, ``np.empty`` is filled with NaN (``np.full(shape, np.nan)``): an entry a mutant no longer
writes is then NaN, not whatever memory held, so every verdict is repeatable.
"""

from __future__ import annotations

import ast
import copy
import inspect
from dataclasses import dataclass

from attention_np.exercises import solutions

KINDS = ("operator", "comparison", "axis", "constant", "index", "dtype", "call", "statement")

_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
        ast.MatMult: ast.Mult, ast.Pow: ast.Mult, ast.FloorDiv: ast.Div}
_CMP = {ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt), ast.Gt: (ast.GtE, ast.LtE),
        ast.GtE: (ast.Gt, ast.Lt), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
        ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,)}
_NAMES = {"max": "min", "min": "max", "maximum": "minimum", "minimum": "maximum", "sum": "mean"}
_PARAM_LETTER = {"q": "k", "k": "q", "v": "k", "o": "v"}
_ALIGN = {"top_left": "bottom_right", "bottom_right": "top_left"}
_REDUCTIONS = ("sum", "max", "min", "mean", "concatenate", "stack", "argmax")
_MAX_SHOWN = 44


@dataclass
class Mutant:
    """One wrong solution: ``exercise``, the ``function`` and ``line`` of solutions.py changed,
    ``kind`` (one of :data:`KINDS`), the code ``before`` and ``after``, and ``code``: the mutated
    solution cell, compiled."""

    exercise: str
    function: str
    line: int
    col: int
    kind: str
    before: str
    after: str
    code: object
    tag: str = ""           # "#2" when two mutants would have the same name

    @property
    def name(self) -> str:
        return (f"{self.exercise} L{self.line}{self.tag} ({self.function}): {self.before} -> "
                f"{self.after} ({self.kind})")

    def function_object(self):
        """The exercise's function, with this mutant's change (a fresh namespace each call)."""
        return load(self.code, self.exercise)


# ---------------------------------------------------------------- the solution cell as a tree
def _cell(exercise: str) -> ast.Module:
    """The solution cell of ``exercise`` as one module, its line numbers those of solutions.py."""
    body = []
    for fn in solutions.SOLUTIONS[exercise]:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse("".join(lines))
        ast.increment_lineno(tree, start - 1)
        body += tree.body
    module = ast.Module(body=body, type_ignores=[])
    _fill_empty_with_nan(module)
    return module


def _fill_empty_with_nan(tree) -> None:
    """``np.empty(shape, ...)`` -> ``np.full(shape, np.nan, ...)`` (see the module docstring)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "empty"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "np" and node.args):
            node.func.attr = "full"
            node.args.insert(1, ast.Attribute(ast.Name("np", ast.Load()), "nan", ast.Load()))
    ast.fix_missing_locations(tree)


def compile_cell(tree: ast.Module, exercise: str):
    return compile(ast.fix_missing_locations(tree), solutions.__file__, "exec")


def load(code, exercise: str):
    """Run a compiled solution cell in a fresh copy of solutions.py's namespace (so the functions
    the cell does not define, e.g. ``split_heads`` for ``mha_forward``, are the right ones) and
    return the exercise's function."""
    namespace = dict(vars(solutions))
    exec(code, namespace)       # noqa: S102 - our own solutions, changed by one node
    from attention_np.exercises import function_name
    return namespace[function_name(exercise)]


def model(exercise: str):
    """The unchanged solution cell's function, as the mutants are run (np.empty NaN-filled)."""
    return load(compile_cell(_cell(exercise), exercise), exercise)


# ---------------------------------------------------------------- the sites of a change
def _int_literal(node):
    """The value of an integer literal (``-1`` included), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        return -node.operand.value
    return None


def _int_node(v):
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _call_name(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _role(node, parents):
    """"axis" when the integer literal ``node`` is an axis argument, "index" inside a subscript,
    else "constant"."""
    p = parents.get(node)
    if isinstance(p, ast.Tuple):
        node, p = p, parents.get(p)
    if isinstance(p, ast.keyword) and p.arg in ("axis", "axes"):
        return "axis"
    if isinstance(p, ast.Call) and node in p.args:
        name, i = _call_name(p), p.args.index(node)
        is_np = _is_np(p)
        if name in ("swapaxes", "moveaxis") and (i >= 1 or not is_np):
            return "axis"
        if name in _REDUCTIONS and (i >= 1 if is_np else i == 0):
            return "axis"
    q = node
    while q in parents:
        q = parents[q]
        if isinstance(q, ast.Subscript):
            return "index"
        if isinstance(q, (ast.stmt, ast.Call)):
            break
    return "constant"


class _Sites:
    """Every change of one solution cell: ``(node index in ast.walk order, kind, replacement)``,
    ``replacement(node) -> new node`` (applied to a copy of the tree)."""

    def __init__(self, tree):
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.parents = {c: p for p in self.nodes for c in ast.iter_child_nodes(p)}
        self.function_of = {}
        self.inside = set()
        for fn in tree.body:
            body = fn.body[1:] if _is_docstring(fn.body[0]) else fn.body
            for stmt in body:
                for n in ast.walk(stmt):
                    self.function_of[n] = fn.name
                    self.inside.add(n)
        self.sites = []
        for i, node in enumerate(self.nodes):
            if node in self.inside:
                for kind, make in self._changes(node):
                    self.sites.append((i, kind, make))

    def _changes(self, node):
        yield from self._operators(node)
        yield from self._literals(node)
        if isinstance(node, ast.Subscript):
            yield from self._subscript(node)
        if isinstance(node, ast.Call):
            yield from self._call(node)
        if isinstance(node, ast.Attribute):
            yield from self._attribute(node)
        if isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Tuple):
            for dt in ("float32", "float64"):
                yield "dtype", lambda n, dt=dt: ast.Return(_astype(n.value, dt))
        if self._deletable(node):
            yield "statement", lambda n: ast.Pass()

    def _operators(self, node):
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN and not any(
                isinstance(x, ast.Constant) and isinstance(x.value, str) for x in (node.left, node.right)):
            yield "operator", lambda n: ast.BinOp(n.left, _BIN[type(n.op)](), n.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)) \
                and _int_literal(node) is None:
            yield "operator", lambda n: n.operand
        if isinstance(node, ast.BoolOp):
            yield "operator", lambda n: ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(),
                                                   n.values)
        if isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                for new in _CMP.get(type(op), ()):
                    yield "comparison", lambda n, j=j, new=new: ast.Compare(
                        n.left, [new() if k == j else o for k, o in enumerate(n.ops)], n.comparators)

    def _literals(self, node):
        v = _int_literal(node)
        in_negative = isinstance(node, ast.Constant) and isinstance(self.parents.get(node), ast.UnaryOp)
        if v is not None and not in_negative:
            role = _role(node, self.parents)
            for new in (v - 1, v + 1):
                yield role, lambda n, new=new: _int_node(new)
        elif isinstance(node, ast.Constant):
            change = _CONSTANT_CHANGES.get(type(node.value))
            yield from change(node, self.parents.get(node)) if change else ()


    def _subscript(self, node):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for j, item in enumerate(items):
            if isinstance(item, ast.Slice):
                for bound in ("lower", "upper"):
                    b = getattr(item, bound)
                    if b is None:
                        continue
                    yield "index", lambda n, j=j, bound=bound: _with_item(n, j, _slice_without(
                        _items(n)[j], bound))
                    if _int_literal(b) is None:
                        for op in (ast.Add, ast.Sub):
                            yield "index", lambda n, j=j, bound=bound, op=op: _with_item(n, j, _slice_moved(
                                _items(n)[j], bound, op))
            elif _is_none(item) or isinstance(item, ast.Constant) and item.value is Ellipsis:
                if len(items) > 1:
                    yield "index", lambda n, j=j: _with_items(n, _items(n)[:j] + _items(n)[j + 1:])
                if _is_none(item) and j + 1 < len(items) and ast.dump(items[j + 1]) != ast.dump(item):
                    yield "index", lambda n, j=j: _with_items(n, _swapped(_items(n), j))

    def _call(self, node):
        name = _call_name(node)
        if name in _NAMES and isinstance(node.func, ast.Attribute):
            yield "call", lambda n: _renamed(n, _NAMES[_call_name(n)])
        yield from _reordered_arguments(node, name)
        if name == "swapaxes" and _is_np(node) and node.args:
            yield "axis", lambda n: n.args[0]
        for j, kw in enumerate(node.keywords):
            kind = {"keepdims": "axis", "axis": "axis", "dtype": "dtype"}.get(kw.arg, "call")
            yield kind, lambda n, j=j: ast.Call(n.func, n.args, n.keywords[:j] + n.keywords[j + 1:])

    def _attribute(self, node):
        if node.attr == "T" and isinstance(node.ctx, ast.Load):
            yield "axis", lambda n: n.value
        if isinstance(node.value, ast.Name) and node.value.id == "math":
            yield "dtype", lambda n: ast.Attribute(ast.Name("np", ast.Load()), n.attr, n.ctx)

    def _deletable(self, node):
        """An ``if`` block, or an assignment to names that are already bound (so that the code
        still runs and computes something else, not a NameError)."""
        fn = self._function(node)
        if fn is None or not isinstance(self.parents.get(node), (ast.FunctionDef, ast.If, ast.For)):
            return False
        if isinstance(node, ast.If):
            return True
        if not isinstance(node, ast.Assign) or not all(isinstance(t, ast.Name) for t in node.targets):
            return False
        bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        for stmt in ast.walk(fn):
            if getattr(stmt, "lineno", 1e9) < node.lineno and isinstance(stmt, ast.Assign):
                bound |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        return all(t.id in bound for t in node.targets)

    def _function(self, node):
        p = node
        while p in self.parents:
            p = self.parents[p]
            if isinstance(p, ast.FunctionDef):
                return p
        return None


# ---------------------------------------------------------------- a constant's and a call's changes
def _float_changes(node, parent):
    """``c -> 2c`` and ``c / 2`` (``0.0 -> 1.0``)."""
    for new in ((node.value * 2, node.value / 2) if node.value else (1.0,)):
        yield "constant", lambda n, new=new: ast.Constant(new)


def _bool_changes(node, parent):
    """``True <-> False`` (an axis change when it is ``keepdims``)."""
    kind = "axis" if isinstance(parent, ast.keyword) and parent.arg == "keepdims" else "constant"
    yield kind, lambda n: ast.Constant(not n.value)


def _str_changes(node, parent):
    """A mask's alignment swapped; a parameter's name ``W_q -> W_k`` (and the like, see
    :data:`_PARAM_LETTER`)."""
    s = node.value
    if s in _ALIGN:
        yield "constant", lambda n: ast.Constant(_ALIGN[n.value])
    elif (len(s) == 3 and s[:2] in ("W_", "b_") or len(s) == 1) and s[-1] in _PARAM_LETTER:
        yield "index", lambda n: ast.Constant(n.value[:-1] + _PARAM_LETTER[n.value[-1]])


#: the changes of a literal that is not an int, by its type (exactly: a bool is not a float)
_CONSTANT_CHANGES = {float: _float_changes, bool: _bool_changes, str: _str_changes}


def _is_np(call) -> bool:
    """``call`` is ``np.something(...)``."""
    return isinstance(call.func, ast.Attribute) and getattr(call.func.value, "id", None) == "np"


def _reordered_arguments(node, name):
    """``np.where``'s branches swapped, a two-array ``concatenate``'s arrays swapped, and each two
    neighbouring arguments that are distinct names swapped (not ``where``'s)."""
    if name == "where" and _is_np(node) and len(node.args) == 3:
        yield "comparison", lambda n: ast.Call(n.func, [n.args[0], n.args[2], n.args[1]], n.keywords)
    if name == "concatenate" and node.args and isinstance(node.args[0], ast.List) \
            and len(node.args[0].elts) == 2:
        yield "call", lambda n: ast.Call(n.func, [ast.List(n.args[0].elts[::-1], ast.Load()),
                                                  *n.args[1:]], n.keywords)
    for j in range(len(node.args) - 1):
        a, b = node.args[j], node.args[j + 1]
        if isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.id != b.id and name != "where":
            yield "call", lambda n, j=j: ast.Call(n.func, _swapped(n.args, j), n.keywords)


def _is_docstring(stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _astype(value, dtype):
    return ast.Call(ast.Attribute(value, "astype", ast.Load()),
                    [ast.Attribute(ast.Name("np", ast.Load()), dtype, ast.Load())], [])


def _items(sub):
    return list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]


def _with_items(sub, items):
    index = items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())
    return ast.Subscript(sub.value, index, sub.ctx)


def _with_item(sub, j, new):
    items = _items(sub)
    items[j] = new
    return _with_items(sub, items)


def _swapped(items, j):
    items = list(items)
    items[j], items[j + 1] = items[j + 1], items[j]
    return items


def _slice_without(s, bound):
    return ast.Slice(*(None if b == bound else getattr(s, b) for b in ("lower", "upper", "step")))


def _slice_moved(s, bound, op):
    moved = ast.BinOp(getattr(s, bound), op(), ast.Constant(1))
    return ast.Slice(*(moved if b == bound else getattr(s, b) for b in ("lower", "upper", "step")))


def _renamed(call, name):
    return ast.Call(ast.Attribute(call.func.value, name, ast.Load()), call.args, call.keywords)


def _replace(tree, old, new):
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list) and any(v is old for v in value):
                value[[i for i, v in enumerate(value) if v is old][0]] = new
                return
            if value is old:
                setattr(parent, field, new)
                return
    raise ValueError("node not found")


# ---------------------------------------------------------------- the population
def _shown(before: str, after: str):
    """The change as a reader wants it: the whole node when short, else the part that differs."""
    if max(len(before), len(after)) <= _MAX_SHOWN:
        return before, after
    i = 0
    while i < min(len(before), len(after)) and before[i] == after[i]:
        i += 1
    j = 0
    while j < min(len(before), len(after)) - i and before[-1 - j] == after[-1 - j]:
        j += 1
    i = max(0, before.rfind(" ", 0, max(i - 12, 0)) + 1) if i > 16 else 0
    j = max(j - 12, 0)

    def cut(s):
        core = s[i:len(s) - j]
        return ("..." if i else "") + core + ("..." if j else "")
    return cut(before), cut(after)


def _in_context(sites, index, mutated, before, after):
    """A short change (``-1 -> -2``) shown with the expression around it (``np.swapaxes(k, -1, -2)
    -> np.swapaxes(k, -2, -2)``), up to :data:`_MAX_SHOWN` characters."""
    node, walk = sites.nodes[index], None
    while len(before) < 12:
        parent = sites.parents.get(node)
        if isinstance(parent, ast.keyword):
            parent = sites.parents.get(parent)
        if not isinstance(parent, ast.expr) or len(ast.unparse(parent)) > _MAX_SHOWN:
            break
        walk = walk or list(ast.walk(mutated))      # an ancestor keeps its place in walk order
        node = parent
        before, after = ast.unparse(parent), ast.unparse(walk[sites.nodes.index(parent)])
    return before, after


def mutants(exercise: str) -> list:
    """Every mutant of ``exercise``'s solution cell, in source order (compiled, not yet run).
    Mutants that compile to the same code as another are left out (a change that changes
    nothing the compiler sees, e.g. two spellings of one slice)."""
    tree = _cell(exercise)
    sites = _Sites(tree)
    out, seen, names = [], {_code_key(compile_cell(tree, exercise))}, {}
    order = sorted(sites.sites, key=lambda s: (sites.nodes[s[0]].lineno, sites.nodes[s[0]].col_offset))
    for index, kind, make in order:
        t = copy.deepcopy(tree)
        target = list(ast.walk(t))[index]
        new = make(target)
        if isinstance(target, ast.stmt) and isinstance(new, ast.expr):
            new = ast.Expr(new)
        before = ast.unparse(target).splitlines()[0] if isinstance(target, ast.If) else ast.unparse(target)
        ast.copy_location(new, target)
        _replace(t, target, new)
        try:
            code = compile_cell(t, exercise)
        except (SyntaxError, ValueError, TypeError):
            continue
        key = _code_key(code)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(new, ast.Pass):
            shown = (before if len(before) <= 60 else before[:57] + "...", "(deleted)")
        else:
            shown = _shown(*_in_context(sites, index, t, before, ast.unparse(new)))
        m = Mutant(exercise, sites.function_of[sites.nodes[index]], target.lineno, target.col_offset,
                   kind, shown[0], shown[1], code)
        n = names.get(m.name, 0) + 1
        names[m.name] = n
        if n > 1:
            m.tag = f"#{n}"
        out.append(m)
    return out


def _code_key(code):
    """What a compiled cell computes: every function's bytecode and constants."""
    parts = []
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            parts.append((c.co_name, c.co_code, tuple(repr(x) for x in c.co_consts), c.co_names))
    return tuple(parts)
