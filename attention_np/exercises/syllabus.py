"""The syllabus of the course: every document that lists the lessons, made from one set of records.

The lessons, their questions and the two-week plan are records in :mod:`.syllabus_data` (one
module per lesson: edit a lesson there). From its :data:`LESSONS` and :data:`SESSIONS` this module
generates

- the two-week plan (six 90-minute sessions plus homework) and the full nine-lesson syllabus in
  ``docs/instructors.md``, the course-order table of ``docs/teaching.md`` and the lesson table of
  ``README.md``, each between marker comments ``<!-- syllabus:NAME -->`` ... ``<!-- /syllabus -->``;
- the lesson table of the student kit's README (:func:`kit_table`, used by :mod:`.course`);
- in every lesson notebook, a header cell (objectives, prerequisites, links to the paper and to
  the explorer) after the title and a questions cell at the end, both tagged (``syllabus-header``,
  ``syllabus-questions``), markdown only;
- the answers and rubrics of the lesson questions, for the solutions kit only
  (:func:`lesson_answers_markdown`).

``python -m attention_np.exercises.syllabus --write`` rewrites the marked sections and the
notebooks' generated cells (from the repository root, or the root given after it); ``--check``
lists what differs, exit 1. ``tests/course/test_syllabus.py`` fails when a document differs from
what the records generate.

Standard library only (plus :mod:`.notebooks`): the student kit's README is built from it. The
points of each exercise (:func:`exercise_points`, what its contract asks) are set here too; the
course build spreads them over the cases, and every count and total the instructors' guide and
the kits' READMEs state comes from here (:func:`points_section` imports the exercises, to count
their cases, when it runs).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

from attention_np.exercises.notebooks import CLAUSES, NOTEBOOKS, QUESTIONS
from attention_np.exercises.rubrics import rubric_markdown
from attention_np.exercises.syllabus_data import (
    EXTENSION,
    LESSONS,
    MAX_HOMEWORK_MINUTES,
    SESSION_MINUTES,
    SESSIONS,
)
from attention_np.exercises.syllabus_data.records import EXPLORER_VIEWS, KINDS, Lesson, Session

PAPER = "https://arxiv.org/abs/1706.03762"
PAPER_TITLE = 'Vaswani et al. (2017), "Attention Is All You Need"'
EXPLORER = "../docs/explorer.md"


#: points of each written question of an exercise notebook (graded by hand with its rubric)
QUESTION_POINTS = 3
#: the outputs the autograder scores one by one (a case's parts), where there is more than one
GRADED_OUTPUTS = {
    "attention_backward": ("dq", "dk", "dv"),
    "mha_backward": ("dquery", "dkey", "dvalue",
                     *(f"grads['{n}']" for n in ("W_k", "W_o", "W_q", "W_v", "b_k", "b_o", "b_q", "b_v"))),
    "decode_step": ("out", "k_cache", "v_cache"),
}


def exercise_points(name: str) -> int:
    """What an exercise asks, in points: one per clause of its contract (the stub's docstring,
    :data:`~attention_np.exercises.notebooks.CLAUSES`) and one per output graded on its own
    (:data:`GRADED_OUTPUTS`). The autograder spreads them evenly over the exercise's cases."""
    return len(CLAUSES[name][1]) + len(GRADED_OUTPUTS.get(name, ("output",)))


def _notebook_part(stem: str) -> str:
    in_unit = {lesson(n).stem for s in SESSIONS for n in s.lessons}
    return "two-week unit" if set(NOTEBOOKS[stem][1]) & in_unit else "extension"


def graded_parts() -> dict:
    """``{"two-week unit": {...}, "extension": {...}}``: each part's exercises (in course order),
    their points, and the exercise notebooks' written questions and their points."""
    out = {}
    for stem, (_, _, exercises) in NOTEBOOKS.items():
        part = out.setdefault(_notebook_part(stem), {"exercises": [], "points": 0, "questions": 0})
        part["exercises"] += list(exercises)
        part["points"] += sum(exercise_points(n) for n in exercises)
        part["questions"] += len(QUESTIONS.get(stem, ()))
    for part in out.values():
        part["question_points"] = QUESTION_POINTS * part["questions"]
    return out


