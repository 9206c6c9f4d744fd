"""One order: lesson N uses only what lessons 1..N-1 taught.

Reads every lesson notebook and fails when one needs a later one:

- a reference to a later lesson ("lesson 7", "notebooks 5-9") that does not say "later" (or
  "next") in its sentence: a forward pointer must read "later, in lesson M";
- an import, or an ``an.X`` / ``paper.X`` call, of a helper that a later lesson introduces
  (:data:`MODULES` and :data:`NAMES` say which lesson introduces each; a helper that is in neither
  fails too, so a new one has to be placed in the order);
- an exercise assigned (by the syllabus) before the lesson that teaches its function, the
  teaching lesson being the first one whose text holds :data:`TAUGHT_BY`'s evidence;
- a clause of an exercise's contract (``attention_np.exercises.notebooks.CLAUSES``, what the checker
  holds a student to) taught only after the exercise's lesson: :data:`CLAUSE_TAUGHT_BY` gives, for
  every clause key of every contract, the text of the lesson that teaches it (a new clause has to be
  placed, or the test fails); :data:`GIVEN` names the clauses that only promise something about the
  inputs, with nothing to teach.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from attention_np.exercises import EXERCISES
from attention_np.exercises.notebooks import CLAUSES, clause_keys
from attention_np.exercises.syllabus import LESSONS

ROOT = Path(__file__).resolve().parents[2]

#: attention_np module -> the lesson that introduces it (the longest matching prefix counts)
MODULES = {
    "attention_np": 1,                              # the fast paths, `an`
    "attention_np.paper": 1,                        # §3.2 as the paper writes it
    "attention_np.viz.plot": 1,
    "attention_np.lessons.examples": 1,              # the lessons' example data
    "attention_np.studies.scaling": 2,
    "attention_np.studies.compare_scoring": 2,
    "attention_np.studies.scoring_in_model": 6,     # claim 6 (its appendix): results loaded, not trained
    "attention_np.lessons.timing": 2,
    "attention_np.kernels.threads": 2,                   # one BLAS thread (a utility, not the model)
    "attention_np.studies.head_subspaces": 3,
    "attention_np.paper.heads": 3,
    "attention_np.nn": 5,                           # the encoder
    "attention_np.training": 5,                     # its training
    "attention_np.studies.trained_scaling": 5,
    "attention_np.studies.positions": 6,
    "attention_np.kernels.tiled_forward": 7,        # its lse = +inf lines, printed from the file
    "attention_np.training.dates": 8,
    "attention_np.nn.decoding": 8,
    "attention_np.nn.seq2seq": 8,
    "attention_np.training.seq2seq_trainer": 8,
    "attention_np.pretrained": 9,
    "attention_np.viz.pretrained": 9,
}

#: a function called as an.X / paper.X or imported by name -> the lesson that introduces it
NAMES = {
    "softmax": 1, "sdpa_forward": 1, "causal_mask": 1, "padding_mask": 1,
    # lesson 2 measures gradients with the backward as an instrument (its formula is quoted there);
    # lesson 4 derives it
    "sdpa_backward": 2, "additive_attention_forward": 2, "init_additive_params": 2,
    "mha_forward": 3, "init_mha_params": 3, "split_heads": 3, "merge_heads": 3,
    "mha_backward": 4, "softmax_backward": 4, "gradcheck": 4, "numerical_gradient": 4,
    "linear_forward": 4, "linear_backward": 4,
    "additive_attention_backward": 4,
    "ModelConfig": 5, "ReversalTask": 5, "evaluate": 5, "init_model": 5, "train": 5, "model_forward": 5,
    "sinusoidal_encoding": 6, "apply_rope": 6,
    "flash_attention_forward": 7, "flash_attention_backward": 7, "KVCache": 7, "mha_decode_step": 7,
}

#: exercise -> text that appears first in the lesson that teaches its function
TAUGHT_BY = {
    "softmax": "paper.softmax(", "padding_mask": "paper.padding_mask(", "attention": "paper.sdpa_forward(",
    "split_heads": "paper.split_heads(", "merge_heads": "paper.merge_heads(",
    "mha_forward": "paper.mha_forward(", "softmax_backward": "paper.softmax_backward(",
    "attention_backward": "`paper.sdpa_backward` walks the forward in reverse",
    "mha_backward": "paper.mha_backward",
    "causal_mask": 'align="bottom_right"', "tiled_attention": "an.flash_attention_forward(",
    "decode_step": "an.mha_decode_step(", "sinusoidal": "sinusoidal_encoding(",
}

#: (exercise, clause key) -> text of the lesson that teaches that clause of the contract
CLAUSE_TAUGHT_BY = {
    ("softmax", "batch"): "row by row", ("softmax", "neg_inf"): "Masked scores become $-\\infty$",
    ("softmax", "extreme"): "scores too large for `exp`", ("softmax", "sums_to_one"): 'print("row sums:"',
    ("padding_mask", "zero_length"): "sentence 2 has length 0",
    ("padding_mask", "full_length"): "lengths = np.array([6, 3])",
    ("padding_mask", "shape"): "(B, 1, S): one row per sentence",
    ("attention", "shapes"): '"= (S, d_v)"', ("attention", "L_ne_S"): "(L=3, S=6)",
    ("attention", "L_1"): "one query ($L = 1$)", ("attention", "broadcast"): "fewer leading axes than `q`",
    ("attention", "mask_broadcast"): "(B, 1, S): one row per sentence",
    ("attention", "masked_zero"): "weight on padded keys",
    ("attention", "fully_masked"): "A query may have no allowed key",
    ("attention", "extreme"): "scores too large for `exp`", ("attention", "returns"): "# (L, d_v)",
    ("softmax_backward", "batch"): "One row sum", ("softmax_backward", "zeros"): "a masked key has $p_j = 0$",
    ("softmax_backward", "gradient"): "paper.numerical_gradient(",
    ("attention_backward", "shapes"): "`paper.sdpa_backward` walks the forward in reverse",
    ("attention_backward", "L_ne_S"): "cross-attention ($L = 3$ queries, $S = 4$ keys)",
    ("attention_backward", "L_1"): "one query ($L = 1$)",
    ("attention_backward", "mask_broadcast"): "(B, 1, S): one row per sentence",
    ("attention_backward", "fully_masked"): "gradient of the fully masked query",
    ("attention_backward", "gradient"): "paper.gradcheck(",
    ("attention_backward", "broadcast"): "the batch axes that broadcasting added",
    ("attention_backward", "size_one"): "an axis of size 1 that broadcast keeps its size 1",
    ("split_heads", "batch"): "reshapes $(\\dots, L, h\\,d)",
    ("split_heads", "heads"): "head $i$ owns feature columns",
    ("merge_heads", "inverse"): "`merge_heads` is its inverse",
    ("merge_heads", "batch"): "reshapes $(\\dots, L, h\\,d)",
    ("mha_forward", "self"): "paper.mha_forward(x, x, x", ("mha_forward", "cross"): "**Cross-attention**",
    ("mha_forward", "d_k"): "$d_k$ need not be $d_\\text{model}/h$",
    ("mha_forward", "mask"): "**A mask per sequence.**",
    ("mha_forward", "mask_head_axis"): "`mask[:, None]` of shape",
    ("mha_forward", "returns"): "5) project with W_o: out",
    # as in `attention` (the contract says so): lesson 1 teaches both for Eq. (1), which every head runs
    ("mha_forward", "fully_masked"): "A query may have no allowed key",
    ("mha_forward", "extreme"): "scores too large for `exp`",
    ("mha_backward", "cross"): "cross-attention ($L = 3$ queries, $S = 4$ keys)",
    ("mha_backward", "gradient"): "asks for these eleven gradients",
    ("mha_backward", "bias_sum"): "gets the sum of the gradients over every position",
    ("mha_backward", "self"): "$dx = d\\text{query} + d\\text{key} + d\\text{value}$",
    ("causal_mask", "sizes"): "L_q, S_k = 3, 6",
    ("causal_mask", "bool"): "**True = may attend**",
    ("causal_mask", "top_left"): 'title="top_left"',
    ("causal_mask", "bottom_right"): 'align="bottom_right"',
    ("tiled_attention", "shapes"): "an.flash_attention_forward(",
    ("tiled_attention", "block_size"): "sizes that do not divide",
    ("tiled_attention", "extreme"): "keeps $e^{s - m}$ from overflowing",
    ("tiled_attention", "per_query_max"): "keep the running maximum $m$",
    ("tiled_attention", "returns"): "an.flash_attention_forward(",
    ("decode_step", "inputs"): "x[:, t:t + 1]",
    ("decode_step", "empty_cache"): "cache = an.KVCache(max_len=L)",
    ("decode_step", "returns"): "the new positions only",
    ("decode_step", "extreme"): "scores too large for `exp`",        # as in `attention`: lesson 1
    ("sinusoidal", "sizes"): "sinusoidal_encoding(",
    ("sinusoidal", "table"): "PE(pos, 2i) = sin(pos / 10000^(2i/d_model))",
}

#: clauses that only promise something about the inputs (nothing a lesson must teach)
GIVEN = {("attention", "finite")}

REFERENCE = re.compile(r"\b(?:[Ll]essons?|[Nn]otebooks?)\s+(\d{1,2}(?:\s*(?:,|and|or|to|-|–)\s*\d{1,2})*)")
BOUNDARY = re.compile(r"[.;!?]\s|\n\s*\n")


def _lessons():
    out = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        out[int(path.name[:2])] = json.loads(path.read_text(encoding="utf-8"))
    return out


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def forward_references(number: int, text: str) -> list:
    """References in ``text`` (of lesson ``number``) to a later lesson whose sentence does not say
    'later' or 'next'."""
    found = []
    for match in REFERENCE.finditer(text):
        later = [int(m) for m in re.findall(r"\d+", match.group(1)) if int(m) > number]
        if not later:
            continue
        starts = [b.end() for b in BOUNDARY.finditer(text, 0, match.start())]
        sentence = text[starts[-1] if starts else 0:match.start()].lower()
        if not re.search(r"\b(later|next)\b", sentence):
            found.append(match.group(0))
    return found


def _comments(code: str) -> str:
    return "\n\n".join(line.split("#", 1)[1] for line in code.splitlines() if "#" in line)


def helpers_used(code: str) -> list:
    """(kind, name): every attention_np module imported ("module"), every name imported from one
    ("name"), every an.X / paper.X ("attr")."""
    used = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            used += [("module", a.name) for a in node.names if a.name.split(".")[0] == "attention_np"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "attention_np":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_module(full):
                    used.append(("module", full))
                else:
                    used += [("module", node.module), ("name", a.name)]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in ("an", "paper")):
            used.append(("attr", node.attr))
    return used


def _is_module(dotted: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


def introduced_in(kind: str, name: str):
    if kind in ("name", "attr"):
        return NAMES.get(name)
    # "attention_np" itself (the fast paths) matches only itself, every other entry its submodules too
    prefixes = [m for m in MODULES if name == m or (m != "attention_np" and name.startswith(m + "."))]
    return MODULES[max(prefixes, key=len)] if prefixes else None


def late_helpers(number: int, code: str) -> list:
    """Helpers lesson ``number`` uses that a later lesson introduces, or that no lesson does."""
    bad = []
    for kind, name in helpers_used(code):
        lesson = introduced_in(kind, name)
        if lesson is None and kind == "name":
            continue                        # a name its module's entry covers
        if lesson is None:
            bad.append(f"{name} (in no lesson's registry: add it to MODULES or NAMES)")
        elif lesson > number:
            bad.append(f"{name} (introduced by lesson {lesson})")
    return bad


LESSON_NOTEBOOKS = _lessons()


def test_every_lesson_is_in_the_syllabus_in_order():
    assert sorted(LESSON_NOTEBOOKS) == list(range(1, len(LESSONS) + 1))
    assert [les.number for les in LESSONS] == sorted(LESSON_NOTEBOOKS)
    for les in LESSONS:
        assert (ROOT / "notebooks" / f"{les.stem}.ipynb").is_file(), les.stem
        assert les.stem.startswith(f"{les.number:02d}_"), les.stem


@pytest.mark.parametrize("number", sorted(LESSON_NOTEBOOKS))
def test_no_reference_to_a_later_lesson_without_later(number):
    nb = LESSON_NOTEBOOKS[number]
    bad = []
    for i, cell in enumerate(nb["cells"]):
        text = _source(cell) if cell["cell_type"] == "markdown" else _comments(_source(cell))
        bad += [f"cell {i}: {ref!r}" for ref in forward_references(number, text)]
    assert not bad, f"lesson {number} points forward without 'later': {bad}"


@pytest.mark.parametrize("number", sorted(LESSON_NOTEBOOKS))
def test_no_helper_from_a_later_lesson(number):
    code = "\n".join(_source(c) for c in LESSON_NOTEBOOKS[number]["cells"] if c["cell_type"] == "code")
    assert not late_helpers(number, code), late_helpers(number, code)


def test_no_exercise_before_the_lesson_that_teaches_it():
    texts = {n: "\n".join(_source(c) for c in nb["cells"]) for n, nb in LESSON_NOTEBOOKS.items()}
    assigned = {name: les.number for les in LESSONS for name in les.exercises}
    assert sorted(assigned) == sorted(EXERCISES)                    # each exercise exactly once
    assert sum(len(les.exercises) for les in LESSONS) == len(EXERCISES)
    for name, evidence in TAUGHT_BY.items():
        teaching = [n for n in sorted(texts) if evidence in texts[n]]
        assert teaching, f"no lesson holds {evidence!r} (the evidence that it teaches {name})"
        assert assigned[name] >= teaching[0], (
            f"{name} is assigned with lesson {assigned[name]}, before lesson {teaching[0]} teaches it")
    assert sorted(TAUGHT_BY) == sorted(EXERCISES)


def _first_teaching(evidence: str):
    return next((n for n in sorted(LESSON_NOTEBOOKS) if evidence in _text(n)), None)


def _text(number: int) -> str:
    return "\n".join(_source(c) for c in LESSON_NOTEBOOKS[number]["cells"])


def late_clauses() -> list:
    """Clauses of an exercise's contract that no lesson up to the exercise's own teaches."""
    assigned = {name: les.number for les in LESSONS for name in les.exercises}
    bad = []
    for name in CLAUSES:
        for key in clause_keys(name):
            if (name, key) in GIVEN:
                continue
            evidence = CLAUSE_TAUGHT_BY.get((name, key))
            lesson = _first_teaching(evidence) if evidence else None
            if evidence is None:
                bad.append(f"{name}.{key}: in no lesson's registry (add it to CLAUSE_TAUGHT_BY or GIVEN)")
            elif lesson is None:
                bad.append(f"{name}.{key}: no lesson holds {evidence!r}")
            elif lesson > assigned[name]:
                bad.append(f"{name}.{key}: exercise of lesson {assigned[name]}, taught in lesson {lesson}")
    return bad


def test_what_each_contract_requires_is_taught_in_or_before_its_lesson():
    assert not late_clauses(), late_clauses()
    keys = {(name, key) for name in CLAUSES for key in clause_keys(name)}
    assert set(CLAUSE_TAUGHT_BY) | GIVEN == keys        # no stale entry either
    assert not set(CLAUSE_TAUGHT_BY) & GIVEN


def test_a_clause_taught_later_is_found(monkeypatch):
    """The detector catches the leak a reader reported: lesson 1 deferring a query with no allowed key
    to lesson 7 while exercise 01's contract requires it."""
    later = "### A query with nothing to attend to"                        # lesson 7's section
    monkeypatch.setitem(CLAUSE_TAUGHT_BY, ("attention", "fully_masked"), later)
    assert late_clauses() == ["attention.fully_masked: exercise of lesson 1, taught in lesson 7"]
    monkeypatch.setitem(CLAUSE_TAUGHT_BY, ("attention", "fully_masked"), "a sentence no lesson holds")
    assert late_clauses() == ["attention.fully_masked: no lesson holds 'a sentence no lesson holds'"]
    monkeypatch.delitem(CLAUSE_TAUGHT_BY, ("attention", "fully_masked"))
    assert late_clauses() == [
        "attention.fully_masked: in no lesson's registry (add it to CLAUSE_TAUGHT_BY or GIVEN)"]


