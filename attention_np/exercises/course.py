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
from attention_np.exercises.notebooks import NOTEBOOKS, QUESTIONS, notebook
from attention_np.exercises.storage import save_bank
from attention_np.exercises.syllabus import kit_table, lesson_answers_markdown

HERE = pathlib.Path(__file__).resolve().parent
KIT_MODULES = ("engine.py", "storage.py", "loading.py", "probing.py", "probes.py", "probes_basics.py",
               "probes_attention.py", "probes_heads.py")
CONFIG = {"time_limit_per_case_s": 5.0, "time_limit_diagnosis_s": 30.0,
          "hidden_visibility": "after_due_date"}

STUDENT_README = """# Exercises on attention (§3.2 of "Attention Is All You Need")

Needs Python >= 3.10 and NumPy (`pip install numpy`); nothing else.

Open the notebooks in order ({order}). Each stub's docstring is the contract the checker holds
you to. Check a function from its notebook (the check cell under it) or from a shell:

    python check.py softmax my_softmax.py        # or the notebook: python check.py softmax 01_attention.ipynb
    python check.py --list

Exit code 0: passed; 1: wrong (`MISTAKE: ...` says what is wrong and gives a hint; `FAILED: ...`
when nothing more specific can be said); 2: the file cannot run. The cases you see here are the
public ones: the grader also runs hidden cases. Answer the written questions in the cells under
them.
"""

AUTOGRADER_README = """# Autograder (Gradescope)

Upload `gradescope.zip` as a "Programming Assignment" autograder (Ubuntu base image). Students
submit their notebooks (`01_attention.ipynb`, ...) or `.py` files; for each exercise the first
file defining its function is graded.

- `config.json`: the time limit per case (`time_limit_per_case_s`), for the diagnosis of a wrong
  answer (`time_limit_diagnosis_s`), and when hidden cases become visible (`hidden_visibility`).
- `checker/bank.json`: every case (public and hidden, `"hidden": true`) with its `"points"`;
  edit the points there, then zip the folder again (or rebuild).
- Dry run on a folder of submissions:
  `AUTOGRADER_ROOT=/tmp/ag AUTOGRADER_SOURCE=$PWD bash run_autograder` with the files in
  `/tmp/ag/submission/`; the result is `/tmp/ag/results/results.json`.

The written questions are graded by hand with the rubric in `../solutions/answers.md`.
Submissions run inside the grading container and can read its files, hidden cases included:
the usual limit of Gradescope autograders.
"""


def _copy_checker(dest: pathlib.Path, bank: dict, stem: str) -> None:
    pkg = dest / "checker"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The course checker (NumPy only), copied from '
                                     'attention_np.exercises."""\n')
    for name in KIT_MODULES:
        shutil.copyfile(HERE / name, pkg / name)
    save_bank(bank, pkg / stem)


def _write_notebooks(dest: pathlib.Path, variant: str) -> list:
    signatures = {n: e.signature for n, e in EXERCISES.items()}
    papers = {n: e.paper for n, e in EXERCISES.items()}
    paths = []
    for stem in NOTEBOOKS:
        path = dest / f"{stem}.ipynb"
        path.write_text(json.dumps(notebook(stem, variant, signatures, papers), indent=1) + "\n")
        paths.append(path)
    return paths


def answers_markdown() -> str:
    lines = ["# Written questions: answers and rubrics", "",
             "Each question is worth 3 points; the rubric says what earns each point.", ""]
    for stem, questions in QUESTIONS.items():
        lines += [f"## {stem}: {NOTEBOOKS[stem][0]}", ""]
        for i, (question, answer, rubric) in enumerate(questions, 1):
            lines += [f"**Question {i}.** {question}", "", f"*Answer.* {answer}", "",
                      f"*Rubric.* {rubric}", ""]
    return "\n".join(lines)


def build(out, *, force: bool = False) -> dict:
    """Write ``out/student``, ``out/autograder`` and ``out/solutions``; returns their paths.

    Raises ValueError if ``out`` holds any of the three folders and ``force`` is False.
    """
    out = pathlib.Path(out)
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
    public = {n: build_record(e) for n, e in EXERCISES.items()}
    full = {n: build_record(e, hidden=True) for n, e in EXERCISES.items()}

    student = folders["student"]
    _copy_checker(student, public, "public")
    shutil.copyfile(HERE / "kit" / "check.py", student / "check.py")
    _write_notebooks(student, "student")
    (student / "README.md").write_text(STUDENT_README.format(order=" -> ".join(NOTEBOOKS))
                                       + "\n## Lessons and exercises\n\n" + kit_table() + "\n")

    grader = folders["autograder"]
    _copy_checker(grader, full, "bank")
    for name in ("grade.py", "run_autograder", "setup.sh"):
        shutil.copyfile(HERE / "kit" / name, grader / name)
        if "." not in name or name.endswith(".sh"):
            (grader / name).chmod(0o755)
    (grader / "config.json").write_text(json.dumps(CONFIG, indent=1) + "\n")
    (grader / "README.md").write_text(AUTOGRADER_README)
    with zipfile.ZipFile(grader / "gradescope.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(grader.rglob("*")):
            if p.is_file() and p.name != "gradescope.zip" and p.name != "README.md":
                info = zipfile.ZipInfo(str(p.relative_to(grader)))
                info.external_attr = (p.stat().st_mode & 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, p.read_bytes())

    solutions = folders["solutions"]
    _copy_checker(solutions, public, "public")
    shutil.copyfile(HERE / "kit" / "check.py", solutions / "check.py")
    _write_notebooks(solutions, "solution")
    (solutions / "answers.md").write_text(answers_markdown())
    (solutions / "lesson_answers.md").write_text(lesson_answers_markdown())
    return folders
