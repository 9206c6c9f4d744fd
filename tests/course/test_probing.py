"""The probes' shared measures (attention_np/exercises/probing.py): the loop that runs a probe's
steps and rule tables, and the measures the probes compose, each on inputs whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np.exercises.engine import Finding
from attention_np.exercises.probing import (
    STOP,
    Outputs,
    decide,
    describe,
    first,
    judge,
    matching,
    moved,
    named_scale,
    shaped,
    shown,
)

A, B = Finding("a", "found a", "hint a"), Finding("b", "found b", "hint b")


def test_first_gives_the_first_rule_that_holds_and_writes_its_finding_from_the_context():
    rules = ((lambda x: x < 0, A), (lambda x: x > 10, lambda x: Finding("big", f"{x} is big", "")),
             (lambda x: x > 5, B))
    assert first(rules, -1) is A
    assert first(rules, 11).what == "11 is big"        # the earlier match wins over x > 5
    assert first(rules, 7) is B
    assert first(rules, 3) is None


def test_decide_ends_at_the_first_finding_or_at_stop_and_runs_no_later_step():
    ran = []

    def step(name, verdict):
        return lambda x: ran.append(name) or verdict

    assert decide((step(1, None), step(2, B), step(3, A)), 0) is B and ran == [1, 2]
    ran.clear()
    assert decide((step(1, STOP), step(2, A)), 0) is None and ran == [1]
    assert decide((step(1, None),), 0) is None
    assert judge(((lambda x: True, STOP), (lambda x: True, A)), 0) is None
    assert judge(((lambda x: False, STOP), (lambda x: True, A)), 0) is A


def test_matching_names_the_known_wrong_answer_it_equals():
    p = np.array([0.1, 0.2, 0.7])
    candidates = ((p, A), (1 - p, B))
    assert matching(p * (1 + 1e-9), candidates) is A
    assert matching(1 - p, candidates) is B
    assert matching(p + 1e-3, candidates) is None


def test_named_scale_within_one_part_in_ten_thousand():
    candidates = ((1.0, "none", "h1"), (0.25, "d_k", "h2"))
    assert named_scale(0.25 * (1 + 5e-5), candidates, ("wrong", "h")) == ("d_k", "h2")
    assert named_scale(0.25 * (1 + 5e-4), candidates, ("wrong", "h")) == ("wrong", "h")


def test_moved_changes_one_parameter_of_a_copy():
    p = {"b": np.zeros(2), "W": np.eye(2)}
    args = moved(("x", "y", p, 3), 2, "b", np.ones(2))
    assert args[:2] == ("x", "y") and args[3] == 3
    assert np.array_equal(args[2]["b"], np.ones(2)) and args[2]["W"] is p["W"]
    assert np.array_equal(p["b"], np.zeros(2))          # the caller's dict is not changed


def test_shaped_and_shown():
    from attention_np.exercises.engine import Raised
    err = Raised(ValueError("bad"))
    assert shaped(np.zeros((2, 3)), (2, 3)) and not shaped(np.zeros(3), (2, 3)) and not shaped(err, ())
    assert shown(err) == "ValueError: bad" and shown(np.zeros((4, 1))) == "shape (4, 1)"


rng = np.random.default_rng(0)
W = rng.normal(size=(3, 4))
SQ = rng.normal(size=(2, 3, 3))


@pytest.mark.parametrize("got, kind", [
    (W, None),
    ("not an array", "missing"),
    (np.where(W > 0, np.nan, W), "nan"),
    (np.stack([W, W]), "extra_axes"),               # a leading axis not summed
    (W.reshape(3, 4, 1), "kept_axes"),              # the values right, an axis of 1 kept
    (W[None], "kept_axes"),
    (W.T.copy(), "transposed"),                     # another shape: the transpose
    (rng.normal(size=(5, 5)), "shape"),
    (np.zeros_like(W), "zero"),
    (-W, "sign"),
    (2.5 * W, "scale"),
    (W[:, [1, 0, 2, 3]], "permuted"),
    (W + 0.1, "values"),
])
def test_describe_names_each_kind_of_difference(got, kind):
    d = describe("dx", got, W)
    assert (None if d is None else d[0]) == kind, d


def test_describe_square_transpose_scale_words_and_broadcast_shapes():
    assert describe("dx", np.swapaxes(SQ, -1, -2), SQ)[0] == "transposed"
    words = describe("dx", 2 * W, W, factors=((2.0, "sqrt(d_k)"),))[1]
    assert words == "dx is 2 times the answer (sqrt(d_k))"
    # a gradient of k (3, 4) broadcast to (2, 5, 3, 4): not summed at all, or over one axis only
    assert describe("dk", np.zeros((2, 5, 3, 4)) + W, W, broadcast=(2, 5, 3, 4))[0] == "extra_axes"
    assert describe("dk", np.zeros((5, 3, 4)) + W, W, broadcast=(2, 5, 3, 4))[0] == "partial_sum"


def test_outputs_says_which_are_wrong_and_how():
    o = Outputs(("dq", "dk", "dv"), (W, 2 * W, np.stack([W, W])), (W, W, W), factors=((2.0, "two"),))
    assert set(o.wrong) == {"dk", "dv"} and o.kinds == {"scale", "extra_axes"}
    assert o.kind("dq") is None and o.kind("dk") == "scale" and o.output("dv").shape == (2, 3, 4)
    assert o.only("d") and not o.only("dk") and not o.all_say("two")
    assert o.sentence() == ("dk is 2 times the answer (two); dv has shape (2, 3, 4), expected (3, 4): the "
                            "broadcast axes were not summed; dq is right")
