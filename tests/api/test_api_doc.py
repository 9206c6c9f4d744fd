"""docs/api.md states every public signature exactly: parsed here and held to ``inspect.signature``.

A signature in docs/api.md is a line of a fenced code block that starts with a public name and
``(`` (continued until the parentheses close), or the first cell of a table row written as
`` `name(...)` ``. Its parameters are parsed with :mod:`ast`; each default is evaluated in the
function's own module (so ``np.float64`` and ``SCORINGS`` mean what they mean there).
"""

import ast
import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_np as an

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"

# Results and caches that a forward returns: users read their fields, they do not call them.
RETURNED_TYPES = {"SDPACache", "MHACache", "FlashCache", "AdditiveCache", "GradcheckResult",
                  "SinksCache"}
PUBLIC = sorted(n for n in an.__all__ if callable(getattr(an, n)) and n not in RETURNED_TYPES)


def _balanced_call(text: str, start: int) -> str | None:
    """The text between the ``(`` at ``start`` and its matching ``)``; None if it never closes."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    return None


def documented_signatures(markdown: str) -> list[tuple[str, str]]:
    """Every ``(name, parameter text)`` written as a signature in ``markdown``."""
    found = []
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)
    for block in blocks:
        for m in re.finditer(r"^([A-Za-z_]\w*)\(", block, flags=re.M):
            params = _balanced_call(block, m.end() - 1)
            assert params is not None, f"unclosed signature of {m.group(1)} in docs/api.md"
            found.append((m.group(1), " ".join(params.split())))
    for m in re.finditer(r"^\| `([A-Za-z_]\w*)\((.*?)\)(?: -> [^`]*)?` \|", markdown, flags=re.M):
        found.append((m.group(1), m.group(2)))
    return found


SIGNATURES = documented_signatures(API_MD.read_text(encoding="utf-8"))


def _doc_parameters(name: str, params: str, namespace: dict) -> list[tuple]:
    """``[(name, kind, default)]`` of ``def name(params)``, defaults evaluated in ``namespace``."""
    args = ast.parse(f"def {name}({params}): pass").body[0].args
    empty = inspect.Parameter.empty
    out = []
    positional = args.posonlyargs + args.args
    pos_defaults = [empty] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(positional, pos_defaults, strict=True):
        out.append((a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d))
    if args.vararg:
        out.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, empty))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((a.arg, inspect.Parameter.KEYWORD_ONLY, empty if d is None else d))
    if args.kwarg:
        out.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, empty))
    code = {d: compile(ast.Expression(d), "<docs/api.md>", "eval") for *_, d in out if d is not empty}
    return [(n, k, d if d is empty else eval(code[d], namespace)) for n, k, d in out]  # noqa: S307


def _real_parameters(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_the_parser_reads_both_forms():
    md = ("```\nf(a, b=None, *, c=np.float64,\n  d=2) -> x\n  g(not, this)\n```\n"
          "| `h(x, axis=-1) -> y` | text `k(1)` |\n")
    assert documented_signatures(md) == [("f", "a, b=None, *, c=np.float64, d=2"), ("h", "x, axis=-1")]


def test_every_public_function_is_documented_exactly_once():
    names = [n for n, _ in SIGNATURES]
    missing = [n for n in PUBLIC if n not in names]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not missing, f"public functions with no signature in docs/api.md: {missing}"
    assert not twice, f"documented more than once in docs/api.md: {twice}"


def test_every_documented_signature_is_a_public_function():
    unknown = [n for n, _ in SIGNATURES if n not in an.__all__]
    assert not unknown, f"docs/api.md documents names attention_np does not export: {unknown}"


@pytest.mark.parametrize("name,params", SIGNATURES, ids=[n for n, _ in SIGNATURES])
def test_documented_signature_equals_the_real_one(name, params):
    fn = getattr(an, name)
    module = sys.modules[fn.__module__]
    namespace = {**vars(module), "np": np}
    doc = _doc_parameters(name, params, namespace)
    real = _real_parameters(fn)
    assert [(n, k) for n, k, _ in doc] == [(n, k) for n, k, _ in real], (
        f"{name}: docs/api.md says ({params}) but the function is {inspect.signature(fn)}")
    for (n, _, d), (_, _, r) in zip(doc, real, strict=True):
        assert d is r or d == r, f"{name}: default of {n} is {r!r}, docs/api.md says {d!r}"