def points_table(counts: dict | None = None) -> str:
    """Each exercise's part of the course, what it asks and its points; with ``counts`` (name ->
    (public cases, hidden cases)) the cases they are spread over."""
    head = "| Exercise | Notebook | Part | Contract clauses | Outputs graded | Points |"
    rows = [head + (" Public cases | Hidden cases |" if counts else ""),
            "|---|---|---|---|---|---|" + ("---|---|" if counts else "")]
    for stem, (_, _, exercises) in NOTEBOOKS.items():
        for name in exercises:
            row = (f"| `{name}` | `{stem}` | {_notebook_part(stem)} | {len(CLAUSES[name][1])} | "
                   f"{len(GRADED_OUTPUTS.get(name, ('output',)))} | {exercise_points(name)} |")
            rows.append(row + (f" {counts[name][0]} | {counts[name][1]} |" if counts else ""))
    return "\n".join(rows)


def _extension_lessons() -> str:
    """The lessons whose exercise notebooks are the extension's, e.g. "lesson 7"."""
    numbers = sorted(lesson(les).number for stem, (_, lessons, _) in NOTEBOOKS.items()
                     if _notebook_part(stem) == "extension" for les in lessons)
    return ("lesson " if len(numbers) == 1 else "lessons ") + ", ".join(map(str, numbers))


def points_sentences() -> list:
    """The totals, one sentence per part and one for both."""
    parts = graded_parts()
    unit, ext = parts["two-week unit"], parts["extension"]
    total = unit["points"] + ext["points"]
    return [f"The two-week unit: {len(unit['exercises'])} functions, {unit['points']} points, and "
            f"{unit['questions']} written questions, {unit['question_points']} points.",
            f"The extension ({_extension_lessons()}): {len(ext['exercises'])} functions, "
            f"{ext['points']} points, and "
            f"{ext['questions']} written questions, {ext['question_points']} points.",
            f"The autograder grades all {len(unit['exercises']) + len(ext['exercises'])} functions: "
            f"{total} points ({unit['points']} + {ext['points']}); the "
            f"{unit['questions'] + ext['questions']} written questions "
            f"({unit['question_points'] + ext['question_points']} points, {QUESTION_POINTS} each) "
            "are graded by hand."]


def points_section() -> str:
    """docs/instructors.md's points: the table, the totals and the cases they are spread over
    (drawn by :mod:`attention_np.exercises.generate`; imported here, at build time only)."""
    from attention_np.exercises import EXERCISES
    counts = {n: (len(e.cases()), len(e.hidden_cases())) for n, e in EXERCISES.items()}
    public, hidden = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    return "\n".join([
        "Each exercise is worth one point per clause of its contract (the stub's docstring) and one "
        "per output graded on its own; the autograder spreads an exercise's points evenly over its "
        "public and hidden cases, and a case whose outputs are partly right earns that share of "
        "its points. Generated from `attention_np/exercises/syllabus.py` (`exercise_points`).", "",
        points_table(counts), "", *(f"- {t}" for t in points_sentences()),
        f"- {public} public and {hidden} hidden cases: a submission that loops in every case would "
        f"take about {public + hidden} × 5 s + {len(EXERCISES)} × 30 s without the time budget."])


def lesson(number_or_stem) -> Lesson:
    """The lesson with this number (1-9) or stem."""
    for les in LESSONS:
        if number_or_stem in (les.number, les.stem):
            return les
    raise ValueError(f"no lesson {number_or_stem!r}; expected 1-{len(LESSONS)} or one of "
                     f"{[les.stem for les in LESSONS]}")


# ---------------------------------------------------------------------------------------------
# generated text


def _exercise_cell(les: Lesson, link: bool = False) -> str:
    """The exercise of a lesson; ``link``: a link relative to the repository root (README)."""
    if les.exercise_notebook:
        names = ", ".join(f"`{n}`" for n in les.exercises)
        path = f"exercises/{les.exercise_notebook}.ipynb"
        return f"[`{path}`]({path}) ({names})" if link else f"`{path}` ({names})"
    if les.project:
        return "project (rubric in the solutions kit)"
    return "questions"


def _session_minutes(session: Session) -> int:
    return sum(lesson(n).minutes for n in session.lessons) + sum(m for _, m in session.in_class)


def _carried_in(number: int) -> list:
    """(what, minutes, from session) of the homework carried to session ``number`` (1-based)."""
    return [(what, m, i) for i, s in enumerate(SESSIONS, 1) for what, m, due in s.carry if due == number]


