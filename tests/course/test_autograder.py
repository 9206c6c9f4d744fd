"""The Gradescope autograder of `python -m attention_np course build`, run end to end in a
temporary root laid out as Gradescope lays it out (source/, submission/, results/): what it
scores, what it says, and that results.json follows Gradescope's published format at every
moment. Small time limits (config.json) keep the runs short."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

import attention_np.exercises as ex

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "course" / "course_submissions"

# Gradescope's results.json, as its documentation states it ("Autograder Specifications", Output
# format, in github.com/gradescope/autograder_samples docs/specs.md): every field optional, the
# score on the top level or on every test; the formats and visibilities it lists.
FORMATS = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
GRADESCOPE_TEST = {
    "type": "object", "additionalProperties": False,
    "properties": {"score": {"type": "number"}, "max_score": {"type": "number"},
                   "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
                   "name_format": FORMATS, "number": {"type": "string"}, "output": {"type": "string"},
                   "output_format": FORMATS, "tags": {"type": "array", "items": {"type": "string"}},
                   "visibility": VISIBILITY, "extra_data": {"type": "object"}}}
GRADESCOPE_RESULTS = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": FORMATS, "test_output_format": FORMATS, "test_name_format": FORMATS,
        "visibility": VISIBILITY, "stdout_visibility": VISIBILITY, "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": GRADESCOPE_TEST},
        "leaderboard": {"type": "array", "items": {
            "type": "object", "required": ["name", "value"],
            "properties": {"name": {"type": "string"}, "value": {"type": ["number", "string"]},
                           "order": {"enum": ["asc", "desc"]}}}}},
    "anyOf": [{"required": ["score"]},
              {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}]}


def validate(result: dict) -> None:
    jsonschema.validate(result, GRADESCOPE_RESULTS)
    assert result["score"] == sum(t["score"] for t in result["tests"])


def test_the_schema_refuses_what_gradescope_would():
    good = {"score": 1.0, "tests": [{"name": "a", "score": 1.0, "max_score": 1.0}]}
    validate(good)
    for bad in ({"tests": [{"name": "a"}]},                                  # no score anywhere
                {"score": 1.0, "tests": [{"name": "a", "visibility": "later"}]},
                {"score": 1.0, "tests": [{"name": "a", "score": "1"}]},
                {"score": 1.0, "stdout_visibility": "public"},
                {"score": 1.0, "tests": [], "comment": "no such field"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, GRADESCOPE_RESULTS)


@pytest.fixture(scope="module")
def grader(course_build):
    return course_build / "autograder"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, **extra}


def _layout(tmp_path: Path, grader: Path, files: dict, config: dict) -> tuple:
    """A Gradescope root: source/ (the zip's files, config.json changed), submission/ (files)."""
    root = tmp_path / "autograder"
    shutil.copytree(grader, root / "source")
    cfg = json.loads((root / "source" / "config.json").read_text())
    (root / "source" / "config.json").write_text(json.dumps({**cfg, **config}))
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    return root, _env(AUTOGRADER_ROOT=str(root), AUTOGRADER_SOURCE=str(root / "source"))


def _by_exercise(result):
    scores, feedback = {}, {}
    for t in result["tests"]:
        if t["name"].startswith("quiz: "):            # the quizzes: tests/course/test_course_material.py
            continue
        name, _, what = t["name"].partition(": ")
        if what == "feedback":
            feedback[name] = t["output"]
        else:
            got, top = scores.get(name, (0, 0))
            scores[name] = (got + t["score"], top + t["max_score"])
    return scores, feedback


def _correct(name: str) -> str:
    return (SUBMISSIONS / "correct" / name).read_text()


CORRECT = {  # one file per exercise
    "softmax.py": _correct("softmax_logsumexp.py"),
    "softmax_backward.py": _correct("softmax_backward_einsum.py"),
    "causal_mask.py": _correct("causal_mask_arange.py"),
    "padding_mask.py": _correct("padding_mask_compare.py"),
    "attention.py": _correct("attention_einsum.py"),
    "attention_backward.py": _correct("attention_backward_manual.py"),
    "split_heads.py": _correct("split_heads_swapaxes.py"),
    "merge_heads.py": _correct("merge_heads_moveaxis.py"),
    "mha_forward.py": _correct("mha_forward_own_attention.py"),
    "mha_backward.py": _correct("mha_backward_manual.py"),
    "tiled_attention.py": _correct("tiled_attention_online.py"),
    "decode_step.py": _correct("decode_step_concat.py"),
    "sinusoidal.py": _correct("sinusoidal_loop_free.py")}
CRASH = "def attention(q, k, v, mask=None):\n    raise RuntimeError('boom')\n"
LOOP = "def split_heads(x, num_heads):\n    while True:\n        pass\n"
SYNTAX = "def causal_mask(L, S, align)\n    return None\n"
# right on the public cases (length <= 50), wrong on the hidden length 100
def _one_hidden_case():
    """(number, (length, d_model)) of the first hidden sinusoidal case whose sizes no public case has."""
    public = {c.args for c in ex.EXERCISES["sinusoidal"].cases()}
    return next((i, c.args) for i, c in enumerate(ex.EXERCISES["sinusoidal"].hidden_cases(), 1)
                if c.args not in public)


SHORT = ("import numpy as np\n\n\ndef sinusoidal(length, d_model):\n"
         "    pos = np.arange(length)[:, None]\n"
         "    ang = pos / 10000.0 ** (np.arange(0, d_model, 2) / d_model)\n"
         "    pe = np.zeros((length, d_model))\n"
         "    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)\n"
         f"    return pe if (length, d_model) != {_one_hidden_case()[1]} else np.zeros((length, d_model))\n")
STUB = ('def mha_backward(dout, query, key, value, params, num_heads):\n    """..."""\n'
        "    raise NotImplementedError\n")


def test_every_kind_of_submission_at_once(grader, tmp_path):
    files = {**{f: text for f, text in CORRECT.items() if f != "tiled_attention.py"},
             "softmax.py": (SUBMISSIONS / "wrong" / "softmax_in_place.py").read_text(),   # wrong
             "attention.py": CRASH, "split_heads.py": LOOP, "causal_mask.py": SYNTAX,
             "sinusoidal.py": SHORT,
             # the notebook's setup line and check call kept in a .py
             "padding_mask.py": "from check import check\n" + CORRECT["padding_mask.py"]
                                + '\nprint(check("padding_mask", padding_mask))\n',
             # a leftover draft that defines merge_heads too: merge_heads.py is its home, graded
             "draft.py": CORRECT["merge_heads.py"].replace("moveaxis", "swapaxes"),
             # tiled_attention in two files, neither its home: refused, both named
             "draft_tiled.py": CORRECT["tiled_attention.py"],
             "tiling_v2.py": CORRECT["tiled_attention.py"],
             # an untouched stub in another file does not count; nor do the kit's checker files
             "notebook_export.py": STUB, "check.py": "def softmax(x):\n    return x\n",
             ".ipynb_checkpoints/softmax-checkpoint.py": "def softmax(x):\n    return x\n"}
    root, env = _layout(tmp_path, grader, files, {"time_limit_per_case_s": 0.5, "time_limit_diagnosis_s": 3})
    r = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                       env={**env, "PYTHON": sys.executable}, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    validate(result)
    scores, feedback = _by_exercise(result)
    assert sorted(scores) == sorted(ex.EXERCISES)
    broken = {"softmax", "attention", "split_heads", "causal_mask", "sinusoidal", "tiled_attention"}
    for name, (got, top) in scores.items():
        assert (got == top > 0) == (name not in broken), (name, got, top)
    for name in set(ex.EXERCISES) - broken - {"merge_heads"}:
        assert feedback[name].startswith(f"PASSED: {name}"), feedback[name]
        assert feedback[name].endswith(f"Graded file: {name}.py"), feedback[name]
    assert feedback["merge_heads"].startswith("PASSED: merge_heads"), feedback["merge_heads"]
    assert feedback["merge_heads"].endswith("Graded file: merge_heads.py (its home; also defined in "
                                            "draft.py, not graded there)"), feedback["merge_heads"]
    assert "Graded file: padding_mask.py" in feedback["padding_mask"]       # from check import check
    assert feedback["mha_backward"].endswith("Graded file: mha_backward.py")   # not the stub's file
    assert feedback["softmax"].startswith("MISTAKE: softmax: wrote into an input")
    assert "Graded file: softmax.py" in feedback["softmax"]              # not check.py, not the checkpoint
    assert scores["attention"][0] == 0 and "RuntimeError: boom" in feedback["attention"]
    assert scores["causal_mask"][0] == 0
    assert "causal_mask.py has a syntax error at line 1" in feedback["causal_mask"]
    # the endless loop: every case cut by the per-case limit, said in each test and in the feedback
    assert scores["split_heads"][0] == 0 and feedback["split_heads"].startswith("FAILED: split_heads")
    outputs = [t["output"] for t in result["tests"] if t["name"].startswith("split_heads: ")
               and not t["name"].endswith("feedback")]
    assert outputs and all(o == "time limit exceeded (0.5 s)" for o in outputs), outputs
    assert "time limit exceeded" in feedback["split_heads"]
    # two files and neither its home: refused, both named, what to do
    assert scores["tiled_attention"][0] == 0
    assert feedback["tiled_attention"].startswith(
        "FAILED: tiled_attention: tiled_attention is defined in 2 files: draft_tiled.py, tiling_v2.py."), \
        feedback["tiled_attention"]
    assert "submit again" in feedback["tiled_attention"]
    # one hidden case wrong: its points lost, and the visible feedback does not name it
    sinusoidal = {t["name"]: t for t in result["tests"] if t["name"].startswith("sinusoidal: ")}
    failed = [n for n, t in sinusoidal.items() if t["score"] < t["max_score"]]
    assert failed == [f"sinusoidal: hidden case {_one_hidden_case()[0]}"], failed
    assert sinusoidal[failed[0]]["visibility"] == "after_due_date"
    assert not feedback["sinusoidal"].startswith("PASSED") and "a hidden case" in feedback["sinusoidal"]
    hidden_labels = [c.label for c in ex.EXERCISES["sinusoidal"].hidden_cases()]
    assert not any(label in feedback["sinusoidal"] for label in hidden_labels), feedback["sinusoidal"]
    for t in result["tests"]:
        visible = t["name"].endswith("feedback") or "hidden case" not in t["name"]
        assert t["visibility"] == ("visible" if visible else "after_due_date"), t
    assert "Ignored" in result["output"] and "check.py" in result["output"]
    assert "causal_mask.py has a syntax error" in result["output"]


def test_a_submission_that_loops_everywhere_is_stopped_by_the_budget(grader, tmp_path):
    loops = "".join(f"def {ex.function_name(n)}(*args, **kwargs):\n    while True:\n        pass\n\n\n"
                    for n in ex.EXERCISES)
    # looping through every case would take (cases) * 0.2 s + 13 * 0.5 s, far beyond the budget; the
    # first exercises get their cases cut by the per-case limit, the last ones by the budget
    budget = 16.0                # room for the workers to start on a busy machine
    root, env = _layout(tmp_path, grader, {"loops.py": loops},
                        {"time_limit_per_case_s": 0.2, "time_limit_diagnosis_s": 0.5, "time_budget_s": budget,
                         "time_reserve_per_exercise_s": 0.3})
    results = root / "results" / "results.json"
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", str(root / "source" / "run_autograder")],
                            env={**env, "PYTHON": sys.executable}, cwd=root)
    texts = set()
    while proc.poll() is None:                  # results.json is valid whenever it is read
        if results.exists():
            texts.add(results.read_text())
        time.sleep(0.05)
    snapshots = [json.loads(text) for text in texts]
    seconds = time.monotonic() - t0
    assert proc.returncode == 0
    final = json.loads(results.read_text())
    for snap in [*snapshots, final]:
        validate(snap)
    assert len({json.dumps(s["tests"]) for s in snapshots}) >= 2       # written as grading went
    assert seconds < budget + 10, seconds        # the budget, the last worker's grace, start-up
    assert final["score"] == 0
    outputs = [t["output"] for t in final["tests"]
               if not t["name"].endswith("feedback") and not t["name"].startswith("quiz: ")]
    assert len(outputs) == sum(len(ex.EXERCISES[n].cases()) + len(ex.EXERCISES[n].hidden_cases())
                               for n in ex.EXERCISES)
    assert any(o.startswith("time limit exceeded (0.2 s)") for o in outputs)
    assert any(o.startswith("not graded: the time budget ran out") for o in outputs)
    assert all(o.startswith(("time limit exceeded", "not graded", "stopped")) for o in outputs), set(outputs)
    _, feedback = _by_exercise(final)
    assert all(m.startswith("FAILED") for m in feedback.values())
    assert "time limit exceeded" in feedback["softmax"]                 # the first exercise
    assert "the time budget" in feedback["sinusoidal"]                 # the last, cut or never reached


