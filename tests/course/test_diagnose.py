"""The checker's diagnoses by behaviour (attention_np/exercises/diagnose.py and the verdict's order):
a message never names a catalogued mistake the file does not make, the smallest failing case is
drawn, and measured behaviours (a constant factor, a dtype, a flipped or shifted mask, a weight used
for another) are named on mutants of the references as well as on the wrong corpus."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import attention_np.exercises as ex
from attention_np.exercises import checker, counterfactuals, diagnose, engine
from attention_np.exercises.loading import load_function

WRONG = sorted((Path(__file__).resolve().parent / "course_submissions" / "wrong").glob("*.py"))


@cache
def _full(name):
    """The record with the hidden cases: what the autograder holds."""
    return checker.build_record(ex.EXERCISES[name], hidden=True)


def _load(path):
    name = re.search(r"# exercise: (\w+)", path.read_text()).group(1)
    return name, load_function(path, ex.function_name(name))


def _no_misname(name, fn):
    """Public and autograder verdicts; each names a catalogued mistake only when that mistake's
    wrong implementation agrees with ``fn`` on every public and hidden case."""
    rec = _full(name)
    results = engine.run_cases(fn, rec["cases"], rec["arg_names"])
    catalogue = {fp.name: fp for fp in rec["fingerprints"]}
    reports = [ex.check(name, fn), checker.check_record(name, rec, fn)]
    for report in reports:
        if report.mistake in catalogue:
            ok, _ = engine.agrees(results, rec["cases"], catalogue[report.mistake])
            assert ok, f"named {report.mistake!r}, which the file does not reproduce: {report}"
    return reports


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_a_wrong_file_is_never_named_as_a_catalogued_mistake_it_does_not_make(path):
    name, fn = _load(path)
    public, graded = _no_misname(name, fn)
    assert not public.ok and not graded.ok
    if any(not r.passed and not r.hidden for r in public.cases):
        assert "Smallest failing case (" in public.message, public.message


def test_the_smallest_failing_case_is_the_one_with_fewest_input_entries():
    rec = _full("causal_mask")
    fn = load_function(next(p for p in WRONG if p.stem == "causal_mask_strict"), "causal_mask")
    results = engine.run_cases(fn, rec["cases"], rec["arg_names"])
    case, result = diagnose.smallest(rec["cases"], results)
    public_failing = [c for c, r in zip(rec["cases"], results, strict=True) if not r.passed and not r.hidden]
    assert diagnose.entries(case) == min(diagnose.entries(c) for c in public_failing)
    assert not result.hidden


def test_a_bool_mask_is_drawn_side_by_side():
    # a causal mask that excludes the diagonal: row 0 of the answer is "1...", of the file "...."
    def strict(L, S, align):
        return np.tri(L, S, k=(0 if align == "top_left" else S - L) - 1, dtype=bool)
    r = ex.check("causal_mask", strict)
    lines = r.message.split("\n")
    at = next(i for i, line in enumerate(lines) if "expected" in line and "returned" in line)
    first = lines[at + 1].split()
    assert first[0].startswith("1") and set(first[1]) == {"."}, r.message


@pytest.mark.parametrize("factor", [2.0, 0.5, -3.0])
def test_a_constant_factor_is_measured_on_every_case(factor):
    # mutants of the reference: the right answer times a constant the catalogue does not hold
    ref = ex.EXERCISES["attention"].reference

    def scaled(q, k, v, mask=None):
        return ref(q, k, v, mask) * q.dtype.type(factor)
    r = ex.check("attention", scaled)
    assert r.status == "mistake", r.message
    words = "wrong sign" if factor == -1 else "off by a constant factor"
    assert words in r.mistake and f"{factor:.4g} " in r.message, r.message


def test_a_factor_equal_to_a_size_is_named_by_that_size():
    ref = ex.EXERCISES["attention"].reference

    def times_sqrt_dk(q, k, v, mask=None):
        return ref(q, k, v, mask) * q.dtype.type(np.sqrt(q.shape[-1]))
    r = ex.check("attention", times_sqrt_dk)
    assert r.mistake == "output off by a constant factor (sqrt(d_k))", r.message


@pytest.mark.parametrize("name", ["softmax", "attention", "mha_forward", "tiled_attention"])
def test_a_float32_result_for_a_float64_input_is_told_the_dtype(name):
    ref = ex.EXERCISES[name].reference

    def f32(*a, **kw):
        return ref(*a, **kw).astype(np.float32)
    r = ex.check(name, f32)
    assert r.mistake == "dtype not kept", r.message


@pytest.mark.parametrize("name", sorted(ex.EXERCISES))
def test_a_function_that_always_raises_is_not_named_by_a_value(name):
    def boom(*a, **kw):
        raise ValueError("operands could not be broadcast together")
    r = ex.check(name, boom)
    assert not r.ok
    assert r.mistake in (None, "shapes that do not broadcast"), r.message


@pytest.mark.parametrize("name", ["causal_mask", "padding_mask"])
def test_a_mask_reversed_or_complemented_is_measured(name):
    ref = ex.EXERCISES[name].reference
    flipped = ex.check(name, lambda *a: np.flip(ref(*a), -1))
    complement = ex.check(name, lambda *a: ~ref(*a))
    assert flipped.status == complement.status == "mistake", (flipped.message, complement.message)
    assert "polarity" in complement.mistake, complement.message
    _no_misname(name, lambda *a: np.flip(ref(*a), -1))
    _no_misname(name, lambda *a: ~ref(*a))


@pytest.mark.parametrize("change, words", [
    ("W_q->k", "the keys projected with W_q"), ("W_k+b_k->v", "the values projected with W_k and b_k"),
    ("W_o.T", "W_o used transposed"), ("no b_o", "b_o not added"),
    ("~mask", "mask polarity flipped (True taken as blocked)")])
def test_a_weight_used_for_another_is_measured_in_mha_forward(change, words):
    # mutants: the reference run on a changed input (what the counterfactual probe looks for),
    # on every case, not only on the probe's own input
    ref = ex.EXERCISES["mha_forward"].reference
    cf = {label: fn for label, _, _, fn, _ in counterfactuals.COUNTERFACTUALS["mha_forward"]()[1]}

    def mutant(query, key, value, params, num_heads, mask=None):
        args = (query, key, value, params, num_heads) + (() if mask is None else (mask,))
        if mask is None and change == "~mask":
            return ref(*args)
        return ref(*cf[change](args))
    r = ex.check("mha_forward", mutant)
    assert r.mistake == words, r.message
    _no_misname("mha_forward", mutant)


def test_case_properties_separate_the_failing_cases():
    # right everywhere except where q has a single query (L = 1): the property is found
    ref = ex.EXERCISES["attention"].reference

    def wrong_when_one_query(q, k, v, mask=None):
        out = ref(q, k, v, mask)
        return out * 2 if q.shape[-2] == 1 else out
    r = ex.check("attention", wrong_when_one_query)
    assert "axis -2 of q has size 1" in r.message, r.message


def test_right_except_on_fully_masked_rows_is_measured():
    # a mutant: the reference, but a fully masked row returns ones (neither NaN nor uniform weights)
    ref = ex.EXERCISES["attention"].reference

    def ones_on_empty_rows(q, k, v, mask=None):
        out = ref(q, k, v, mask)
        if mask is None:
            return out
        scores = out.shape[:-1] + (k.shape[-2],)
        empty = ~np.broadcast_to(mask, np.broadcast_shapes(mask.shape, scores)).any(-1)
        return np.where(empty[..., None], np.ones((), out.dtype), out)
    r = ex.check("attention", ones_on_empty_rows)
    assert "fully masked row" in r.mistake, r.message
    _no_misname("attention", ones_on_empty_rows)


def test_right_except_at_one_end_of_an_axis_is_measured():
    ref = ex.EXERCISES["sinusoidal"].reference

    def last_row_lost(length, d_model):
        pe = ref(length, d_model)
        pe[-1] = 0.0
        return pe
    r = ex.check("sinusoidal", last_row_lost)
    assert r.mistake.startswith("wrong only at one end of an axis"), r.message
    assert "last index of axis -2" in r.message, r.message


def test_a_message_shows_no_hidden_input():
    # a file wrong only on a hidden case: the autograder says a hidden case fails, draws nothing
    rec = _full("causal_mask")
    hidden_sizes = {c.args[:2] for c in rec["cases"] if c.hidden}
    public_sizes = {c.args[:2] for c in rec["cases"] if not c.hidden}
    only_hidden = sorted(hidden_sizes - public_sizes)
    if not only_hidden:
        pytest.skip("every hidden size is also public")
    ref = ex.EXERCISES["causal_mask"].reference
    bad = only_hidden[0]

    def wrong_on_one_size(L, S, align):
        m = ref(L, S, align)
        return ~m if (L, S) == bad else m
    r = checker.check_record("causal_mask", rec, wrong_on_one_size)
    assert not r.ok and "Smallest failing case" not in r.message, r.message
    assert "hidden" in r.message, r.message


def test_a_float32_step_in_a_float64_computation_is_measured():
    # a mutant: the weights pass through float32 on the way (a dtype=np.float32 array, say)
    ref = ex.EXERCISES["attention"].reference

    def float32_inside(q, k, v, mask=None):
        out = ref(q, k, v, mask)
        return out.astype(np.float32).astype(out.dtype)
    r = ex.check("attention", float32_inside)
    assert r.mistake == "float32 precision in a float64 result", r.message


def test_the_decode_step_scale_is_measured():
    # decode_step's own scale probe (probes_heads._decode_scale), on the library's wrong variant
    from attention_np.exercises.efficient_exercises import _decode
    r = ex.check("decode_step", lambda *a: _decode(*a, scale_dm=True))
    assert r.mistake == "scaled by sqrt(d_model) instead of sqrt(d_k)", r.message
    assert not any("scale" in label for label, *_ in counterfactuals.COUNTERFACTUALS["decode_step"]()[1])


#: a wrong scale of each head's scores, as the factor c it multiplies the right scores by
_WRONG_SCALES = {
    "no 1/sqrt(d_k)": lambda dk, dm, h: np.sqrt(dk),
    "divided by d_k instead of sqrt(d_k)": lambda dk, dm, h: 1 / np.sqrt(dk),
    "multiplied by sqrt(d_k) instead of dividing": lambda dk, dm, h: dk,
    "scaled by sqrt(d_model) instead of sqrt(d_k)": lambda dk, dm, h: np.sqrt(dk / dm),
    "d_k taken as d_model / num_heads": lambda dk, dm, h: np.sqrt(dk * h / dm),
    "scaled by sqrt(h * d_k) (all heads' width) instead of one head's d_k": lambda dk, dm, h: 1 / np.sqrt(h),
    "every key gets the same weight (the scores have no effect)": lambda dk, dm, h: 0.0,
}


@pytest.mark.parametrize("exercise", ["mha_forward", "mha_backward", "decode_step"])
@pytest.mark.parametrize("mistake", sorted(_WRONG_SCALES))
def test_each_wrong_scale_of_a_head_is_named_in_every_exercise_with_heads(exercise, mistake):
    # the right function with W_q and b_q times c: its scores are c times the right ones, on every
    # input; each exercise's probe measures the scale where d_k, d_model / h, d_model, h * d_k, L,
    # S and B all differ, so each wrong width gets its own name
    ref = ex.EXERCISES[exercise].reference
    at = 4 if exercise == "mha_backward" else 3

    def wrong(*args):
        args = list(args)
        p, h = args[at], args[at + 1]
        dk, dm = p["W_q"].shape[1] // h, p["W_q"].shape[0]
        c = _WRONG_SCALES[mistake](dk, dm, h)
        dt = p["W_q"].dtype
        args[at] = {**p, "W_q": (p["W_q"] * c).astype(dt), "b_q": (p["b_q"] * c).astype(dt)}
        out = ref(*args)
        if exercise == "mha_backward":          # the gradients of W_q, b_q as a function of W_q * c
            out[3]["W_q"], out[3]["b_q"] = (out[3]["W_q"] * c).astype(dt), (out[3]["b_q"] * c).astype(dt)
        return out
    r = ex.check(exercise, wrong)
    assert not r.ok and r.mistake == mistake, r.message