def session_homework(number: int) -> int:
    """Minutes of homework session ``number`` leaves: its lessons' homework, less what it carries to a
    later session, plus what an earlier one carried to it."""
    session = SESSIONS[number - 1]
    return (sum(lesson(n).homework_minutes for n in session.lessons) - sum(m for _, m, _ in session.carry)
            + sum(m for _, m, _ in _carried_in(number)))


def _check_plan() -> None:
    for i, session in enumerate(SESSIONS, 1):
        if _session_minutes(session) != SESSION_MINUTES:
            raise ValueError(f"session {i} takes {_session_minutes(session)} min, expected {SESSION_MINUTES}")
        if any(not i < due <= len(SESSIONS) for _, _, due in session.carry):
            raise ValueError(f"session {i} carries homework to {session.carry}: expected a later session")
        if session_homework(i) > MAX_HOMEWORK_MINUTES:
            raise ValueError(f"session {i} leaves {session_homework(i)} min of homework, more than "
                             f"{MAX_HOMEWORK_MINUTES}: carry part of it to a later session")


def two_week_plan() -> str:
    """The two-week unit: six 90-minute sessions plus homework, then the extension."""
    _check_plan()
    rows = ["| Session | Lesson | In class (90 min) | Homework | Questions |", "|---|---|---|---|---|"]
    for i, session in enumerate(SESSIONS, 1):
        week = 1 if i <= 3 else 2
        lessons = [lesson(n) for n in session.lessons]
        names = ", ".join(f"`notebooks/{les.stem}`" for les in lessons)
        parts = [f"lesson {les.number} ({les.minutes} min)" for les in lessons]
        parts += [f"{activity} ({m} min)" for activity, m in session.in_class]
        homework = "; ".join([session.homework]
                             + [f"{what}, carried from session {j} (about {m} min of it)"
                                for what, m, j in _carried_in(i)]
                             + [f"{what} is due at session {due}" for what, _, due in session.carry])
        nq = sum(len(les.questions) for les in lessons)
        rows.append(f"| week {week}, {i} | {names} | {'; '.join(parts)} | {homework} "
                    f"(about {session_homework(i)} min) | {nq} |")
    total_home = sum(session_homework(i) for i in range(1, len(SESSIONS) + 1))
    ext = [lesson(n) for n in EXTENSION]
    ext_names = ", ".join(f"`notebooks/{les.stem}`" for les in ext)
    return "\n".join(rows + [
        "",
        f"In class: {len(SESSIONS)} sessions × {SESSION_MINUTES} min = {len(SESSIONS) * SESSION_MINUTES} min "
        f"(each session's lesson minutes plus its activity add up to {SESSION_MINUTES}); homework about "
        f"{total_home} min ({total_home / 60:.0f} h) over the two weeks.",
        f"Extension (a third week, or a project for students who finish early): {ext_names}, "
        f"{sum(les.minutes for les in ext)} min in class and about "
        f"{sum(les.homework_minutes for les in ext)} min of homework.",
        "Times are planning estimates for a student who has the prerequisites, not measurements."])


def full_syllabus() -> str:
    """Every lesson, in course order: paper, time, exercise, questions, figures, explorer view."""
    rows = ["| # | Lesson | Paper | In class | Homework | Exercise | Questions | Figures | Explorer |",
            "|---|---|---|---|---|---|---|---|---|"]
    for les in LESSONS:
        figs = ", ".join(f"`{f}`" if f.endswith(".png") else f.replace("|", "\\|") for f in les.figures)
        figs = figs or "none"
        view = f"`#{les.explorer}`" if les.explorer else "none"
        rows.append(f"| {les.number} | `notebooks/{les.stem}` | {'; '.join(les.paper)} | {les.minutes} min "
                    f"| {les.homework_minutes} min | {_exercise_cell(les)} | {len(les.questions)} "
                    f"| {figs} | {view} |")
    return "\n".join(rows)


def objectives_section() -> str:
    """Each lesson's objectives and prerequisites (what the lesson's header cell says)."""
    out = []
    for les in LESSONS:
        out += [f"**Lesson {les.number}: {les.title}.** A student can "
                + "; ".join(les.objectives) + ". *Assumes:* " + "; ".join(les.prerequisites) + "."]
        if les.project:
            out += ["", f"*Project.* {les.project}"]
        out += [""]
    return "\n".join(out).rstrip()


