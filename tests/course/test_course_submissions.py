"""The checker tried as students would: correct solutions in different styles pass, realistic
wrong ones (tests/course/course_submissions/wrong, each with the student's slip in its header) fail,
and at least 85 % of the wrong ones (the course's target) are named by a MISTAKE line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import attention_np.exercises as ex
from attention_np.exercises.loading import load_function

HERE = Path(__file__).resolve().parent / "course_submissions"
CORRECT = sorted((HERE / "correct").glob("*.py"))
WRONG = sorted((HERE / "wrong").glob("*.py"))


def _check(path):
    name = re.search(r"# exercise: (\w+)", path.read_text()).group(1)
    return ex.check(name, load_function(path, ex.function_name(name)))


def test_the_corpus_is_large_and_covers_every_exercise():
    assert len(CORRECT) >= 10 and len(WRONG) >= 30
    names = {re.search(r"# exercise: (\w+)", p.read_text()).group(1) for p in CORRECT + WRONG}
    assert names == set(ex.EXERCISES)


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_a_correct_solution_passes(path):
    result = _check(path)
    assert result.ok, str(result)


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_a_wrong_solution_fails(path):
    result = _check(path)
    assert not result.ok, str(result)
    assert str(result).startswith(("MISTAKE: ", "FAILED: ")), str(result)


DIAGNOSED = [p for p in WRONG if "# diagnosis: " in p.read_text()]


@pytest.mark.parametrize("path", DIAGNOSED, ids=[p.stem for p in DIAGNOSED])
def test_a_wrong_solution_gets_the_diagnosis_in_its_header(path):
    # the name the header expects: what the submission does wrong, measured by behaviour
    want = re.search(r"# diagnosis: (.+)", path.read_text()).group(1).strip()
    result = _check(path)
    assert result.mistake == want, str(result)


def test_the_seven_wrong_files_issue_35_found_accepted_are_diagnosed():
    stems = {"attention_backward_nan_full_row", "attention_backward_keepdims_shape",
             "attention_backward_sum_one_axis", "attention_backward_reshape_mixes",
             "mha_backward_bias_wrong_axes", "tiled_attention_shared_max", "attention_bool_index"}
    assert stems <= {p.stem for p in DIAGNOSED}


def test_at_least_85_percent_of_the_wrong_solutions_are_named():
    named = [p.stem for p in WRONG if _check(p).status == "mistake"]
    assert len(named) / len(WRONG) >= 0.85, sorted(set(p.stem for p in WRONG) - set(named))


def test_the_instructors_guide_numbers():
    import numpy as np

    from attention_np.lessons.examples import SCALING_D_KS, SEED
    from attention_np.studies import scaling
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "instructors.md").read_text().split())
    # the measurement of lesson 2's saturation cell, which the lesson question quotes
    r = scaling.softmax_saturation(SCALING_D_KS, rng=SEED)
    at = [list(r["d_k"]).index(d) for d in (16, 64, 256)]
    unscaled = ", ".join(f"{r['max_weight_unscaled'][i]:.3f}" for i in at)
    scaled = ", ".join(f"{r['max_weight_scaled'][i]:.3f}" for i in at)
    assert f"largest weight is {unscaled} unscaled and {scaled} scaled" in text
    assert f"falls to {r['entropy_unscaled'][at[-1]]:.3f} nats" in text
    assert f"log 16 = {np.log(16):.3f}" in text
    from attention_np.exercises.syllabus import lesson
    question = next(q for q in lesson(2).questions if "d_k = 256" in q.text)   # lesson 2's model answer
    i = at[-1]
    assert f"(the mean largest weight is about {r['max_weight_unscaled'][i]:.2f})" in question.answer
    assert f"the largest weight is about {r['max_weight_scaled'][i]:.2f}" in question.answer
    assert (f"max_weight_scaled {r['max_weight_scaled'][i]:.4f} and max_weight_unscaled "
            f"{r['max_weight_unscaled'][i]:.4f}") in question.answer
    n = sum(len(e.mistakes) for e in ex.EXERCISES.values())
    assert f"{len(ex.EXERCISES)} exercises, {n} catalogued mistakes" in text
    for name, e in ex.EXERCISES.items():
        assert f"| `{name}` | {len(e.mistakes)} |" in text, name
    public = sum(len(e.cases()) for e in ex.EXERCISES.values())
    hidden = sum(len(e.hidden_cases()) for e in ex.EXERCISES.values())
    assert f"{public} public and {hidden} hidden cases" in text
    assert f"about {public + hidden} × 5 s + {len(ex.EXERCISES)} × 30 s" in text
    named = sum(_check(p).status == "mistake" for p in WRONG)
    assert f"({len(CORRECT)} correct solutions in different styles, {len(WRONG)} realistic" in text
    assert f"{named} of {len(WRONG)} wrong ones" in text


def test_the_batch_written_from_the_kit_covers_every_exercise():
    # at least four wrong files and one correct one per exercise, written from the
    # student kit alone; every wrong one carries the diagnosis it gets
    kit = [p for p in CORRECT + WRONG if p.stem.startswith("kit_")]
    for name in ex.EXERCISES:
        mine = [p for p in kit if re.search(r"# exercise: (\w+)", p.read_text()).group(1) == name]
        wrong = [p for p in mine if p.parent.name == "wrong"]
        assert len(wrong) >= 4 and len(mine) - len(wrong) >= 1, name
        assert all("# diagnosis: " in p.read_text() for p in wrong), name
