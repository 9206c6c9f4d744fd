"""The course's checker: correct answers pass, each catalogued mistake is named, stubs are reported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import attention_np.exercises as ex

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = [(name, m) for name, e in ex.EXERCISES.items() for m in e.mistakes]


def test_at_least_40_catalogued_mistakes_with_distinct_names():
    names = [(n, m.name) for n, m in CATALOGUE]
    assert len(names) >= 40
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_the_library_passes_every_check(name):
    result = ex.check(name, ex.reference(name))
    assert result.ok, str(result)
    assert result.status == "passed"


@pytest.mark.parametrize("name, mistake", CATALOGUE, ids=[f"{n}: {m.name}" for n, m in CATALOGUE])
def test_each_catalogued_mistake_is_named(name, mistake):
    # the wrong variant must fail, and be diagnosed as itself (not as an earlier, similar entry)
    result = ex.check(name, mistake.wrong)
    assert not result.ok
    assert result.status == "mistake", str(result)
    assert result.mistake == mistake.name, str(result)
    assert "Hint:" in result.message


@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_an_untouched_stub_reports_not_implemented(name):
    def stub(*args, **kwargs):
        raise NotImplementedError("write this function")
    result = ex.check(name, stub)
    assert result.status == "not implemented yet"
    assert not result.ok
    assert "not implemented yet" in str(result).lower()


# ---- wrong answers written as a student would write them (independently of the catalogue)
def student_softmax_naive(x):
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)


def student_softmax_axis0(x):
    x = x - np.max(x, axis=0)
    return np.exp(x) / np.sum(np.exp(x), axis=0)


def student_softmax_float64(x):
    x = np.array(x, dtype=float)
    z = x - x.max(axis=-1)[..., None]
    return np.exp(z) / np.exp(z).sum(axis=-1)[..., None]


def student_softmax_backward_diag(dp, p):
    return dp * p * (1.0 - p)


def student_attention_unscaled(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    w = np.nan_to_num(w / w.sum(-1, keepdims=True))
    return w @ v


def student_attention_zero_fill(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = s * mask                                # "masked" by zeroing the scores
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    return (w / w.sum(-1, keepdims=True)) @ v


def student_attention_nan_rows(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    s = s - s.max(-1, keepdims=True)                # -inf - -inf on a fully masked row
    w = np.exp(s)
    return (w / w.sum(-1, keepdims=True)) @ v


def student_causal_strict(L, S, align):
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    shift = 0 if align == "top_left" else S - L
    return j < i + shift


def student_causal_blocked(L, S, align):
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    shift = 0 if align == "top_left" else S - L
    return j > i + shift                            # True = blocked


def student_split_wrong(x, num_heads):
    *b, L, f = x.shape
    return x.reshape(*b, num_heads, L, f // num_heads)


def student_sinusoidal_swapped(length, d_model):
    pos = np.arange(length)[:, None]
    i = np.arange(0, d_model, 2)[None, :]
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.cos(pos / 10000 ** (i / d_model))
    pe[:, 1::2] = np.sin(pos / 10000 ** (i / d_model))
    return pe


def student_tiled_no_rescale_sum(q, k, v, block_size):
    scale = 1 / np.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)
    total = np.zeros_like(m)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., start:start + block_size, :], -1, -2) * scale
        new_m = np.maximum(m, s.max(-1, keepdims=True))
        e = np.exp(s - new_m)
        out = out * np.exp(m - new_m) + e @ v[..., start:start + block_size, :]
        total = total + e.sum(-1, keepdims=True)     # the old sum is not rescaled
        m = new_m
    return out / total


STUDENT_MISTAKES = [
    ("softmax", student_softmax_naive, "no max subtraction (overflow)"),
    ("softmax", student_softmax_axis0, "softmax over the wrong axis"),
    ("softmax", student_softmax_float64, "dtype not kept"),
    ("softmax_backward", student_softmax_backward_diag, "kept only the diagonal of the Jacobian"),
    ("attention", student_attention_unscaled, "no 1/sqrt(d_k)"),
    ("attention", student_attention_zero_fill, "masked with 0 instead of -inf"),
    ("attention", student_attention_nan_rows, "NaN on a fully masked row"),
    ("causal_mask", student_causal_strict, "causal mask off by one (diagonal excluded)"),
    ("causal_mask", student_causal_blocked, "mask polarity flipped"),
    ("split_heads", student_split_wrong, "reshape without the transpose"),
    ("sinusoidal", student_sinusoidal_swapped, "sin and cos swapped"),
    ("tiled_attention", student_tiled_no_rescale_sum,
     "online softmax without the rescale of the running sum"),
]


@pytest.mark.parametrize("name, fn, mistake", STUDENT_MISTAKES,
                         ids=[f.__name__ for _, f, _ in STUDENT_MISTAKES])
def test_a_students_wrong_answer_is_named(name, fn, mistake):
    result = ex.check(name, fn)
    assert result.mistake == mistake, str(result)


def student_softmax_logsumexp(x):                   # correct, written differently
    m = np.max(x, axis=-1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))
    return np.exp(x - lse)


def student_attention_correct(q, k, v, mask=None):   # correct, with its own fully-masked-row rule
    s = np.einsum("...ld,...sd->...ls", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    w = np.exp(s - m)
    denom = w.sum(-1, keepdims=True)
    w = w / np.where(denom == 0, 1, denom)
    return w @ v


@pytest.mark.parametrize("name, fn", [("softmax", student_softmax_logsumexp),
                                      ("attention", student_attention_correct)])
def test_a_correct_answer_written_differently_passes(name, fn):
    assert ex.check(name, fn).ok, str(ex.check(name, fn))


def test_an_unknown_wrong_answer_fails_without_a_name():
    result = ex.check("softmax", lambda x: np.zeros_like(x))
    assert result.status == "failed" and result.mistake is None
    assert "cases fail" in result.message and result.message.startswith("FAILED: softmax")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown exercise 'sofmax'"):
        ex.check("sofmax", np.exp)
    with pytest.raises(TypeError, match="student_fn must be a function"):
        ex.check("softmax", 3)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "attention_np", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_checks_a_solution_file(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        import numpy as np
        def softmax(x):
            z = x - x.max(axis=-1, keepdims=True)
            return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    """))
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\n"
                   "def softmax(x):\n    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)\n")
    stub = tmp_path / "stub.py"
    stub.write_text("def softmax(x):\n    raise NotImplementedError\n")
    r = run_cli("softmax", str(good))
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout + r.stderr
    r = run_cli("softmax", str(bad))
    assert r.returncode == 1 and "no max subtraction (overflow)" in r.stdout, r.stdout + r.stderr
    r = run_cli("softmax", str(stub))
    assert r.returncode == 1 and "not implemented yet" in r.stdout, r.stdout + r.stderr
    r = run_cli("attention", str(good))
    assert r.returncode == 2 and "defines no function 'attention'" in r.stderr
    r = run_cli("--list")
    assert r.returncode == 0 and all(name in r.stdout for name in ex.EXERCISES)