@pytest.mark.venv
@pytest.mark.skipif(os.environ.get("ATTENTION_NP_VENV") != "1", reason="makes a venv and installs NumPy "
                    "into it (about 20 s): set ATTENTION_NP_VENV=1 (.ci/run does)")
def test_setup_makes_a_venv_that_run_autograder_uses(grader, tmp_path):
    root, env = _layout(tmp_path, grader, {"pe.py": CORRECT["sinusoidal.py"]}, {})
    r = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                       timeout=600, cwd=root / "source")
    if r.returncode != 0 and ("index" in r.stderr.lower() or "connection" in r.stderr.lower()):
        pytest.skip(f"cannot install numpy into a new venv (no package index?): {r.stderr[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    venv_python = root / "venv" / "bin" / "python"
    listed = subprocess.run([str(venv_python), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, env=env).stdout
    assert {line.split("==")[0].lower() for line in listed.split()} <= {"numpy", "pip", "setuptools"}
    fake = tmp_path / "bin"                      # a python3 on PATH that fails: the venv's is used
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nexit 97\n")
    (fake / "python3").chmod(0o755)
    r = subprocess.run(["bash", str(root / "source" / "run_autograder")],
                       env={**env, "PATH": f"{fake}:{env['PATH']}"}, capture_output=True, text=True,
                       timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    validate(result)
    scores, feedback = _by_exercise(result)
    assert scores["sinusoidal"][0] == scores["sinusoidal"][1] > 0
    assert feedback["sinusoidal"].endswith("Graded file: pe.py")
    assert "no file of the submission defines it" in feedback["softmax"]


def test_a_file_whose_top_level_code_outlasts_the_limit_is_said_to_load_too_long(grader, tmp_path):
    # the alarm rings inside the student's top-level code, which the loader reports as an error the
    # file raised: the grader must still say it was time, never "the file cannot run"
    slow = "import time\ntime.sleep(30)\n\n\ndef softmax(x):\n    return x\n"
    root, env = _layout(tmp_path, grader, {"softmax.py": slow},
                        {"time_limit_per_case_s": 0.5, "time_budget_s": 20,
                         "time_reserve_per_exercise_s": 0.3})
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env={**env, "PYTHON": sys.executable},
                   cwd=root, check=True, timeout=120)
    scores, feedback = _by_exercise(json.loads((root / "results" / "results.json").read_text()))
    assert scores["softmax"][0] == 0
    assert "loading softmax.py took longer than 0.5 s" in feedback["softmax"], feedback["softmax"]
    assert "cannot run" not in feedback["softmax"]


def _notebook_exercises(path: Path) -> list:
    """The exercises a notebook's check cells check, in order."""
    import re
    nb = json.loads(path.read_text())
    return [m for c in nb["cells"] if "check" in c.get("metadata", {}).get("tags", [])
            for m in re.findall(r'check\("(\w+)"', "".join(c["source"]))]


def test_the_solution_notebooks_pass_the_kits_checker_file_by_file(course_build):
    # what a student runs from a shell: python check.py NAME their_notebook.ipynb. The notebook's
    # setup cell (import numpy as np) is part of the submission: it was once left out, and every
    # notebook that used np raised NameError
    solutions = course_build / "solutions"
    seen = set()
    for nb in sorted(solutions.glob("*.ipynb")):
        for name in _notebook_exercises(nb):
            r = subprocess.run([sys.executable, "check.py", name, nb.name], cwd=solutions,
                               capture_output=True, text=True, env=_env(), timeout=300)
            assert r.returncode == 0 and r.stdout.startswith(f"PASSED: {name}"), (nb.name, name, r.stdout)
            seen.add(name)
    assert seen == set(ex.EXERCISES)


def test_the_solution_notebooks_uploaded_get_every_point(grader, course_build, tmp_path):
    # the student README says to submit the notebooks: the five filled ones, as uploaded
    files = {nb.name: nb.read_text() for nb in (course_build / "solutions").glob("*.ipynb")}
    root, env = _layout(tmp_path, grader, files, {})
    r = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                       env={**env, "PYTHON": sys.executable}, timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    validate(result)
    scores, feedback = _by_exercise(result)
    assert sorted(scores) == sorted(ex.EXERCISES)
    for name, (got, top) in scores.items():
        assert got == top > 0, (name, got, top, feedback.get(name))


def test_a_notebook_and_a_py_file_get_the_same_verdict(course_build, tmp_path):
    # the same wrong function, in the student's notebook (its stub cell filled) and in a .py
    # file: one verdict, whatever the format
    student = course_build / "student"
    nb_path = student / "01_attention.ipynb"
    nb = json.loads(nb_path.read_text())
    wrong = (SUBMISSIONS / "wrong" / "softmax_in_place.py").read_text()
    stub = next(c for c in nb["cells"] if c["cell_type"] == "code"
                and "def softmax(" in "".join(c["source"]))
    stub["source"] = wrong
    work = tmp_path / "kit"
    shutil.copytree(student, work)
    (work / "mine.ipynb").write_text(json.dumps(nb))
    (work / "mine.py").write_text("import numpy as np\n\n" + wrong)
    out = [subprocess.run([sys.executable, "check.py", "softmax", f], cwd=work, capture_output=True,
                          text=True, env=_env(), timeout=300) for f in ("mine.ipynb", "mine.py")]
    assert out[0].returncode == out[1].returncode == 1, [o.stdout for o in out]
    assert out[0].stdout.startswith("MISTAKE: softmax: wrote into an input"), out[0].stdout
    assert out[0].stdout.replace("mine.ipynb", "F") == out[1].stdout.replace("mine.py", "F")
