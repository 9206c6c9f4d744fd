"""``python -m attention_np course build OUT``: the course an instructor hands out.

Writes three folders:

- ``OUT/student/``: the exercise notebooks (stubs, contracts, hints, answer cells) and
  ``check.py``, a checker that needs NumPy alone and holds no solution: the public cases are
  stored with their expected values (``checker/public.json`` + ``.npz``, computed here by the
  library's references); the engine, the behaviour probes and the loader are copied from
  :mod:`attention_np.exercises` (they import no ``attention_np``).
- ``OUT/autograder/``: a Gradescope autograder (``setup.sh``, ``run_autograder``, ``grade.py``,
  ``config.json``, the public and hidden cases with points in ``checker/bank.json``), and the
  same files zipped as ``gradescope.zip``, the file to upload.
- ``OUT/solutions/``: the notebooks with model solutions, answers and rubrics, ``answers.md``
  (the exercise notebooks' questions), ``lesson_answers.md`` (the lesson notebooks' questions,
  from :mod:`.syllabus`) and the checker.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import zipfile

from attention_np.exercises import EXERCISES
from attention_np.exercises.checker import build_record
from attention_np.exercises.notebooks import (
    NOTEBOOKS,
    QUESTIONS,
    lesson_reference,
    notebook,
)
from attention_np.exercises.storage import save_bank
from attention_np.exercises.syllabus import (
    QUESTION_POINTS,
    graded_parts,
    kit_table,
    lesson_answers_markdown,
    points_sentences,
)
from attention_np.exercises.syllabus import points_table as syllabus_points_table

HERE = pathlib.Path(__file__).resolve().parent
KIT_MODULES = ("engine.py", "diagnose.py", "counterfactuals.py", "storage.py", "loading.py", "probing.py",
               "probes.py", "probes_basics.py", "probes_attention.py", "probes_heads.py")
#: config.json of the autograder. time_budget_s: the whole submission's grading stops by then
#: (well inside Gradescope's default 10-minute timeout, GRADESCOPE_TIMEOUT_S); each later exercise
#: keeps time_reserve_per_exercise_s of it (a correct exercise took 1 to 3 s on a busy 2-core machine).
CONFIG = {"time_limit_per_case_s": 5.0, "time_limit_diagnosis_s": 30.0, "time_budget_s": 480.0,
          "time_reserve_per_exercise_s": 15.0, "hidden_visibility": "after_due_date"}
#: the "Autograder timeout" to set in Gradescope (its default, 10 minutes): the budget plus time
#: to start, load NumPy and write the results
GRADESCOPE_TIMEOUT_S = 600

STUDENT_README = """# Exercises on attention (§3.2 of "Attention Is All You Need")

Needs Python >= 3.10 and NumPy (`pip install numpy`); nothing else. The lessons, their questions and
the projects need more (the attention_np package with plots): the course's install page,
docs/install.md, says what.

## The notebooks

Work through them in order; each one practises a lesson of the course{lessons}.

{notebooks}

In each notebook you write functions (a stub cell per function: its docstring is the contract
the checker holds you to) and answer a few written questions (the cell under each question).

## Check your work

Run the check cell under a function, or from a shell in this folder:

    python check.py softmax 01_attention.ipynb     # a notebook: its code cells, without the check cells
    python check.py softmax my_softmax.py          # or a .py file
    python check.py --list                         # the exercises and their signatures

Exit code 0: `PASSED`; 1: wrong (`MISTAKE: ...` says what is wrong and gives a hint, `FAILED: ...`
when nothing more specific can be said); 2: the file cannot run (the message says why). The
checker runs the public cases; the grader runs them and hidden ones.

Write vectorized NumPy: no Python loops over batch, heads or positions (`tiled_attention` loops
over key blocks, that is the point of it). This is a style rule: neither the checker nor the
grader looks at how you wrote a function, only at what it returns.

## What to submit

Submit the notebooks, keeping their names ({order_files}), with your
functions in their stub cells and your answers in their answer cells. You may instead put a
function in a `.py` file of your own and submit that too; then leave the function's stub in the
notebook as handed out (`raise NotImplementedError`). **Each function is graded in one file, its
home**: the notebook of that exercise, or a `.py` file named for it (`attention.py`). Writing
`attention` again in notebook 03, as a helper of your `mha_forward`, is fine: it is graded in
01, and the feedback names the other files. A function defined in two files neither of which
is its home (a `draft.py` and a `mine.py`, say) scores 0 until you submit again without one of
them: the grader will not guess which one you meant, and its feedback names the files.
`check.py` and `checker/` need not be submitted (they are ignored).
A `.py` file may keep the notebook's `from check import check` and its check calls: the grader
skips them.