def course_order_table() -> str:
    """docs/teaching.md's course order."""
    rows = ["| step | lesson | why here | exercise |", "| ---: | --- | --- | --- |"]
    for les in LESSONS:
        rows.append(f"| {les.number} | `{les.stem}` | {les.why} | {_exercise_cell(les)} |")
    return "\n".join(rows)


def readme_lessons() -> str:
    """README.md's list of the lessons, with the exercise of each."""
    rows = ["| lesson | exercise | in the two-week unit |", "| --- | --- | --- |"]
    in_unit = {n for s in SESSIONS for n in s.lessons}
    for les in LESSONS:
        when = f"session {_session_of(les.number)}" if les.number in in_unit else "extension"
        rows.append(f"| [{les.number:02d} {les.title}](notebooks/{les.stem}.ipynb) | "
                    f"{_exercise_cell(les, link=True)} | {when} |")
    return "\n".join(rows)


def _session_of(number: int) -> int:
    return next(i for i, s in enumerate(SESSIONS, 1) if number in s.lessons)


def kit_table(ref=None) -> str:
    """The student kit's table: each lesson (read it first) and the exercise notebook that goes with
    it. ``ref(stem)`` writes a lesson's reference (a link to the course site, or its name)."""
    ref = ref or (lambda stem: f"`{stem}`")
    rows = ["| Lesson (read it first) | Exercise notebook | Functions |", "|---|---|---|"]
    for les in LESSONS:
        lesson = f"{les.number:02d} {les.title}: {ref(les.stem)}"
        if les.exercise_notebook:
            names = ", ".join(f"`{n}`" for n in les.exercises)
            rows.append(f"| {lesson} | `{les.exercise_notebook}.ipynb` | {names} |")
        else:
            kind = "a project" if les.project else "questions"
            rows.append(f"| {lesson} | none ({kind}) | |")
    return "\n".join(rows)


def _generated_from(les: Lesson) -> str:
    """The comment that opens a generated cell: where its lesson's record is kept."""
    return (f"<!-- generated from attention_np/exercises/syllabus_data/lesson{les.number:02d}.py: "
            f"edit it there, then run python -m attention_np.exercises.syllabus --write -->")


def header_markdown(les: Lesson) -> str:
    """The generated cell after a lesson's title: objectives, prerequisites, paper, explorer, time."""
    lines = [_generated_from(les),
             f"**What you will be able to do after lesson {les.number}:**", ""]
    lines += [f"- {o}" for o in les.objectives]
    lines += ["", "**What it assumes:** " + "; ".join(les.prerequisites) + ".", ""]
    links = f"**Paper:** [{PAPER_TITLE}]({PAPER}), {', '.join(les.paper)}."
    if les.explorer:
        links += f" **Explorer:** [{EXPLORER_VIEWS[les.explorer]}]({EXPLORER}#{les.explorer})."
    links += (f" **Time:** about {les.minutes} min in class and {les.homework_minutes} min of homework; "
              f"{len(les.questions)} questions at the end.")
    return "\n".join(lines + [links])


def questions_markdown(les: Lesson) -> str:
    """The generated last cell of a lesson: its questions (answers are in the solutions kit only)."""
    lines = [_generated_from(les),
             f"## Questions on lesson {les.number}", "",
             "Answer each in a few sentences; where a question says run, change a copy of the cell it "
             "names. Your instructor has the answers and rubrics."]
    for i, q in enumerate(les.questions, 1):
        lines += ["", f"{i}. **{KINDS[q.kind]}** {q.text}"]
    if les.project:
        lines += ["", f"**Project.** {les.project}"]
    return "\n".join(lines)