# the detectors find what they are meant to find


def test_forward_references_are_found_unless_they_say_later():
    assert forward_references(2, "The gradient (notebook 4) is derived there.") == ["notebook 4"]
    assert forward_references(3, "Heads are numbered as in notebooks 5–9.") == ["notebooks 5–9"]
    assert forward_references(5, "See lesson 2 and lesson 3.") == []
    assert forward_references(2, "It is derived later, in lesson 4.") == []
    assert forward_references(1, "Next: notebook 2 asks why.") == []
    assert forward_references(2, "It is later. Lesson 4 derives it.") == ["Lesson 4"]
    assert forward_references(1, "**Lesson 1 of 9.**") == []


def test_late_helpers_are_found():
    assert late_helpers(2, "from attention_np.nn import ModelConfig") == [
        "attention_np.nn (introduced by lesson 5)", "ModelConfig (introduced by lesson 5)"]
    assert late_helpers(3, "out = an.flash_attention_forward(q, k, v)") == [
        "flash_attention_forward (introduced by lesson 7)"]
    assert late_helpers(2, "from attention_np.kernels.threads import blas_threads") == []
    assert late_helpers(4, "an.some_new_helper(x)") == [
        "some_new_helper (in no lesson's registry: add it to MODULES or NAMES)"]
    assert late_helpers(5, "import attention_np.studies.unknown_study") == [
        "attention_np.studies.unknown_study (in no lesson's registry: add it to MODULES or NAMES)"]
    assert late_helpers(9, "from attention_np.studies import positions") == []
    assert late_helpers(1, "import attention_np.pretrained") == [
        "attention_np.pretrained (introduced by lesson 9)"]