## How it is graded

- **Functions, {function_points:g} points**, by the autograder: {unit_points} for the two-week
  unit's functions and {extension_points} for the extension's (table below). Each exercise is worth
  one point per clause of its contract (the stub's docstring) and one per output graded on its
  own, spread evenly over its cases: the public cases (the ones `check.py` runs) and hidden ones,
  drawn from the same contract at other sizes and values. After each submission you see your
  score on every public case and the checker's feedback for each exercise, with the name of the
  file it graded; the hidden cases' results become visible after the due date. A case whose
  outputs are partly right (the gradients `dq`, `dk`, `dv`, say) earns the share of its points
  for the outputs that are right.

{points_table}

- **Time:** each case may take {per_case:g} s; a case that takes longer scores 0 ("time limit
  exceeded"), and the whole submission is graded within {budget:g} s: a function that runs into
  its time limit again and again can use that up, and cases left ungraded score 0 (the feedback
  says so).
- **Written questions, {question_points} points:** {n_questions} questions, {per_question} points
  each, graded by hand with a rubric from the answer cells of your notebooks.

{totals}
"""

AUTOGRADER_README = """# Autograder (Gradescope)

Upload `gradescope.zip` as a "Programming Assignment" autograder.

- **Base image:** Ubuntu 22.04 (Gradescope's default) or later. `setup.sh` puts NumPy in a
  virtual environment, `/autograder/venv` (Ubuntu 23.04 and later refuse `pip install` into the
  system Python, PEP 668), installing `python3-venv` with apt if the image lacks it; it stops
  with a message if Python is older than 3.10.
- **Autograder timeout:** {timeout_min:g} minutes ({timeout:d} s, Gradescope's default). The
  grader stops itself after `time_budget_s` = {budget:g} s and writes `results.json` after every
  exercise. If you raise `time_budget_s`, set the timeout to at least `time_budget_s` + 120 s
  (Gradescope allows up to 40 minutes).
- **Points:** {function_points:g} for the functions ({unit_points} for the two-week unit's,
  {extension_points} for the extension's); with the quizzes' {quiz_points:g} (below) the autograder's
  total is {autograder_points:g}: set the assignment's autograder points to {autograder_points:g}.
  Each exercise's points (one per clause of its contract and one per output graded on its own, set
  in the syllabus) are spread evenly over its cases, {n_public} public and {n_hidden} hidden in all.
  The {n_questions} written questions ({question_points} points) are graded by hand with the
  rubric in `../solutions/answers.md`.

{points_table}

{totals}

What the grader does with a submission:

- Students submit their notebooks (`01_attention.ipynb`, ...) or `.py` files. Each function is
  graded in one file (an untouched stub does not count), named in the feedback: the one that
  defines it, or, when several do, its home (the exercise's notebook, or a `.py` named for it),
  the others named as not graded; several files and no single home among them score 0 for that
  exercise with a message naming them.
  `check.py`, `checker/` and hidden folders (`.ipynb_checkpoints`) are ignored. A `.py` that
  keeps the notebook's `from check import check` loads (the import gets a no-op `check`).
- Each exercise runs in its own process. Each case is one test worth its `"points"`; hidden
  cases are named "hidden case N" and are visible `after_due_date`. A 0-point "feedback" test per
  exercise carries the checker's message (`PASSED`, `MISTAKE: ...` with a hint, `FAILED: ...`),
  never the label of a hidden case.
- `config.json`: the time limit per case (`time_limit_per_case_s`, {per_case:g} s), for the
  diagnosis of a wrong answer (`time_limit_diagnosis_s`), the budget of the whole submission
  (`time_budget_s`), the part of it each later exercise keeps so that a slow exercise cannot
  starve the others (`time_reserve_per_exercise_s`, {reserve:g} s), and when hidden cases become
  visible (`hidden_visibility`).
- `checker/bank.json`: every case (public and hidden, `"hidden": true`) with its `"points"`;
  edit the points there, then zip the folder again (or rebuild).

Dry run on a folder of submissions (NumPy in the Python you use):

    mkdir -p /tmp/ag/submission && cp SUBMITTED_FILES /tmp/ag/submission/
    AUTOGRADER_ROOT=/tmp/ag AUTOGRADER_SOURCE=$PWD PYTHON=python3 bash run_autograder

The result is `/tmp/ag/results/results.json`. Submissions run inside the grading container and
can read its files, hidden cases included: the usual limit of Gradescope autograders.
"""


def counts(bank: dict) -> dict:
    """name -> (public cases, hidden cases) of ``bank``."""
    return {name: (sum(not c.hidden for c in rec["cases"]), sum(c.hidden for c in rec["cases"]))
            for name, rec in bank.items()}


def points_table(bank: dict) -> str:
    """The Markdown table of each exercise's notebook, part, points (the syllabus's) and cases."""
    return syllabus_points_table(counts(bank))


def _numbers(bank: dict) -> dict:
    cases = [c for rec in bank.values() for c in rec["cases"]]
    parts = graded_parts()
    n_questions = sum(p["questions"] for p in parts.values())
    return {"function_points": sum(p["points"] for p in parts.values()),
            "unit_points": parts["two-week unit"]["points"], "extension_points": parts["extension"]["points"],
            "totals": "**Totals.**\n\n" + "\n".join(f"- {t}" for t in points_sentences()),
            "n_hidden": sum(c.hidden for c in cases),
            "n_public": sum(not c.hidden for c in cases), "n_questions": n_questions,
            "per_question": QUESTION_POINTS, "question_points": QUESTION_POINTS * n_questions,
            "per_case": CONFIG["time_limit_per_case_s"], "budget": CONFIG["time_budget_s"],
            "reserve": CONFIG["time_reserve_per_exercise_s"], "timeout": GRADESCOPE_TIMEOUT_S,
            "timeout_min": GRADESCOPE_TIMEOUT_S / 60, "points_table": points_table(bank)}


def student_readme(bank: dict, lessons_url: str | None = None) -> str:
    """The kit's README.md: what to do, how to check, what to submit, how it is graded."""
    def ref(lesson):
        return lesson_reference(lesson, "student", lessons_url) if lessons_url else f"`{lesson}`"
    notebooks = kit_table(ref)          # the syllabus's one map of lessons to exercises
    where = (f" (the lessons are on the course site, {lessons_url.split('{lesson}')[0]})" if lessons_url
             else " (the lesson notebooks are not in this folder: your course gives them out)")
    from attention_np.exercises import course_material

    return STUDENT_README.format(lessons=where, notebooks=notebooks,
                                 order_files=", ".join(f"`{stem}.ipynb`" for stem in NOTEBOOKS),
                                 **_numbers(bank)) + course_material.student_readme_section()


def autograder_readme(bank: dict) -> str:
    """The autograder's README.md: how to set it up on Gradescope, its timeout and points."""
    from attention_np.exercises import course_material

    numbers = _numbers(bank)
    quiz = course_material.quiz_points()
    return (AUTOGRADER_README.format(**numbers, quiz_points=quiz,
                                     autograder_points=numbers["function_points"] + quiz)
            + course_material.autograder_readme_section())


def check_lessons_url(lessons_url: str | None) -> None:
    """Raise ValueError unless ``lessons_url`` is None or an http(s) URL."""
    if lessons_url is not None and (not lessons_url.startswith(("https://", "http://"))
                                    or any(c.isspace() for c in lessons_url)):
        raise ValueError(f"--lessons-url must be an http:// or https:// address without spaces, got "
                         f"{lessons_url!r}")


def _copy_checker(dest: pathlib.Path, bank: dict, stem: str) -> None:
    pkg = dest / "checker"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The course checker (NumPy only), copied from '
                                     'attention_np.exercises."""\n')
    for name in KIT_MODULES:
        shutil.copyfile(HERE / name, pkg / name)
    save_bank(bank, pkg / stem)


def _write_notebooks(dest: pathlib.Path, variant: str, lessons_url: str | None) -> list:
    signatures = {n: e.signature for n, e in EXERCISES.items()}
    papers = {n: e.paper for n, e in EXERCISES.items()}
    paths = []
    for stem in NOTEBOOKS:
        path = dest / f"{stem}.ipynb"
        path.write_text(json.dumps(notebook(stem, variant, signatures, papers, lessons_url), indent=1) + "\n")
        paths.append(path)
    return paths


def answers_markdown() -> str:
    lines = ["# Written questions: answers and rubrics", "",
             f"Each question is worth {QUESTION_POINTS} points; the rubric says what earns each point.",
             ""]
    for stem, questions in QUESTIONS.items():
        lines += [f"## {stem}: {NOTEBOOKS[stem][0]}", ""]
        for i, (question, answer, rubric) in enumerate(questions, 1):
            lines += [f"**Question {i}.** {question}", "", f"*Answer.* {answer}", "",
                      f"*Rubric.* {rubric}", ""]
    return "\n".join(lines)


def build(out, *, force: bool = False, lessons_url: str | None = None) -> dict:
    """Write ``out/student``, ``out/autograder`` and ``out/solutions``; returns their paths.

    ``lessons_url``: where the kit's notebooks link their lessons (the course site's lesson
    folder, e.g. ``https://HOST/PATH/lessons/``, or an address with ``{lesson}`` in it); None:
    they name the lesson, with no link.

    Raises ValueError if ``out`` holds any of the three folders and ``force`` is False, or if
    ``lessons_url`` is not an http(s) address.
    """
    check_lessons_url(lessons_url)
    folders = _empty_folders(pathlib.Path(out), force)
    public = {n: build_record(e) for n, e in EXERCISES.items()}
    full = {n: build_record(e, hidden=True) for n, e in EXERCISES.items()}
    _write_student(folders["student"], public, full, lessons_url)
    _write_autograder(folders["autograder"], full)
    _write_solutions(folders["solutions"], public, lessons_url)
    write_course_material(folders)
    return folders


def _empty_folders(out: pathlib.Path, force: bool) -> dict:
    """``{"student", "autograder", "solutions": out / each}``, each made empty (refused when one
    exists without ``force``, or when ``out`` is a file)."""
    folders = {k: out / k for k in ("student", "autograder", "solutions")}
    existing = [str(p) for p in folders.values() if p.exists()]
    if existing and not force:
        raise ValueError(f"{', '.join(existing)} already exist: pass --force to replace them")
    if out.exists() and not out.is_dir():
        raise ValueError(f"OUT {str(out)!r} is a file, expected a folder")
    for p in folders.values():
        if p.exists():
            shutil.rmtree(p)
        p.mkdir(parents=True)
    return folders


def _write_student(student: pathlib.Path, public: dict, full: dict, lessons_url: str | None) -> None:
    """The checker with the public cases, check.py, the student notebooks and the README."""
    _copy_checker(student, public, "public")
    shutil.copyfile(HERE / "kit" / "check.py", student / "check.py")
    _write_notebooks(student, "student", lessons_url)
    (student / "README.md").write_text(student_readme(full, lessons_url))


def _write_autograder(grader: pathlib.Path, full: dict) -> None:
    """The checker with the whole bank, grade.py and Gradescope's scripts, config.json, the README,
    and gradescope.zip of it all (the README left out)."""
    _copy_checker(grader, full, "bank")
    for name in ("grade.py", "run_autograder", "setup.sh"):
        shutil.copyfile(HERE / "kit" / name, grader / name)
        if "." not in name or name.endswith(".sh"):
            (grader / name).chmod(0o755)
    (grader / "config.json").write_text(json.dumps(CONFIG, indent=1) + "\n")
    (grader / "README.md").write_text(autograder_readme(full))
    with zipfile.ZipFile(grader / "gradescope.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(grader.rglob("*")):
            if p.is_file() and p.name != "gradescope.zip" and p.name != "README.md":
                info = zipfile.ZipInfo(str(p.relative_to(grader)))
                info.external_attr = (p.stat().st_mode & 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, p.read_bytes())


def _write_solutions(solutions: pathlib.Path, public: dict, lessons_url: str | None) -> None:
    """The checker with the public cases, check.py, the solution notebooks and the answers."""
    _copy_checker(solutions, public, "public")
    shutil.copyfile(HERE / "kit" / "check.py", solutions / "check.py")
    _write_notebooks(solutions, "solution", lessons_url)
    (solutions / "answers.md").write_text(answers_markdown())
    (solutions / "lesson_answers.md").write_text(lesson_answers_markdown())


def write_course_material(folders: dict) -> None:
    """The lessons (student copies), quizzes, prerequisites, misconceptions, rubrics and slides."""
    from attention_np.exercises import course_material

    course_material.write(folders)
