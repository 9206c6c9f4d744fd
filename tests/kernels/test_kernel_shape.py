"""The kernels and the composition layer stay lists of small steps (the 0.3 design).

- no function in ``attention_np/kernels/`` or ``attention_np/compose/`` has more than
  :data:`MAX_BRANCHES` branches, counted as ruff's C901 / PLR0912 would (``if``/``elif``, ``for``,
  ``while``, ``except``, a ternary, each extra operand of ``and``/``or``, each comprehension
  ``if``); a nested function is counted on its own, not in its parent;
- the caches and plans are frozen, keyword-only dataclasses;
- every kernel's backward returns one :class:`~attention_np.kernels.grads.Grads`, whatever the
  options, its absent fields None.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused, sink_logits, tiled
from attention_np.kernels.grads import Grads
from attention_np.kernels.plan import Plan
from attention_np.kernels.registry import KERNELS
from attention_np.kernels.tiles import Tiling

MAX_BRANCHES = 12
PACKAGE = Path(an.__file__).parent
FOLDERS = ("kernels", "compose")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def branches(fn: ast.AST) -> int:
    """Branches of ``fn``'s own body (nested functions and classes are counted on their own)."""
    n, todo = 0, list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler)):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += len(node.ifs)
        todo.extend(ast.iter_child_nodes(node))
    return n


def functions(folder: str):
    for path in sorted((PACKAGE / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, FUNCTIONS):
                yield f"{folder}/{path.name}:{node.lineno} {node.name}", node


def test_the_branch_counter_counts_what_ruff_counts():
    """Catches a counter that misses a kind of branch (then every function would pass)."""
    src = """
def f(a, b, xs):
    if a and b or a:            # 1 if + 2 bool operands
        pass
    elif b:                     # 1
        pass
    for x in xs:                # 1
        while x:                # 1
            x = x - 1 if x else 0   # 1 ternary
    try:
        pass
    except ValueError:          # 1
        pass
    ys = [x for x in xs if x if not x]   # 2 comprehension ifs
    def g():                    # nested: its own count
        if a:
            pass
    return ys, g
"""
    fn = ast.parse(src).body[0]
    assert branches(fn) == 10
    assert branches(fn.body[-2]) == 1


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_function_has_more_than_12_branches(folder):
    """A function of more branches is a list of steps not yet written as one (see
    ``compose/pipeline.py``): split it into named, guarded steps."""
    wide = {name: n for name, node in functions(folder) if (n := branches(node)) > MAX_BRANCHES}
    assert not wide, f"functions over {MAX_BRANCHES} branches: {wide}"


@pytest.mark.parametrize("cls", [Plan, Tiling, Grads, fused.SDPACache, sink_logits.SinksCache,
                                 tiled.FlashCache])
def test_plans_caches_and_grads_are_frozen_and_keyword_only(cls):
    """A cache or plan built positionally breaks silently when a field is added in the middle."""
    params = cls.__dataclass_params__
    assert params.frozen
    assert all(f.kw_only for f in dataclasses.fields(cls)), cls.__name__
    with pytest.raises(TypeError):
        cls(*[None] * len(dataclasses.fields(cls)))


def _inputs(rng):
    q, k, v = (rng.standard_normal((2, 4, 6, 3)) for _ in range(3))
    return q, k, v, rng.standard_normal((2, 4, 6, 3))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("options", [{}, {"bias": True}, {"sinks": True},
                                     {"bias": True, "sinks": True}])
def test_every_kernel_backward_is_one_grads_its_absent_fields_none(kernel, options):
    """The registry reads fields, never counts values: ``dbias`` is set exactly when the plan
    had a bias, ``dsinks`` exactly when it had sinks."""
    rng = np.random.default_rng(0)
    q, k, v, dout = _inputs(rng)
    plan = Plan(bias=rng.standard_normal((6, 6)) if options.get("bias") else None,
                sinks=rng.standard_normal(4) if options.get("sinks") else None)
    kern = KERNELS[kernel]
    if not set(plan.options()) <= kern.supports:
        pytest.skip(f"{kernel} refuses {plan.options()} (tests/kernels/test_registry.py)")
    _, cache = kern.forward(q, k, v, plan)
    grads = kern.backward(dout, cache)
    assert isinstance(grads, Grads)
    assert [g.shape for g in grads.qkv] == [q.shape, k.shape, v.shape]
    assert (grads.dbias is None) == (plan.bias is None)
    assert (grads.dsinks is None) == (plan.sinks is None)
    if plan.bias is not None:
        assert grads.dbias.shape == plan.bias.shape and np.abs(grads.dbias).sum() > 0
    if plan.sinks is not None:
        assert grads.dsinks.shape == (4,) and np.abs(grads.dsinks).sum() > 0


def test_the_fused_cache_keeps_each_step_in_its_own_field():
    """Each option the forward used sets its own field of the cache; a plain forward sets none.
    The per-head arrays stay in the kernel's grouped layout, (..., H_kv, G, L, .), and the readers
    give them per query head."""
    rng = np.random.default_rng(1)
    q, k, v, _ = _inputs(rng)
    _, plain = fused.sdpa_plan(q, k, v, Plan())
    optional = ("blocks", "softcap", "tanh", "bias_shape", "p_sink", "keep")
    assert all(getattr(plain, name) is None for name in optional)
    assert plain.kv_groups == 1 and plain.dropout_scale == 1.0
    _, c = fused.sdpa_plan(q, k[:, :2], v[:, :2], Plan(bias=np.zeros((6, 6)), softcap=30.0,
                                                       enable_gqa=True, dropout_p=0.25, rng=0))
    assert c.kv_groups == 2 and c.softcap == 30.0 and c.bias_shape == (6, 6)
    assert c.blocks is None and c.p_sink is None
    assert c.e.shape == c.tanh.shape == c.keep.shape == (2, 2, 2, 6, 6)          # (B, H_kv, G, L, S)
    assert c.l.shape == (2, 2, 2, 6, 1)
    assert c.weights.shape == c.softcap_tanh.shape == c.dropout_mask.shape == (2, 4, 6, 6)
    assert c.rowsum.shape == (2, 4, 6, 1) and c.dropout_scale == pytest.approx(4 / 3)
    # query head n is head n % G of group n // G
    np.testing.assert_array_equal(c.dropout_mask[:, 3], c.keep[:, 1, 1])
    np.testing.assert_array_equal(c.softcap_tanh[:, 2], c.tanh[:, 1, 0])
