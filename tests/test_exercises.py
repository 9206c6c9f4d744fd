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
    ("softmax", student_softmax_float64, "upcast float32 to float64"),
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
    assert "cases fail" in result.message


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
    assert r.returncode == 1 and "NOT IMPLEMENTED YET" in r.stdout, r.stdout + r.stderr
    r = run_cli("attention", str(good))
    assert r.returncode == 2 and "defines no function 'attention'" in r.stderr
    r = run_cli("--list")
    assert r.returncode == 0 and all(name in r.stdout for name in ex.EXERCISES)


def test_the_instructors_guide_numbers():
    import re

    import attention_np as an
    text = (ROOT / "docs" / "instructors.md").read_text()
    r = an.softmax_saturation([16, 64, 256], n_keys=16, n_queries=2000, rng=0)
    unscaled = ", ".join(f"{w:.3f}" for w in r["max_weight_unscaled"])
    scaled = ", ".join(f"{w:.3f}" for w in r["max_weight_scaled"])
    assert f"largest weight is {unscaled} unscaled and {scaled} scaled" in text
    assert f"falls to {r['entropy_unscaled'][-1]:.3f} nats" in text
    assert f"log 16 = {np.log(16):.3f}" in text
    n = sum(len(e.mistakes) for e in ex.EXERCISES.values())
    assert f"{len(ex.EXERCISES)} exercises, {n} catalogued mistakes" in text
    for name, e in ex.EXERCISES.items():
        row = next(line for line in text.splitlines()
                   if line.startswith("| `") and f"`{name}`" in line.split("|")[1])
        counts = [int(c) for c in re.findall(r"\| (\d+)(?: \+ (\d+))?:", row)[0] if c]
        assert len(e.mistakes) in counts


def test_db_k_is_zero():
    import attention_np as an
    rng = np.random.default_rng(0)
    p = an.init_mha_params(8, 2, rng=rng)
    x, y = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8))
    out, cache = an.mha_forward(x, y, y, p, num_heads=2)
    grads = an.mha_backward(rng.normal(size=out.shape), cache)[3]
    assert np.abs(grads["b_k"]).max() < 1e-12 < np.abs(grads["b_q"]).max()
