"""`python -m attention_np course build`: the student kit (NumPy alone, no solution), the
Gradescope autograder run end to end on sample submissions, and the solutions."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises.notebooks import NOTEBOOKS, QUESTIONS

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "course" / "course_submissions"


@pytest.fixture(scope="module")
def built(course_build):
    return course_build


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
        assert _py_imports(path) <= {"__future__", "numpy", "ast", "json", "re", "pathlib", "types", "sys",
                                     "dataclasses", "checker", "signal", "subprocess", "contextlib",
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


def _links(text: str) -> list:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _kit_links(folder: Path) -> list:
    """(file, target) of every Markdown link in the folder's notebooks and .md files."""
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                found += [(path, t) for t in _links(src)]
    for path in sorted(folder.rglob("*.md")):
        found += [(path, t) for t in _links(path.read_text())]
    return found


def test_every_link_of_the_kit_resolves(built):
    # a link is an http(s) address or a file the kit ships; without --lessons-url an exercise
    # notebook names its lesson and links nothing (the lesson copies of lessons/ link no site page)
    for folder in (built / "student", built / "solutions"):
        for path, target in _kit_links(folder):
            if not target.startswith(("https://", "http://")):
                assert (path.parent / target.split("#")[0]).is_file(), (path.name, target)
    for nb_path in (built / "student").glob("*.ipynb"):
        head = json.loads(nb_path.read_text())["cells"][0]["source"]
        for lesson in NOTEBOOKS[nb_path.stem][1]:
            assert f"`{lesson}` (the course's lesson notebook `{lesson}.ipynb`, not in this folder)" in head


def test_lessons_url_makes_the_kit_link_the_site(tmp_path):
    r = subprocess.run([sys.executable, "-m", "attention_np", "course", "build", str(tmp_path / "c"),
                        "--lessons-url", "https://example.org/course/lessons/"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    student = tmp_path / "c" / "student"
    links = _kit_links(student)
    for stem, (_, lessons, _) in NOTEBOOKS.items():
        for lesson in lessons:
            want = f"https://example.org/course/lessons/{lesson}.html"
            assert (student / f"{stem}.ipynb", want) in links, (stem, lesson)
            assert (student / "README.md", want) in links
    assert all(t.startswith("https://") or (p.parent / t).is_file() for p, t in links)
    r = subprocess.run([sys.executable, "-m", "attention_np", "course", "build", str(tmp_path / "d"),
                        "--lessons-url", "../notebooks/"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "--lessons-url must be an http:// or https:// address" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "d").exists()


def test_the_readmes_say_what_to_submit_and_how_it_is_graded(built):
    from attention_np.exercises import syllabus
    from attention_np.exercises.checker import build_record
    from attention_np.exercises.course_kit import CONFIG, GRADESCOPE_TIMEOUT_S
    full = {n: build_record(e, hidden=True) for n, e in ex.EXERCISES.items()}
    total = sum(c.points for rec in full.values() for c in rec["cases"])
    parts = syllabus.graded_parts()
    assert total == pytest.approx(sum(p["points"] for p in parts.values()))
    n_questions = sum(len(q) for q in QUESTIONS.values())
    readme = (built / "student" / "README.md").read_text()
    grader = (built / "autograder" / "README.md").read_text()
    flat = " ".join(readme.split())
    assert f"**Functions, {total:g} points**" in readme
    assert (f"{parts['two-week unit']['points']} for the two-week unit's functions and "
            f"{parts['extension']['points']} for the extension's") in flat
    assert f"**Written questions, {3 * n_questions} points:** {n_questions} questions" in readme
    for text in (readme, grader):                   # the totals, each part apart
        for sentence in syllabus.points_sentences():
            assert sentence in " ".join(text.split()), sentence
    assert f"each case may take {CONFIG['time_limit_per_case_s']:g} s" in readme
    assert f"graded within {CONFIG['time_budget_s']:g} s" in readme
    assert "hidden cases' results become visible after the due date" in flat
    assert "Each function is graded in one file, its home" in flat
    assert "python check.py softmax 01_attention.ipynb" in readme
    for name, rec in full.items():                  # the table: the syllabus's points, the bank's cases
        hidden = sum(c.hidden for c in rec["cases"])
        points = syllabus.exercise_points(name)
        assert sum(c.points for c in rec["cases"]) == pytest.approx(points)
        row = (rf"\| `{name}` \| `\w+` \| [^|]+ \| \d+ \| \d+ \| {points} \| {len(rec['cases']) - hidden} \| "
               rf"{hidden} \|")
        assert re.search(row, readme) and re.search(row, grader), name
    minutes = GRADESCOPE_TIMEOUT_S / 60
    assert f"**Autograder timeout:** {minutes:g} minutes ({GRADESCOPE_TIMEOUT_S} s" in grader
    from attention_np.exercises.course_material import quiz_points
    assert f"set the assignment's autograder points to {total + quiz_points():g}" in " ".join(grader.split())
    assert CONFIG["time_budget_s"] + 60 < GRADESCOPE_TIMEOUT_S   # room to start and write the results


def test_a_py_that_keeps_the_notebooks_check_import_passes(built, tmp_path):
    # in the kit, as in the autograder: `from check import check` loads, its calls do nothing,
    # and what the file prints goes to stderr (stdout is the checker's message)
    src = (SUBMISSIONS / "correct" / "softmax_logsumexp.py").read_text()
    path = tmp_path / "softmax_nb.py"
    path.write_text("from check import check\n" + src + '\nprint(check("softmax", softmax))\n')
    r = _kit_check(sys.executable, built / "student", "softmax", path)
    assert r.returncode == 0 and r.stdout.startswith("PASSED: softmax"), r.stdout + r.stderr
    assert "check skipped" in r.stderr


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
