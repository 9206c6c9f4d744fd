"""The course's checker: correct answers pass, each catalogued mistake is named, stubs are reported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import attention_np.exercises as ex

ROOT = Path(__file__).resolve().parents[1]
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
    assert r.status == "mistake" and r.mistake == "masked after the softmax", str(r)
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
