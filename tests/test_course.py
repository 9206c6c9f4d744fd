"""`python -m attention_np course build`: the student kit (NumPy alone, no solution), the
Gradescope autograder run end to end on sample submissions, and the solutions."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises.notebooks import NOTEBOOKS, QUESTIONS

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = ROOT / "tests" / "course_submissions"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    r = subprocess.run([sys.executable, "-m", "attention_np", "course", "build", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def numpy_python(tmp_path_factory):
    """A Python whose environment holds NumPy and nothing else (no system site-packages)."""
    env_dir = tmp_path_factory.mktemp("venv") / "numpy_only"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # the caller's PYTHONPATH must not reach it (a checkout's *.egg-info would show attention-np)
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", "numpy"], capture_output=True,
                       text=True, timeout=600, env=_clean_env())
    if r.returncode != 0:
        pytest.skip(f"cannot install numpy into a fresh venv (no package index?): {r.stderr[-300:]}")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, env=_clean_env()).stdout
    assert {line.split("==")[0].lower() for line in listed.split()} <= {"numpy", "pip", "setuptools"}
    return python


def _py_imports(path: Path) -> set:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_build_writes_the_three_folders(built):
    student, grader, solutions = built / "student", built / "autograder", built / "solutions"
    for folder in (student, solutions):
        assert sorted(p.stem for p in folder.glob("*.ipynb")) == sorted(NOTEBOOKS)
        assert (folder / "check.py").is_file() and (folder / "checker" / "public.npz").is_file()
    for name in ("setup.sh", "run_autograder", "grade.py", "config.json", "gradescope.zip"):
        assert (grader / name).is_file(), name
    assert os.access(grader / "run_autograder", os.X_OK) and os.access(grader / "setup.sh", os.X_OK)
    import zipfile
    with zipfile.ZipFile(grader / "gradescope.zip") as z:
        names = set(z.namelist())
    assert {"setup.sh", "run_autograder", "grade.py", "config.json", "checker/bank.json"} <= names
    answers = (solutions / "answers.md").read_text()
    for questions in QUESTIONS.values():
        for question, answer, rubric in questions:
            assert question in answers and answer in answers and rubric in answers


def test_the_student_kit_holds_no_solution_and_imports_numpy_alone(built):
    student = built / "student"
    for path in student.rglob("*.py"):
        assert _py_imports(path) <= {"__future__", "numpy", "ast", "json", "pathlib", "types", "sys",
                                     "dataclasses", "checker", "signal", "subprocess",
                                     "tempfile"}, path
    text = "\n".join(p.read_text() for p in student.rglob("*.py"))
    for fn in ("sdpa_forward", "ref_", "flash_attention_forward", "def _masked_softmax", "solution_source"):
        assert fn not in text, fn
    for nb_path in student.glob("*.ipynb"):
        nb = json.loads(nb_path.read_text())
        stubs = [c for c in nb["cells"] if "stub" in c["metadata"].get("tags", [])]
        assert stubs and all(c["source"].rstrip().endswith("raise NotImplementedError  # your code here")
                             for c in stubs)
        assert not any("solution" in c["metadata"].get("tags", []) for c in nb["cells"])
        answers = [c for c in nb["cells"] if "answer" in c["metadata"].get("tags", [])]
        assert len(answers) == len(QUESTIONS[nb_path.stem])
        assert all(c["source"] == "*Your answer here.*" for c in answers)
        assert "../notebooks/" in nb["cells"][0]["source"]          # links its lesson


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, **extra}


def _kit_check(python, kit, name, path):
    return subprocess.run([str(python), "check.py", name, str(path)], cwd=kit, capture_output=True,
                          text=True, timeout=300, env=_clean_env())


def test_student_checker_runs_with_numpy_alone(built, numpy_python, tmp_path):
    kit = built / "student"
    r = subprocess.run([str(numpy_python), "-c", "import attention_np"], capture_output=True, text=True,
                       cwd=tmp_path, env=_clean_env())
    assert r.returncode != 0 and "No module named 'attention_np'" in r.stderr   # the library is not there
    r = _kit_check(numpy_python, kit, "softmax", SUBMISSIONS / "correct" / "softmax_logsumexp.py")
    assert r.returncode == 0 and r.stdout.startswith("PASSED"), r.stdout + r.stderr
    r = _kit_check(numpy_python, kit, "softmax", SUBMISSIONS / "wrong" / "softmax_in_place.py")
    assert r.returncode == 1
    assert r.stdout.startswith("MISTAKE: softmax: wrote into an input: your function changed its input x")
    r = _kit_check(numpy_python, kit, "tiled_attention",
                   SUBMISSIONS / "wrong" / "tiled_attention_max_from_zero.py")
    assert r.returncode == 1
    assert r.stdout.startswith("MISTAKE: tiled_attention: running max started at 0 instead of -inf"), r.stdout
    r = _kit_check(numpy_python, kit, "causal_mask",
                   kit / "07_tiling_and_decoding.ipynb")   # the untouched notebook
    assert r.returncode == 1 and "not implemented yet" in r.stdout, r.stdout + r.stderr
    bad = {"syntax.py": ("def softmax(x)\n    return x\n", "syntax error at line 1"),
           "imports.py": ("import torch\ndef softmax(x):\n    return x\n", "ModuleNotFoundError"),
           "other.py": ("def soft_max(x):\n    return x\n", "defines no function 'softmax'"),
           "notes.txt": ("softmax", "is not a .py file or a notebook")}
    for name, (source, says) in bad.items():
        (tmp_path / name).write_text(source)
        r = _kit_check(numpy_python, kit, "softmax", tmp_path / name)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert says in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _forget_kit_modules():
    for mod in [m for m in sys.modules if m in ("check", "checker") or m.startswith("checker.")]:
        del sys.modules[mod]


def test_kit_and_library_give_the_same_verdicts(built, monkeypatch):
    # the stored public cases give the library's verdict on every fixture, word for word
    monkeypatch.syspath_prepend(str(built / "student"))
    _forget_kit_modules()
    import check as kit

    from attention_np.exercises.loading import load_function
    try:
        for path in sorted(SUBMISSIONS.rglob("*.py")):
            name = re.search(r"# exercise: (\w+)", path.read_text()).group(1)
            fn = load_function(path, ex.function_name(name))
            assert kit.check(name, fn).message == ex.check(name, fn).message, path.name
    finally:
        _forget_kit_modules()


ONE_CORRECT_FILE_EACH = [
    "softmax_logsumexp.py", "softmax_backward_einsum.py", "causal_mask_arange.py", "padding_mask_compare.py",
    "attention_einsum.py", "attention_backward_manual.py", "split_heads_swapaxes.py",
    "merge_heads_moveaxis.py", "mha_forward_own_attention.py", "mha_backward_manual.py",
    "tiled_attention_online.py", "decode_step_concat.py", "sinusoidal_loop_free.py"]
CRASH = "def attention(q, k, v, mask=None):\n    raise RuntimeError('boom')\n"
LOOP = "def split_heads(x, num_heads):\n    while True:\n        pass\n"
# right on the public cases (length <= 50), wrong on the hidden length 100
SHORT = ("import numpy as np\n\n\ndef sinusoidal(length, d_model):\n"
         "    pos = np.arange(length)[:, None]\n"
         "    ang = pos / 10000.0 ** (np.arange(0, d_model, 2) / d_model)\n"
         "    pe = np.zeros((length, d_model))\n"
         "    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)\n"
         "    return pe if length <= 50 else np.zeros((length, d_model))\n")
SYNTAX = "def causal_mask(L, S, align)\n    return None\n"


def _grade(python, grader, submission: Path, tmp_path, config=None):
    root = tmp_path / "ag"
    if root.exists():
        shutil.rmtree(root)
    (root / "submission").mkdir(parents=True)
    for f in submission.iterdir():
        shutil.copy(f, root / "submission" / f.name)
    source = tmp_path / "source"
    if not source.exists():
        shutil.copytree(grader, source)
    if config:
        cfg = json.loads((source / "config.json").read_text())
        (source / "config.json").write_text(json.dumps({**cfg, **config}))
    env = _clean_env(AUTOGRADER_ROOT=str(root), AUTOGRADER_SOURCE=str(source), PYTHON=str(python))
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(source / "run_autograder")], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    return result, time.monotonic() - t0


def _by_exercise(result):
    scores, feedback = {}, {}
    for t in result["tests"]:
        name, _, what = t["name"].partition(": ")
        if what == "feedback":
            feedback[name] = t["output"]
        else:
            got, top = scores.get(name, (0, 0))
            scores[name] = (got + t["score"], top + t["max_score"])
    return scores, feedback


def test_autograder_grades_sample_submissions_end_to_end(built, numpy_python, tmp_path):
    grader = built / "autograder"
    subs = tmp_path / "subs"
    correct = subs / "correct"
    correct.mkdir(parents=True)
    for name in ONE_CORRECT_FILE_EACH:                     # one file per exercise
        shutil.copy(SUBMISSIONS / "correct" / name, correct)
    result, _ = _grade(numpy_python, grader, correct, tmp_path)
    scores, feedback = _by_exercise(result)
    assert sorted(scores) == sorted(ex.EXERCISES)
    assert all(got == top > 0 for got, top in scores.values()), scores
    total = sum(top for _, top in scores.values())
    assert result["score"] == sum(t["score"] for t in result["tests"]) == total
    assert all(m.startswith("PASSED") for m in feedback.values())
    for t in result["tests"]:
        assert set(t) == {"name", "score", "max_score", "output", "visibility"}
        hidden = "hidden case" in t["name"]
        assert t["visibility"] == ("after_due_date" if hidden else "visible")
    assert any("hidden case" in t["name"] for t in result["tests"])

    # one submission with a wrong softmax, a crashing attention, an endless split_heads, a
    # sinusoidal wrong on one hidden case only and a causal_mask file that does not parse
    mixed = subs / "mixed"
    shutil.copytree(correct, mixed)
    (mixed / "softmax_logsumexp.py").write_text((SUBMISSIONS / "wrong" / "softmax_in_place.py").read_text())
    (mixed / "attention_einsum.py").write_text(CRASH)
    (mixed / "split_heads_swapaxes.py").write_text(LOOP)
    (mixed / "sinusoidal_loop_free.py").write_text(SHORT)
    (mixed / "causal_mask_arange.py").write_text(SYNTAX)
    result, seconds = _grade(numpy_python, grader, mixed, tmp_path,
                             config={"time_limit_per_case_s": 0.5, "time_limit_diagnosis_s": 3})
    scores, feedback = _by_exercise(result)
    broken = {"softmax", "attention", "split_heads", "sinusoidal", "causal_mask"}
    assert all(g == t for n, (g, t) in scores.items() if n not in broken), scores
    assert result["score"] == sum(g for g, _ in scores.values())
    got, top = scores["softmax"]
    assert got < top
    assert feedback["softmax"].startswith("MISTAKE: softmax: wrote into an input: your function changed")
    assert scores["attention"][0] == 0 and feedback["attention"].startswith("FAILED: attention")
    assert "RuntimeError: boom" in feedback["attention"]
    assert scores["split_heads"][0] == 0 and feedback["split_heads"].startswith("FAILED: split_heads")
    outputs = [t["output"] for t in result["tests"] if t["name"].startswith("split_heads: ")
               and t["name"] != "split_heads: feedback"]
    assert outputs and all("time limit exceeded" in o for o in outputs), outputs
    assert seconds < 60 + 0.5 * len(outputs)               # the endless loop was stopped per case
    sinusoidal = {t["name"]: t for t in result["tests"] if t["name"].startswith("sinusoidal: ")}
    failed = [n for n, t in sinusoidal.items() if t["score"] < t["max_score"]]
    assert failed == ["sinusoidal: hidden case 3"], failed  # (100, 6): one hidden case, its points
    assert scores["sinusoidal"][0] == scores["sinusoidal"][1] - sinusoidal[failed[0]]["max_score"]
    assert not feedback["sinusoidal"].startswith("PASSED"), feedback["sinusoidal"]
    assert scores["causal_mask"][0] == 0 and feedback["causal_mask"].startswith("FAILED: causal_mask")
    assert "syntax error at line 1" in feedback["causal_mask"], feedback["causal_mask"]


def test_course_command_line_errors(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "attention_np", "course", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
    r = run()
    assert r.returncode == 2 and "course build OUT" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "student").mkdir()
    r = run("build", str(tmp_path))
    assert r.returncode == 2 and "already exist" in r.stderr and "--force" in r.stderr
    (tmp_path / "file").write_text("x")
    r = run("build", str(tmp_path / "file"))
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
