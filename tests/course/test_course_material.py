"""The course material `course build` generates: quizzes whose answers are computed and marked by
the autograder, the prerequisites' self-check, the misconceptions sheet from the mistake catalogue,
project rubrics a TA can apply, a slide deck per lesson, and the site's pages kept up to date."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises import course_material, handout, quizzes, rubrics, slides
from attention_np.exercises.syllabus import LESSONS

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ quizzes: true and checkable
def test_every_lesson_has_a_quiz_of_gradable_items():
    assert set(quizzes.QUIZZES) == {les.number for les in LESSONS}
    assert all(len(items) >= 3 for items in quizzes.QUIZZES.values())
    for items in [*quizzes.QUIZZES.values(), [it for _, it in quizzes.SELF_CHECK]]:
        for item in items:
            assert item.kind in ("choice", "number")
            value = item.value()
            if item.kind == "choice":
                assert len(item.choices) >= 2 and value in quizzes.LETTERS[:len(item.choices)]
            else:
                assert math.isfinite(value) and (item.atol > 0 or item.rtol >= 0)


def test_each_number_is_marked_as_the_quiz_page_says():
    # "within 1 % unless the item asks for a number of decimals (then within half of the last one)
    # or counts something (then exactly)"
    assert "A number is right within 1 % unless the item asks for a number of decimals" in \
        " ".join(quizzes.quizzes_markdown().split())
    for label, entry in quizzes.key().items():
        if entry["kind"] != "number":
            continue
        item = quizzes.QUIZZES[int(label.split(".")[0])][int(label.split(".")[1]) - 1]
        decimals = re.search(r"\((two|three|four) decimals\)", item.text)
        if decimals:
            k = {"two": 2, "three": 3, "four": 4}[decimals[1]]
            assert (entry["atol"], entry["rtol"]) == (0.5 * 10 ** -k, 0.0), label
        elif entry["rtol"] == 0:
            assert entry["atol"] == 0 and entry["answer"] == int(entry["answer"]), label   # a count
        else:
            assert (entry["atol"], entry["rtol"]) == (0.0, 0.01), label


def test_self_check_covers_the_five_prerequisites():
    topics = {t for t, _ in quizzes.SELF_CHECK}
    assert topics == {"broadcasting", "vector-Jacobian products", "layer norm", "Adam", "cross-entropy"}


# independent recomputations (closed forms, not the quiz's own code)
EXPECTED = {
    "1.1": (10 * math.exp(2 / math.sqrt(2)) + 20 + 30 * math.exp(-2 / math.sqrt(2)))
           / (math.exp(2 / math.sqrt(2)) + 1 + math.exp(-2 / math.sqrt(2))),
    "1.2": "b", "1.3": 2 + 0 + 3, "1.4": 6 * 7 / 2,
    "2.1": math.exp(-6) / (1 + math.exp(-6)) ** 2, "2.2": "c", "2.3": "b",
    "3.1": "b", "3.2": 4 * (512 * 512 + 512), "3.3": 2 * 128 * 128 * 512,
    "4.1": 0.25 * (1 - 0.25), "4.2": 15, "4.3": "a",
    "5.1": math.log(10), "5.2": 512 ** -0.5 * 4000 ** -0.5, "5.3": 0.01,
    "6.1": 256, "6.2": "a", "6.3": "a",
    "7.1": math.exp(-3) + math.exp(-2) + 1 + math.exp(-4), "7.2": 2 * 6 * 1024 * 512 * 4 / 2 ** 20,
    "7.3": 4096 * 4096 * 8 / 2 ** 20,
    "8.1": "b", "8.2": "a", "8.3": 0.9 + 0.1 / 10,
    "9.1": math.log(14), "9.2": 32, "9.3": "a",
}


def test_the_key_is_what_closed_forms_give():
    key = quizzes.key()
    assert set(key) == set(EXPECTED)
    for item, want in EXPECTED.items():
        got = key[item]["answer"]
        if isinstance(want, str):
            assert got == want, item
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), item
    checks = dict((t, it.value()) for t, it in quizzes.SELF_CHECK[:5])
    assert checks["broadcasting"] == "a" and checks["vector-Jacobian products"] == 16
    assert checks["layer norm"] == pytest.approx(-1.5 / math.sqrt(1.25))
    assert checks["cross-entropy"] == pytest.approx(-math.log(math.exp(2) / (math.exp(2) + 2)))
    assert quizzes.SELF_CHECK[5][1].value() == pytest.approx(0.25 - 1)


def test_a_choice_with_two_true_options_is_refused():
    with pytest.raises(ValueError, match="exactly one true option"):
        quizzes._first_true(True, True, False)


def _quiz_module(built):
    sys.path.insert(0, str(built / "autograder"))
    try:
        import quiz
        return quiz
    finally:
        sys.path.pop(0)


def _reply(entry, right: bool) -> str:
    if entry["kind"] == "choice":
        return entry["answer"] if right else next(c for c in "abcd" if c != entry["answer"])
    a = entry["answer"]
    return repr(a) if right else repr(a * 1.5 + 1)


def test_the_autograder_marks_right_and_wrong_answers(course_build, tmp_path):
    built = course_build
    key = json.loads((built / "autograder" / "quiz_key.json").read_text())
    assert key == json.loads(json.dumps(quizzes.key()))
    template = (built / "student" / "quiz_answers.txt").read_text()
    assert [line.split(":")[0] for line in template.splitlines() if not line.startswith("#")] == list(key)
    wrong = {"1.2", "3.3", "7.1", "9.3"}
    sub = tmp_path / "submission"
    (sub / "nested").mkdir(parents=True)
    lines = [f"{item}: {_reply(entry, item not in wrong)}" for item, entry in key.items() if item != "5.2"]
    (sub / "nested" / "quiz_answers.txt").write_text("# mine\n" + "\n".join(lines) + "\n")
    grade = built / "autograder" / "grade.py"
    r = subprocess.run([sys.executable, str(grade), str(sub), str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    quiz_tests = [t for t in result["tests"] if t["name"].startswith("quiz: lesson ")]
    assert len(quiz_tests) == len(quizzes.QUIZZES)
    assert sum(t["max_score"] for t in quiz_tests) == len(key) == course_material.quiz_points()
    assert sum(t["score"] for t in quiz_tests) == len(key) - len(wrong) - 1
    lesson5 = next(t for t in quiz_tests if t["name"] == "quiz: lesson 5")
    assert "5.2: no answer" in lesson5["output"] and "5.1: right" in lesson5["output"]
    for t in quiz_tests:                                       # the feedback never gives the answer
        for item in (i for i in key if i.startswith(t["name"][-1] + ".")):
            assert str(key[item]["answer"]) not in t["output"]


def test_numbers_are_marked_with_the_stated_tolerance(course_build):
    quiz = _quiz_module(course_build)
    count = {"kind": "number", "answer": 21.0, "rtol": 0.0, "atol": 0.0}
    assert quiz.is_right(count, "21") and not quiz.is_right(count, "21.5") and not quiz.is_right(count, "x")
    rel = {"kind": "number", "answer": 0.0006988, "rtol": 0.01, "atol": 0.0}
    assert quiz.is_right(rel, "6.99e-4") and not quiz.is_right(rel, "7.1e-4")
    dec = {"kind": "number", "answer": 2.3025851, "rtol": 0.0, "atol": 5e-5}
    assert quiz.is_right(dec, "2.3026") and not quiz.is_right(dec, "2.303") and not quiz.is_right(dec, "nan")
    choice = {"kind": "choice", "answer": "b"}
    assert quiz.is_right(choice, "(B)") and not quiz.is_right(choice, "a")
    answers, problems = quiz.parse("1.1: 3\nnonsense\n1.2:\n# 1.3: 4\n")
    assert answers == {"1.1": "3"} and problems == ["line 2: expected 'LESSON.ITEM: ANSWER', got 'nonsense'"]


def test_no_quiz_file_scores_zero_and_says_so(course_build, tmp_path):
    quiz = _quiz_module(course_build)
    tests = quiz.tests(tmp_path, course_build / "autograder" / "quiz_key.json")
    assert all(t["score"] == 0 and "no quiz_answers.txt" in t["output"] for t in tests)


def test_the_zip_and_the_readmes_carry_the_quizzes(course_build):
    import zipfile
    with zipfile.ZipFile(course_build / "autograder" / "gradescope.zip") as z:
        assert {"quiz.py", "quiz_key.json"} <= set(z.namelist())
        assert json.loads(z.read("quiz_key.json")) == json.loads(json.dumps(quizzes.key()))
    grader = " ".join((course_build / "autograder" / "README.md").read_text().split())
    from attention_np.exercises.checker import build_record
    total = sum(c.points for e in ex.EXERCISES.values() for c in build_record(e, hidden=True)["cases"])
    assert f"set the assignment's autograder points to {total + course_material.quiz_points():g}" in grader
    student = " ".join((course_build / "student" / "README.md").read_text().split())
    assert f"({sum(len(i) for i in quizzes.QUIZZES.values())} items, 1 point each" in student
    key_md = (course_build / "solutions" / "quiz_key.md").read_text()
    quiz_md = (course_build / "student" / "quizzes.md").read_text()
    for items in quizzes.QUIZZES.values():
        for item in items:
            assert item.text in quiz_md and item.why[1:] in key_md
            assert item.why not in quiz_md                     # no answer in the student kit


# ------------------------------------------------------------------ sheets, rubrics, pages
def test_the_misconceptions_sheet_is_the_catalogue():
    sheet = course_material.misconceptions_markdown()
    mistakes = [m for e in ex.EXERCISES.values() for m in e.mistakes]
    assert f"The {len(mistakes)} mistakes the checker catalogues" in sheet
    rows = [line for line in sheet.splitlines() if line.startswith("| ") and not line.startswith("| Mistake")]
    assert len(rows) == len(mistakes)
    for m in mistakes:
        assert f"| {m.name.replace('|', chr(92) + '|')} | {m.hint.replace('|', chr(92) + '|')} |" in sheet
    for name, e in ex.EXERCISES.items():
        assert f"`{e.signature}`: {len(e.mistakes)} catalogued mistakes." in sheet, name


def test_project_rubrics_have_ten_points_or_more_and_are_in_the_solutions_only(course_build):
    projects = [les for les in LESSONS if les.project]
    assert {les.stem for les in projects} == set(rubrics.PROJECT_RUBRICS)
    solutions = (course_build / "solutions" / "lesson_answers.md").read_text()
    sheet = (course_build / "solutions" / "project_rubrics.md").read_text()
    student = " ".join(p.read_text() for p in (course_build / "student").rglob("*")
                       if p.suffix in (".md", ".ipynb"))
    for les in projects:
        criteria = rubrics.PROJECT_RUBRICS[les.stem]
        assert rubrics.rubric_points(les.stem) >= 10 and len(criteria) >= 6
        assert f"*Rubric ({rubrics.rubric_points(les.stem)} points).*" in solutions
        for points, text in criteria:
            assert points in (1, 2) and text in solutions and text in sheet and text not in student
            # a 2-point criterion says what earns each point
            assert points == 1 or text.count("(1)") == 2 or "(1 each)" in text, text


def test_the_site_pages_are_what_the_generator_writes():
    r = subprocess.run([sys.executable, "-m", "attention_np.exercises.course_material", "--check"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    write = "python -m attention_np.exercises.course_material --write"
    assert r.returncode == 0, f"{r.stdout}{r.stderr} (run: {write})"
    page = (ROOT / "docs" / "prerequisites.md").read_text()
    for _, item in quizzes.SELF_CHECK:
        assert item.text in page
    for les in LESSONS:
        assert f'href="slides/{les.stem}.html"' in (ROOT / "docs" / "slides.md").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    assert all(name in index for name in ("prerequisites", "slides", "misconceptions"))


# ------------------------------------------------------------------ slides
def test_a_deck_per_lesson_from_the_syllabus_and_the_lesson(course_build):
    folder = course_build / "solutions" / "slides"
    for les in LESSONS:
        page = (folder / f"{les.stem}.html").read_text()
        assert "https://cdn" not in page and "//unpkg" not in page and "jsdelivr" not in page
        for src in re.findall(r'(?:src|href)="([^"]+)"', page):
            assert src.startswith(("https://arxiv.org", "reveal/")) or (folder / src).is_file(), src
        assert all(html.escape(slides.plain(o)) in page for o in [*les.objectives, *les.prerequisites])
        nb = json.loads((ROOT / "notebooks" / f"{les.stem}.ipynb").read_text())
        n_images = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
        assert page.count('<img class="figure"') == n_images
        for _, _, cell in handout.predict_questions(les):
            assert page.count('<pre class="output fragment">') >= 1
            out = next(c for c in nb["cells"] if c.get("id") == cell)
            first = handout.output_text(out).strip().splitlines()[0]
            assert html.escape(first) in page
    if slides.reveal_dist(ROOT) is not None:
        assert (folder / "reveal" / "reveal.js").is_file()
        assert (folder / "reveal" / "theme" / "white.css").is_file()


def test_without_reveal_the_deck_is_still_one_readable_page(tmp_path, monkeypatch):
    monkeypatch.setattr(slides, "reveal_dist", lambda root=None: None)
    paths = slides.write_decks(tmp_path / "s", ROOT)
    assert len(paths) == len(LESSONS) and not (tmp_path / "s" / "reveal").exists()
    assert "reveal.js was not found" in (tmp_path / "s" / "README.md").read_text()
    assert "if (window.Reveal)" in paths[0].read_text()


def test_the_reveal_package_is_pinned_for_npm():
    lock = json.loads((ROOT / "docs" / "site" / "package-lock.json").read_text())
    pinned = json.loads((ROOT / "docs" / "site" / "package.json").read_text())["dependencies"]["reveal.js"]
    assert lock["packages"]["node_modules/reveal.js"]["version"] == pinned
    assert "reveal" in (ROOT / "docs" / "build.sh").read_text()


def test_quiz_answers_do_not_leak_into_the_student_kit(course_build):
    key = quizzes.key_markdown()
    assert "*Answer:*" in key
    for path in (course_build / "student").rglob("*.md"):
        assert "*Answer:*" not in path.read_text(), path
