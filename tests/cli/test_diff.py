"""``python -m attention_np diff``: the whole matrix runs green, and the exit status reports
mismatches, unexplained known differences and missing frameworks."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_np.cli import diff, main
from attention_np.interop import cases, known, runners, tolerance
from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def full_run():
    """One run of the whole matrix (every framework, both dtypes), shared by the tests below."""
    for module in ("torch", "jax", "flax"):
        require(module)
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        status = main(["diff", "--framework", "all", "--seed", "0"])
    finally:
        sys.stdout, sys.stderr = old
    return status, out.getvalue(), err.getvalue()


def test_diff_all_exits_zero_with_every_row_agreeing(full_run):
    status, out, _ = full_run
    assert status == 0, out
    n = sum(len(c.frameworks) for c in cases.CASES) * 2
    assert f"{n}/{n} diffs (case, framework, dtype) agree, 0 mismatches" in out
    assert "3/3 known differences demonstrated as documented (0 not run)" in out
    assert "MISMATCH" not in out and "NOT as documented" not in out


def test_diff_table_has_one_row_per_case_and_framework_with_both_dtypes(full_run):
    _, out, _ = full_run
    for case in cases.CASES:
        for framework in case.frameworks:
            lines = [line for line in out.splitlines()
                     if line.startswith(case.name) and f" {framework} " in line]
            assert len(lines) == 1, (case.name, framework)
            assert len(re.findall(r"\d\.\de[-+]\d\d", lines[0])) == 6      # 3 numbers per dtype
            # JAX float64 is judged with the float32 rule (its softmax is float32), marked *
            assert lines[0].rstrip().endswith("*  ok") == (framework == "jax")
    assert "* judged by the float32 rule" in out


def test_diff_demonstrates_each_known_difference(full_run):
    _, out, _ = full_run
    for demonstrate in known.DEMOS:
        demo = demonstrate(("torch", "jax", "flax"), 0)
        assert demo.explained, "\n".join([demo.title, *demo.lines])   # each behaviour measured
        assert demo.title in out and all(line in out for line in demo.lines)
    assert re.search(r"need_weights=False +uses the causal mask", out)
    assert re.search(r"need_weights=True +uses the attn_mask", out)


def test_diff_shows_progress_on_stderr(full_run):
    _, _, err = full_run
    # not a terminal: the one ProgressBar prints a line at the start and at each tenth
    n = sum(len(c.frameworks) for c in cases.CASES) * 2 + len(known.DEMOS)
    bars = [line for line in err.splitlines() if line.startswith("[")]
    assert bars[0].startswith(f"[{'.' * 30}] 0/{n}") and len(bars) == 11
    assert bars[-1].startswith(f"[{'#' * 30}] {n}/{n}") and bars[-1].endswith(" done")


ALL_DEMOS = known.DEMOS


@pytest.fixture
def small_matrix(monkeypatch):
    """Two cases and no demonstrations: enough to test the exit status quickly."""
    monkeypatch.setattr(cases, "CASES", cases.CASES[:1] + cases.CASES[9:10])
    monkeypatch.setattr(known, "DEMOS", ())


def test_a_mismatch_makes_the_exit_status_nonzero(small_matrix, monkeypatch, capsys):
    require("torch")
    honest = runners.RUNNERS["torch"]

    def off_by_a_little(kind, x, dout):
        got = honest(kind, x, dout)
        got["out"] = got["out"] + np.asarray(1e-6, got["out"].dtype)
        return got

    monkeypatch.setitem(runners.RUNNERS, "torch", off_by_a_little)
    assert main(["diff", "--framework", "torch", "--dtype", "float64"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "0/2 diffs (case, framework, dtype) agree, 2 mismatches" in out


def test_framework_not_installed_is_skipped_under_all_but_fails_when_named(small_matrix,
                                                                           monkeypatch, capsys):
    require("torch")
    monkeypatch.setattr(diff, "_missing", lambda f: None if f == "torch" else f"No module named '{f}'")
    monkeypatch.setattr(known, "DEMOS", ALL_DEMOS)
    assert main(["diff", "--framework", "all", "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    hint = 'pip install "jax>=0.4.30"'                    # JAX needs no torch: its line installs none
    assert f"skipped: not installed ({hint}; No module named 'jax')" in out
    assert "skipped: jax, flax" in out
    # the JAX demonstration did not run, and the summary says so instead of counting it
    assert f"(not run: jax not installed ({hint}))" in out
    assert "2/2 known differences demonstrated as documented (1 not run)" in out
    assert main(["diff", "--framework", "flax", "--dtype", "float64"]) == 1
    captured = capsys.readouterr()
    assert "--framework flax was asked for but is not installed" in captured.err
    assert "asked for" not in captured.out


def test_diff_with_no_framework_installed_fails_and_says_how_to_install(small_matrix, monkeypatch,
                                                                        capsys):
    monkeypatch.setattr(diff, "_missing", lambda f: f"No module named '{f}'")
    monkeypatch.setattr(known, "DEMOS", ALL_DEMOS)
    assert main(["diff"]) == 1
    captured = capsys.readouterr()
    # attention_np alone demonstrates no difference from a framework: none is counted as shown
    assert "0/0 diffs" in captured.out and "0/0 known differences demonstrated as documented " \
        "(3 not run)" in captured.out
    assert "not selected" not in captured.out
    assert "torch is not installed: pip install torch==2.13.0 --index-url " \
        "https://download.pytorch.org/whl/cpu" in captured.out
    assert "no framework to diff against is installed" in captured.err


def test_a_known_difference_that_stopped_reproducing_fails_the_run(small_matrix, monkeypatch,
                                                                   capsys):
    def drifted(frameworks, seed):
        demo = known.Demo("a documented difference")
        demo.observe("some framework", "now behaves like attention_np", False)
        return demo

    monkeypatch.setattr(known, "DEMOS", (drifted,))
    assert main(["diff", "--framework", "all", "--dtype", "float64"]) == 1
    assert "NOT as documented" in capsys.readouterr().out


def test_command_modules_import_numpy_only():
    code = ("import sys, attention_np.cli, attention_np.interop, attention_np.cli.diff; "
            "heavy = {'torch', 'jax', 'flax', 'matplotlib'} & set(sys.modules); "
            "assert not heavy, heavy")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_every_test_named_in_docs_frameworks_exists():
    docs = (ROOT / "docs" / "frameworks.md").read_text()
    paths = sorted((ROOT / "tests").rglob("test_*.py"))
    sources = "".join(p.read_text() for p in paths)
    files = {p.stem for p in paths}                    # a file named in the docs is not a function
    named = set(re.findall(r"\btest_[a-z0-9_]+", docs)) - files
    assert len(named) > 20
    missing = sorted(n for n in named if f"def {n}" not in sources)
    assert not missing, missing


@pytest.mark.parametrize("framework, dtype, rounded", [("jax", "float64", True),
                                                       ("torch", "float32", True),
                                                       ("torch", "float64", False)])
def test_rows_under_the_float32_rule_give_every_side_float32_rounded_inputs(
        monkeypatch, framework, dtype, rounded):
    seen = {}

    def spy(kind, x, dout):                      # stands in for the framework
        seen.update(x=x, dout=dout)
        return runners.run_ours(kind, x, dout)

    monkeypatch.setitem(runners.RUNNERS, framework, spy)
    case = next(c for c in cases.CASES if c.name == "sdpa cross L=5 S=7")
    row = diff.diff_case(case, framework, dtype, seed=0)
    assert row.ok and row.checks[0].rule == ("float64" if not rounded else "float32")
    for a in (seen["x"]["q"], seen["x"]["k"], seen["x"]["v"], seen["dout"]):
        assert a.dtype == dtype
        assert np.array_equal(a, a.astype(np.float32).astype(dtype)) == rounded


# ---------------------------------------------------------------- the tolerance policy

@pytest.mark.parametrize("rule", ["float64", "float32"])
def test_an_infinite_reference_entry_neither_loosens_the_tolerance_nor_hides_a_mismatch(rule):
    got, ref = np.array([0.0, 5.0]), np.array([np.inf, 1.0])
    check = (tolerance.check_float64("x", got, ref) if rule == "float64"
             else tolerance.check_float32("x", got, ref, peer=got))
    assert check.size == 1.0 and np.isfinite(check.tol)      # size over the finite entries
    assert np.isnan(check.err) and not check.ok


def test_equal_infinities_agree_but_nan_never_does():
    assert tolerance.max_abs_error([np.inf, -np.inf, 1.0], [np.inf, -np.inf, 1.0]) == 0.0
    assert tolerance.max_abs_error([np.inf], [1.0]) == np.inf
    for got, ref in (([np.nan], [1.0]), ([1.0], [np.nan]), ([np.nan], [np.nan])):
        assert np.isnan(tolerance.max_abs_error(got, ref))
        assert not tolerance.check_float64("x", got, ref).ok


def test_diff_model_reads_a_local_checkpoint_folder(tmp_path, capsys):
    """``diff --model PATH``: a model saved with save_pretrained is loaded from the folder
    (local files only) and diffed; a bad path is one line on stderr, exit 2."""
    require("torch")
    require("transformers")
    from attention_np.__main__ import main
    from attention_np.interop.transformers import families as fam
    model = fam.family_model("qwen3", seed=3)
    model.save_pretrained(tmp_path / "qwen3-tiny")
    assert main(["diff", "--model", str(tmp_path / "qwen3-tiny")]) == 0
    out = capsys.readouterr().out
    assert "Qwen3Model (float64), every attention layer vs attention_np -> AGREE" in out
    assert "layers.1.self_attn" in out and "rotary_emb (cos, sin)" in out
    for bad, words in ((tmp_path / "nothing-here", "neither a known family nor a folder"),
                       (tmp_path, "has no config.json")):
        assert main(["diff", "--model", str(bad)]) == 2
        captured = capsys.readouterr()
        assert words in captured.err and captured.err.count("\n") == 1, captured.err
        assert "Traceback" not in captured.err and captured.out == ""


def test_diff_model_cached_continues_a_decoder_from_its_cache_and_refuses_the_rest(capsys):
    """``diff --model NAME --cached``: the prompt, then the last 2 tokens on its cache, each
    layer's cached keys and values a row; an encoder (its prompt leaves no cache) is refused
    by that, exit 1; an encoder-decoder, or --cached without --model, is one line on stderr,
    exit 2."""
    require("torch")
    require("transformers")
    from attention_np.__main__ import main
    assert main(["diff", "--model", "llama", "--cached"]) == 0
    out = capsys.readouterr().out
    assert "-> AGREE" in out and "layers.0.self_attn#1 (cache)" in out
    assert main(["diff", "--model", "bert", "--cached"]) == 1     # an encoder: refused
    captured = capsys.readouterr()
    assert "-> INCOMPLETE" in captured.out and "returned no cache" in captured.out
    assert main(["diff", "--model", "t5", "--cached"]) == 2
    captured = capsys.readouterr()
    assert "is not a decoder" in captured.err and captured.err.count("\n") == 1, captured.err
    assert main(["diff", "--cached"]) == 2
    captured = capsys.readouterr()
    assert "needs --model" in captured.err and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""