def lesson_answers_markdown() -> str:
    """The answers and rubrics of every lesson's questions (the solutions kit's lesson_answers.md)."""
    lines = ["# Lesson questions: answers and rubrics", "",
             "The questions at the end of each lesson notebook (generated from the lesson records in "
             "`attention_np/exercises/syllabus_data/`). Each is worth 3 points; the rubric says what earns "
             "each point. A predict-then-run answer quotes what the lesson's own cell prints.", ""]
    for les in LESSONS:
        lines += [f"## Lesson {les.number}: {les.title}", ""]
        for i, q in enumerate(les.questions, 1):
            lines += [f"**Question {i} ({KINDS[q.kind][:-1].lower()}).** {q.text}", "",
                      f"*Answer.* {q.answer}", "", f"*Rubric.* {q.rubric}", ""]
        if les.project:
            lines += [f"**Project.** {les.project}", "", rubric_markdown(les.stem), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# writing the documents and the notebooks

#: file -> {section name: function}; a section is between <!-- syllabus:NAME --> and <!-- /syllabus -->
SECTIONS = {
    "docs/teaching.md": {"course-order": course_order_table},
    "docs/instructors.md": {"two-week-plan": two_week_plan, "full-syllabus": full_syllabus,
                            "objectives": objectives_section, "points": points_section},
    "README.md": {"readme-lessons": readme_lessons},
}
HEADER_TAG, QUESTIONS_TAG = "syllabus-header", "syllabus-questions"


def replace_sections(text: str, sections: dict, name: str = "document") -> str:
    """``text`` with each marked section replaced by its generated content."""
    for key, make in sections.items():
        pattern = re.compile(rf"(<!-- syllabus:{re.escape(key)} -->\n).*?(\n<!-- /syllabus -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{name} has no section <!-- syllabus:{key} --> ... <!-- /syllabus -->")
        content = make()
        text = pattern.sub(lambda m, content=content: m.group(1) + content + m.group(2), text, count=1)
    return text


def _md_cell(cell_id: str, tag: str, text: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {"tags": [tag]},
            "source": text.splitlines(keepends=True)}


def update_notebook(nb: dict, les: Lesson) -> dict:
    """``nb`` with its generated header (after the title cell) and questions (last) cells; idempotent."""
    generated = {HEADER_TAG, QUESTIONS_TAG}
    cells = [c for c in nb["cells"] if not generated & set(c.get("metadata", {}).get("tags", []))]
    cells.insert(1, _md_cell(HEADER_TAG, HEADER_TAG, header_markdown(les)))
    cells.append(_md_cell(QUESTIONS_TAG, QUESTIONS_TAG, questions_markdown(les)))
    return {**nb, "cells": cells}


def _notebook_text(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def expected_files(root) -> dict:
    """path -> the text it should have, for every file the syllabus generates into."""
    root = pathlib.Path(root)
    out = {}
    for rel, sections in SECTIONS.items():
        out[root / rel] = replace_sections((root / rel).read_text(encoding="utf-8"), sections, rel)
    for les in LESSONS:
        path = root / "notebooks" / f"{les.stem}.ipynb"
        out[path] = _notebook_text(update_notebook(json.loads(path.read_text(encoding="utf-8")), les))
    return out


def stale_files(root) -> list:
    """The generated-into files whose text differs from what the syllabus generates."""
    return [p for p, text in expected_files(root).items() if p.read_text(encoding="utf-8") != text]


def parser() -> argparse.ArgumentParser:
    """The command line: ``(--write | --check) [ROOT]``."""
    p = argparse.ArgumentParser(
        prog="python -m attention_np.exercises.syllabus", usage="%(prog)s (--write | --check) [ROOT]",
        allow_abbrev=False,
        description="Rewrite (--write) or compare (--check) the documents' marked sections and the "
                    "lesson notebooks' generated cells against the course's records "
                    "(attention_np/exercises/syllabus_data).")
    what = p.add_mutually_exclusive_group()            # one of them: checked by _arguments
    what.add_argument("--write", action="store_true", help="rewrite the files that differ")
    what.add_argument("--check", action="store_true", help="list the files that differ; exit 1 if any")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT",
                   help="the repository root (default: the current directory)")
    return p


def _arguments(argv: list) -> argparse.Namespace:
    """``argv`` parsed; an argument it does not know is named before a missing ``--write``/``--check``."""
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not (args.write or args.check):
        p.error("one of the arguments --write --check is required")
    return args


def main(argv=None) -> int:
    """Exit status: 0 done (or, with ``--check``, nothing differs), 1 ``--check`` found files that
    differ, 2 a bad command line or ``ROOT`` (said on stderr, naming it; no traceback)."""
    try:
        args = _arguments(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:          # argparse has printed the usage and the error (or --help)
        return e.code
    root = pathlib.Path(args.root)
    missing = [rel for rel in [*SECTIONS, *(f"notebooks/{les.stem}.ipynb" for les in LESSONS)]
               if not (root / rel).is_file()]
    if missing:
        print(f"error: ROOT {str(root)!r} is not the repository root (no {missing[0]}); run from the "
              "repository root or pass it", file=sys.stderr)
        return 2
    try:
        expected = expected_files(root)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stale = [p for p, text in expected.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"differs from the syllabus: {p}")
        return 1 if stale else 0
    for p in stale:
        p.write_text(expected[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