def test_cli_says_what_to_do_with_a_file_it_cannot_run(tmp_path):
    # a notebook is checked from its code cells; anything else that cannot run gets one line, exit 2
    nb = ROOT / "exercises" / "01_attention.ipynb"
    r = run_cli("softmax", str(nb))
    assert r.returncode == 1 and r.stdout.startswith("FAILED: not implemented yet"), r.stdout + r.stderr
    files = {"syntax.py": ("def softmax(x)\n    return x\n", "syntax error at line 1"),
             "imports.py": ("import not_a_module_xyz\ndef softmax(x):\n    return x\n",
                            "ModuleNotFoundError"),
             "exits.py": ("import sys\nsys.exit(3)\n", "SystemExit"),
             "other.py": ("def soft_max(x):\n    return x\n", "defines no function 'softmax'"),
             "notes.txt": ("softmax", "is not a .py file or a notebook")}
    for name, (source, says) in files.items():
        (tmp_path / name).write_text(source)
        r = run_cli("softmax", str(tmp_path / name))
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert says in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("softmax", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_every_message_begins_with_passed_mistake_or_failed():
    messages = [str(ex.check(n, ex.reference(n))) for n in ex.EXERCISES]
    messages += [str(ex.check(n, m.wrong)) for n, m in CATALOGUE]
    messages += [str(ex.check("softmax", lambda x: np.zeros_like(x)))]
    for m in messages:
        assert m.startswith(("PASSED", "MISTAKE: ", "FAILED: ")), m
        if m.startswith("MISTAKE: "):
            assert "Hint: " in m


def test_the_three_wrong_answers_the_issue_found_accepted_are_caught():
    def softmax_in_place(x):                        # writes into its input
        x -= x.max(-1, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(-1, keepdims=True)
        return x

    def attention_softmax_then_mask(q, k, v, mask=None):
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(np.float32(q.shape[-1])).astype(q.dtype)
        e = np.exp(s - s.max(-1, keepdims=True))
        w = e / e.sum(-1, keepdims=True)
        if mask is not None:
            w = w * mask
            total = w.sum(-1, keepdims=True)
            w = w / np.where(total == 0, 1, total)
        return w @ v

    def tiled_max_from_zero(q, k, v, block_size):
        scale = q.dtype.type(1 / np.sqrt(q.shape[-1]))
        m = np.zeros(q.shape[:-1] + (1,), q.dtype)
        l = np.zeros_like(m)
        acc = np.zeros(q.shape[:-1] + (v.shape[-1],), q.dtype)
        for j in range(0, k.shape[-2], block_size):
            s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
            m_new = np.maximum(m, s.max(-1, keepdims=True))
            e = np.exp(s - m_new)
            l = l * np.exp(m - m_new) + e.sum(-1, keepdims=True)
            acc = acc * np.exp(m - m_new) + e @ v[..., j:j + block_size, :]
            m = m_new
        return acc / l

    r = ex.check("softmax", softmax_in_place)
    assert r.status == "mistake" and r.mistake == "wrote into an input", str(r)
    assert "changed its input x" in str(r)
    r = ex.check("attention", attention_softmax_then_mask)
    assert r.status == "mistake" and r.mistake == "a masked key's score still counts", str(r)
    out = attention_softmax_then_mask(np.array([[1.0]]), np.array([[800.0], [1.0]]),
                                      np.array([[5.0], [2.0]]), np.array([[False, True]]))
    assert out[0, 0] != 2.0                         # the issue's case: 0 (or NaN) instead of 2
    r = ex.check("tiled_attention", tiled_max_from_zero)
    assert r.status == "mistake" and r.mistake == "running max started at 0 instead of -inf", str(r)


def test_the_padding_mask_contract_is_one():
    from attention_np import padding_mask as library_padding_mask
    from attention_np.exercises.notebooks import CONTRACTS, NOTEBOOKS
    assert library_padding_mask(np.array([2, 3]), 4).shape == (2, 1, 4)
    assert ex.reference("padding_mask")(np.array([2, 3]), 4).shape == (2, 1, 4)
    assert "Returns a bool array (B, 1, S)" in CONTRACTS["padding_mask"]
    assert "(B, S)" not in CONTRACTS["padding_mask"].replace("(B, S)`", "")
    hints = " ".join(NOTEBOOKS["01_attention"][2]["padding_mask"])
    assert "(B, S)" not in hints
    for m in ex.EXERCISES["padding_mask"].mistakes:
        assert "(B, S)." not in m.hint
    # a (B, S) answer with the right values is named as the shape, not "failed"
    r = ex.check("padding_mask", lambda n, S: np.arange(S)[None, :] < np.asarray(n)[:, None])
    assert r.mistake == "padding mask of shape (B, S) instead of (B, 1, S)", str(r)


def test_every_stub_states_the_contract():
    from attention_np.exercises.notebooks import COMMON_RULES, CONTRACTS
    assert sorted(CONTRACTS) == sorted(ex.EXERCISES)
    for rule in ("Do not write into the inputs", "float32 input gives a float32 output",
                 "1e-4 * (1 + |answer|)", "view of an input is allowed"):
        assert rule in COMMON_RULES
    assert "all -inf is never given" in CONTRACTS["softmax"]
    assert "(B, L, S) mask is not valid" in CONTRACTS["mha_forward"]
    assert "still return the\n    three gradients separately" in CONTRACTS["mha_backward"]
    assert "no NaN or inf are given" in CONTRACTS["attention"]


def test_one_behaviour_has_nan_where_the_other_has_nan_and_agrees_elsewhere():
    """engine.same_behaviour, the diagnosis's and the audit's comparison of two wrong results."""
    from attention_np.exercises import engine
    a = np.array([1.0, np.nan, 2.0])
    same = engine.same_behaviour
    assert same(a, a.copy()) and not engine.same(a, a.copy())
    assert not same(a, np.array([1.0, 0.0, 2.0])) and not same(np.array([1.0, 0.0, 2.0]), a)
    assert same(a.astype(np.float32), a)                        # the float width is not compared
    assert same(a + 5e-5 * np.abs(a), a) and not same(a + 5e-4, a)   # 1e-4 relative + 1e-6
    assert not same(a, a[:2]) and not same(a > 1, a) and not same(a > 1, (a > 1).astype(float))
    inf = np.array([np.inf, 1.0])
    assert same(inf, inf.copy()) and not same(inf, -inf) and not same(np.array([5.0, 1.0]), inf)
    assert not engine.same(np.array([5.0, 1.0]), inf)            # an inf equals only the same inf
    raised = engine.Raised(ValueError("x"))
    assert same(raised, engine.Raised(TypeError("y"))) and not same(raised, a) and not same(a, raised)
    assert same((a, {"W": a}), (a, {"W": a})) and not same((a, {"W": a}), (a, {"b": a}))
    for one_structure in (same, engine.same):                   # the same leaves, not just as many
        b = np.array([1.0, 2.0])
        assert not one_structure((b, [b, b]), (b, b, b)) and not one_structure((b, [b, b]), (b, b))
    assert not same(np.array(["x"]), np.array(["x"]))            # not numbers: not a result


def test_a_catalogued_mistake_with_nan_is_reproduced_by_nan_at_the_same_entries():
    from attention_np.exercises import engine
    case = engine.Case("c", (np.ones(3),), expected=np.ones(3))
    mistake = engine.Fingerprint("m", "hint", [np.array([1.0, np.nan, 3.0])])

    def result(out):
        return [engine.CaseResult("c", False, "wrong", 1.0, False, out)]
    assert engine.agrees(result(np.array([1.0, np.nan, 3.0 + 1e-6])), [case], mistake)[0]
    assert not engine.agrees(result(np.array([1.0, 0.0, 3.0])), [case], mistake)[0]
    assert not engine.agrees(result(np.array([np.nan, np.nan, 3.0])), [case], mistake)[0]
    assert not engine.agrees(result(engine.Raised(ValueError("x"))), [case], mistake)[0]


def test_the_kits_integer_test_is_the_packages():
    """engine.is_integer (the kit ships without the package) is _checks.is_integer."""
    from attention_np import _checks
    from attention_np.exercises import engine
    values = [0, 1, -3, 2**70, True, False, np.bool_(True), 1.0, 2.5, np.float32(1), "1", None, 1j,
              np.array(3), [1]] + [t(1) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64)]
    assert [engine.is_integer(v) for v in values] == [_checks.is_integer(v) for v in values]
    assert sum(engine.is_integer(v) for v in values) == 10


def test_errors_and_nan_are_never_the_same_result():
    from attention_np.exercises import engine
    a = engine.Raised(ValueError("one"))
    b = engine.Raised(ValueError("one"))
    assert not engine.same(a, b) and not engine.same(a, a)
    nan = np.array([np.nan, 1.0])
    assert not engine.same(nan, nan.copy())
    assert engine.same(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert engine.compare(nan, nan.copy()) is not None


def test_every_exercise_has_behaviour_probes():
    from attention_np.exercises import probes
    assert sorted(probes.PROBES) == sorted(ex.EXERCISES)
    assert all(probes.PROBES[n] for n in ex.EXERCISES)


SHARED = [("scaled by sqrt(d_model) instead of sqrt(d_k)", ("mha_forward", "decode_step")),
          ("sum without the weights p", ("softmax_backward", "attention_backward")),
          ("no 1/sqrt(d_k)", ("attention", "tiled_attention"))]


@pytest.mark.parametrize("mistake, siblings", SHARED, ids=[m for m, _ in SHARED])
def test_sibling_exercises_share_catalogue_entries(mistake, siblings):
    hints = set()
    for name in siblings:
        entry = next(m for m in ex.EXERCISES[name].mistakes if m.name == mistake)
        hints.add(entry.hint)
    assert len(hints) == 1


def test_float32_tolerance_accepts_a_float64_internal_solution():
    # scores near -240: a float64-internal tiled answer, cast back, differs from the float32
    # computation by more than 2e-5 but is the better answer; the checker compares both with the
    # float64 answer for the same float32 inputs
    from attention_np.exercises.solutions import tiled_attention

    def float64_inside(q, k, v, block_size):
        return tiled_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                               block_size).astype(q.dtype)
    assert ex.check("tiled_attention", float64_inside).ok
    case = next(c for c in ex.EXERCISES["tiled_attention"].cases() if "-240" in c.label)
    f32 = ex.reference("tiled_attention")(*case.args)
    f64 = float64_inside(*case.args)
    assert f32.dtype == f64.dtype == np.float32
    assert np.abs(f32.astype(float) - f64).max() > 0   # they do differ


def test_model_solutions_pass_and_are_written_independently():
    import inspect

    from attention_np.exercises import solutions
    source = inspect.getsource(solutions)
    assert "attention_np" not in source.split('"""', 2)[2]       # imports NumPy alone
    for name in ex.EXERCISES:
        assert ex.check(name, getattr(solutions, name)).ok, name


def _agree(got, want, tol):
    """``got`` equals ``want`` (arrays, tuples of them, dicts of them) within ``rtol = atol = tol``."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            _agree(got[key], want[key], tol)
    elif isinstance(want, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _agree(g, w, tol)
    else:
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_the_references_agree_with_answers_written_independently(name):
    """tests/course/exercise_answers.py answers each exercise from its definition in plain NumPy
    (no attention_np): the reference gives its numbers on every public and hidden case, and the
    checker passes it. A wrong reference, and the stored expected values made from it, fail here,
    which checking the references against their own stored values cannot show."""
    import copy

    from tests.course.exercise_answers import ANSWERS

    assert ANSWERS.keys() == ex.EXERCISES.keys()
    answer, reference = ANSWERS[name], ex.reference(name)
    result = ex.check(name, answer)
    assert result.ok, str(result)
    e = ex.EXERCISES[name]
    for case in [*e.cases(), *e.hidden_cases()]:
        want = reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        got = answer(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        _agree(got, want, 1e-4 if case.dtype in ("float32", np.float32) else 1e-10)


def test_the_references_run_the_paper_code_where_it_has_the_function():
    # the student runs what they read: attention_np.paper, except the tiled forward (kernels) and
    # the positional table (nn), which the paper code does not have
    outside = {"tiled_attention": "attention_np.kernels", "sinusoidal": "attention_np.nn"}
    for name in ex.EXERCISES:
        ref = ex.reference(name)
        called = {v.__module__ for k, v in ref.__globals__.items()
                  if k in ref.__code__.co_names and callable(v) and getattr(v, "__module__", "")
                  and v.__module__.startswith("attention_np") and not v.__module__.startswith(
                      "attention_np.exercises")}
        want = outside.get(name, "attention_np.paper")
        assert called and all(m.startswith(want) for m in called), (name, called)


# ---- every contract clause has a case, partial credit, hints that agree with contracts
def _cases(name, hidden):
    e = ex.EXERCISES[name]
    return e.hidden_cases() if hidden else e.cases()


@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_every_contract_clause_has_a_public_and_a_hidden_case(name):
    from attention_np.exercises.notebooks import clause_keys
    keys = set(clause_keys(name))
    public, hidden = _cases(name, False), _cases(name, True)
    for cases, which in ((public, "public"), (hidden, "hidden")):
        tagged = {k for c in cases for k in c.clauses}
        assert keys <= tagged, f"{name}: clauses without a {which} case: {sorted(keys - tagged)}"
        assert tagged <= keys | {"dtype"}, f"{name}: cases name unknown clauses {sorted(tagged - keys)}"
    # the hidden cases vary the public ones: no hidden input equals a public one
    pub = [c.args for c in public]
    for c in hidden:
        assert not any(_same_args(c.args, a) for a in pub), (name, c.label)


def _same_args(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and np.array_equal(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_args(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_args(a[k], b[k]) for k in a)
    return a == b


def _mask_of(case):
    return next((a for a in case.args if isinstance(a, np.ndarray) and a.dtype == bool), None)


# what a clause claims about its cases, checked on their inputs (so a tag cannot lie)
CLAUSE_PROPERTIES = {
    "fully_masked": lambda c: _mask_of(c) is not None and bool(
        (~np.broadcast_to(_mask_of(c), _mask_of(c).shape).any(-1)).any()),
    "mask_broadcast": lambda c: _mask_of(c) is not None and (
        _mask_of(c).ndim < c.args[1].ndim or 1 in _mask_of(c).shape[:-1]),
    "broadcast": lambda c: c.args[-2].ndim < c.args[-3].ndim
    or c.args[-2].shape[:-2] != c.args[-3].shape[:-2],
    "size_one": lambda c: 1 in c.args[2].shape[:-2],
    "L_1": lambda c: [a for a in c.args if isinstance(a, np.ndarray) and a.dtype != bool][-3].shape[-2] == 1,
    "dtype": lambda c: any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in c.args),
}


@pytest.mark.parametrize("name", ["attention", "attention_backward"])
def test_a_case_has_the_property_its_clause_names(name):
    for hidden in (False, True):
        for c in _cases(name, hidden):
            for key in c.clauses:
                if key in CLAUSE_PROPERTIES:
                    assert CLAUSE_PROPERTIES[key](c), (name, key, c.label)


def test_every_exercise_with_float_inputs_has_float32_and_float64_cases():
    for name in ex.EXERCISES:
        for hidden in (False, True):
            cases = _cases(name, hidden)
            floats = [c for c in cases if any(isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                              for a in c.args)]
            if floats:
                assert any(c.dtype == np.float32 and "dtype" in c.clauses for c in floats), name
                assert any(c.dtype in (np.float64, float) for c in floats), name


@pytest.mark.parametrize("name", [n for n in ex.EXERCISES if n not in ("causal_mask", "padding_mask",
                                                                           "sinusoidal")])
def test_writing_into_an_input_is_caught_in_every_exercise(name):
    ref = ex.reference(name)

    def writes(*args, **kwargs):
        out = ref(*args, **kwargs)
        first = next(a for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f")
        first[...] = 0.0
        return out
    r = ex.check(name, writes)
    assert r.mistake == "wrote into an input", str(r)


def test_partial_credit_scores_each_output_on_its_own():
    from attention_np.exercises import engine
    ref = ex.reference("mha_backward")

    def wrong_b_o(*args):
        dq, dk, dv, g = ref(*args)
        return dq, dk, dv, dict(g, b_o=2 * g["b_o"])
    r = ex.check("mha_backward", wrong_b_o)
    assert not r.ok
    for case in r.cases:
        names = [n for n, _ in case.parts]
        assert names[:3] == ["dquery", "dkey", "dvalue"] and len(names) == 11
        assert [n for n, ok in case.parts if not ok] == ["grads['b_o']"], case.parts
        assert engine.score(case.points, case.passed, case.parts) == pytest.approx(case.points * 10 / 11)
    assert ("grads['b_o']", 0, len(r.cases)) in r.parts
    assert "wrong: grads['b_o'] on" in r.message
    assert engine.score(2.0, False, [["dq", True], ["dk", False], ["dv", True]]) == pytest.approx(4 / 3)
    assert engine.score(2.0, True, []) == 2.0 and engine.score(2.0, False, None) == 0.0

    def wrong_dk(*args):
        dq, dk, dv = ex.reference("attention_backward")(*args)
        return dq, -dk, dv
    r = ex.check("attention_backward", wrong_dk)
    # -dk is right exactly where dk is 0 everywhere (one key: the softmax of one score is constant)
    zero_dk = sum(not np.any(ex.reference("attention_backward")(*c.args)[1]) if c.expected is None
                  else not np.any(c.expected[1]) for c in ex.EXERCISES["attention_backward"].cases())
    assert zero_dk < len(r.cases) / 2
    assert [p[:2] for p in r.parts] == [("dq", len(r.cases)), ("dk", zero_dk), ("dv", len(r.cases))]


def test_feedback_never_names_a_hidden_case():
    from attention_np.exercises import engine, probes
    from attention_np.exercises.checker import build_record
    rec = build_record(ex.EXERCISES["tiled_attention"], hidden=True)
    ref = ex.reference("tiled_attention")
    hidden_labels = [c.label for c in rec["cases"] if c.hidden]

    def key(q):
        return q.shape, float(q.ravel()[0])
    public = {key(c.args[0]) for c in rec["cases"] if not c.hidden}
    hidden = {key(c.args[0]) for c in rec["cases"] if c.hidden} - public

    def wrong_on_hidden_only(q, k, v, block_size):     # right on every public case
        out = ref(q, k, v, block_size)
        return out + 1.0 if key(q) in hidden else out
    r = engine.verdict("tiled_attention", wrong_on_hidden_only, rec["cases"], rec["fingerprints"],
                       probes.bound("tiled_attention", rec["probe_expected"]), rec["arg_names"],
                       rec["signature"])
    assert not r.ok
    assert "a hidden case" in r.message
    assert not any(label in r.message for label in hidden_labels), r.message


def test_every_hint_agrees_with_its_contract():
    from attention_np.exercises.notebooks import CONTRACTS, NOTEBOOKS
    for name, e in ex.EXERCISES.items():
        contract = CONTRACTS[name]
        hints = [m.hint for m in e.mistakes]
        hints += [h for _, _, exs in NOTEBOOKS.values() for h in exs.get(name, [])]
        text = " ".join(hints)
        if "need not be d_model / h" in contract or "mha_forward" in contract:
            assert "d_model / h" not in text.replace("need not be d_model / h", ""), name
        float_inputs = any(isinstance(a, np.ndarray) and a.dtype.kind == "f"
                           for c in e.cases() for a in c.args)
        if not float_inputs:
            assert "float32 input" not in text, name
        for shape in ("(B, S)", "(B, L, S)", "(L, S)", "(B, 1, S)"):
            if shape in text and name in ("padding_mask",):
                assert shape in contract, (name, shape)
    # the dtype message of an exercise without float inputs speaks of none
    r = ex.check("sinusoidal", lambda n, d: ex.reference("sinusoidal")(n, d).astype(np.float32))
    assert r.mistake == "dtype not kept" and "float32 input" not in r.message, str(r)
    r = ex.check("mha_forward", lambda *a, **k: ex.reference("mha_forward")(*a, **k) * 1.01)
    assert "d_model / h" not in r.message


# ---- the cases are generated from each contract: every clause at every edge size
@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_every_clause_is_drawn_at_every_edge_of_its_spec(name):
    """The edges come from the spec's axis descriptions (generate.edges): a new axis brings its
    edges, a new pair of widths that may differ brings both orders. Public and hidden cases each
    reach every edge of every clause; what a case reaches is measured from its arguments."""
    from attention_np.exercises import generate
    from attention_np.exercises.notebooks import clause_keys
    e = ex.EXERCISES[name]
    spec = e.spec
    assert sorted(c.key for c in spec.clauses) == sorted(set(clause_keys(name)))
    for which, cases in (("public", e.cases()), ("hidden", e.hidden_cases())):
        for clause in spec.clauses:
            reached = set().union(*(generate.edges_of(spec, c.args, c.family) for c in cases
                                    if clause.key in c.clauses))
            missing = set(generate.edges(spec, clause)) - reached
            assert not missing, f"{name}, {which}: clause {clause.key!r} has no case at {sorted(missing)}"


def test_the_edges_of_a_spec_name_every_size_and_pair():
    from attention_np.exercises import generate
    spec = ex.EXERCISES["mha_forward"].spec
    edges = generate.edges(spec)
    for axis in ("B", "L", "S", "d_model", "h", "d_k", "d_v"):
        assert {f"{axis}=1", f"{axis}>1"} <= set(edges), axis
    assert {"L<S", "L>S", "d_k<d_v", "d_k>d_v", "h*d_k<d_model", "h*d_k>d_model"} <= set(edges)
    assert {"t=0", "t=1", "t>1"} <= set(generate.edges(ex.EXERCISES["decode_step"].spec))
    assert {"lead=0", "lead=3", "lead axis=1"} <= set(generate.edges(ex.EXERCISES["attention"].spec))
    tiled = set(generate.edges(ex.EXERCISES["tiled_attention"].spec))
    assert {"block_size>S", "block_size=S", "block_size divides S", "not block_size divides S"} <= tiled
    # a clause pinned to one size leaves that axis's other edges, and its pairs, out
    l_1 = ex.EXERCISES["attention"].spec.clause("L_1")
    assert "L>1" not in generate.edges(ex.EXERCISES["attention"].spec, l_1)
    assert "L<S" not in generate.edges(ex.EXERCISES["attention"].spec, l_1)
    # a new axis brings its own edges
    wider = generate.Spec("x", spec.axes + (generate.Axis("n"),), spec.clauses, spec.build, spec.measure)
    assert {"n=1", "n>1"} <= set(generate.edges(wider))


def test_the_edges_a_case_sits_on_are_measured_from_its_arguments():
    from attention_np.exercises import generate
    spec = ex.EXERCISES["attention"].spec
    q, k, v = np.zeros((2, 1, 3)), np.zeros((2, 4, 3)), np.zeros((1, 4, 5), dtype=np.float64)
    got = generate.edges_of(spec, (q, k, v))
    assert {"L=1", "S>1", "d_k>1", "d_v>1", "d_k<d_v", "lead=1", "float64"} <= got
    assert "L<S" not in got                         # L is at its least size: not a pair of widths
    assert "lead axis=1" not in got and generate.ALL_LARGE not in got


def test_a_clause_that_cannot_reach_an_edge_is_refused_by_name():
    from attention_np.exercises import generate
    spec = generate.Spec(
        "toy", (generate.Axis("n"),), (generate.Clause("c", require=lambda z: z["n"] > 1),),
        build=lambda rng, z, key, family: (np.zeros(z["n"]),), measure=lambda a: {"n": a[0].size,
                                                                              "dtype": a[0].dtype},
        floats=False)
    with pytest.raises(ValueError, match="clause 'c' reaches the edge 'n=1'|no case of clause 'c'"):
        generate.draw(spec, 0)


@pytest.mark.parametrize("name", list(ex.EXERCISES))
def test_the_hidden_cases_are_drawn_at_other_sizes(name):
    e = ex.EXERCISES[name]
    spec = e.spec
    public = {repr(sorted(spec.measure(c.args).items())) for c in e.cases()}
    hidden = [repr(sorted(spec.measure(c.args).items())) for c in e.hidden_cases()]
    assert sum(h not in public for h in hidden) >= len(hidden) / 3, name
