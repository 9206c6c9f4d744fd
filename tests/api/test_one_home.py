"""One answer per call: an option with two homes, a keyword of the call and a
field of the :class:`~attention_np.AttentionSpec` (``num_heads``, ``is_causal``, ``scale``,
``dropout_p``), given in both with different values is a ``ValueError`` naming both, on every
entry point that takes both; the same value twice, or either home alone, is the option.
``is_causal`` is a bool wherever it is taken.
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np import paper
from attention_np.kernels import reference

R = np.random.default_rng(0)
Q = R.standard_normal((2, 3, 4))
X = R.standard_normal((2, 3, 8))
P = an.init_mha_params(8, 2, rng=0)
Spec = an.AttentionSpec

# entry point -> call(keyword, spec): every public function that takes an option both ways
ENTRY_POINTS = {
    "sdpa_forward": lambda kw, spec: an.sdpa_forward(Q, Q, Q, spec=spec, **kw)[0],
    "flash_attention_forward": lambda kw, spec: an.flash_attention_forward(Q, Q, Q, spec=spec, **kw)[0],
    "mha_forward": lambda kw, spec: an.mha_forward(X, X, X, P, spec=spec, **kw)[0],
    "mha_decode_step": lambda kw, spec: an.mha_decode_step(X, P, an.KVCache(4), spec=spec, **kw),
}
# option -> (entry points that take it as a keyword, value a, value b); mha needs num_heads
OPTIONS = {
    "is_causal": (("sdpa_forward", "flash_attention_forward", "mha_forward"), True, False),
    "scale": (("sdpa_forward", "flash_attention_forward", "mha_forward", "mha_decode_step"), 0.5, 0.25),
    "dropout_p": (("sdpa_forward",), 0.0, 0.5),
    "num_heads": (("mha_forward", "mha_decode_step"), 2, 1),
}
CASES = [(e, o) for o, (entries, _, _) in OPTIONS.items() for e in entries]


def _spec(entry, **fields):
    if entry.startswith("mha") and "num_heads" not in fields:
        fields["num_heads"] = 2
    return Spec(**fields)


def _kw(entry, option, **kw):
    if entry.startswith("mha") and option != "num_heads":
        kw["num_heads"] = 2
    return kw


@pytest.mark.parametrize("entry, option", CASES, ids=[f"{e}-{o}" for e, o in CASES])
def test_a_keyword_that_contradicts_the_spec_is_refused_naming_both(entry, option):
    _, a, b = OPTIONS[option]
    for keyword, in_spec in ((a, b), (b, a)):          # either way round: the spec's default too
        with pytest.raises(ValueError) as info:
            ENTRY_POINTS[entry](_kw(entry, option, **{option: keyword}),
                                _spec(entry, **{option: in_spec}))
        msg = str(info.value)
        assert f"{option}={keyword!r}" in msg and f"spec.{option}={in_spec!r}" in msg, msg


@pytest.mark.parametrize("entry, option", CASES, ids=[f"{e}-{o}" for e, o in CASES])
def test_either_home_alone_or_both_the_same_give_one_answer(entry, option):
    a = OPTIONS[option][1]                 # dropout_p: 0.0 (a nonzero rate draws a random mask)
    call = ENTRY_POINTS[entry]
    by_keyword = call(_kw(entry, option, **{option: a}), _spec(entry) if option != "num_heads" else None)
    by_spec = call(_kw(entry, option), _spec(entry, **{option: a}))
    both = call(_kw(entry, option, **{option: a}), _spec(entry, **{option: a}))
    np.testing.assert_array_equal(by_keyword, by_spec)
    np.testing.assert_array_equal(by_keyword, both)


@pytest.mark.parametrize("entry", ["sdpa_forward", "flash_attention_forward", "mha_forward"])
def test_is_causal_false_in_the_spec_is_not_overridden_by_a_true_keyword(entry):
    # the case: mha_forward(is_causal=True, spec=AttentionSpec(is_causal=False)) ran causal
    with pytest.raises(ValueError, match="is_causal=True and spec.is_causal=False"):
        ENTRY_POINTS[entry](_kw(entry, "is_causal", is_causal=True), _spec(entry, is_causal=False))


NOT_BOOLS = ["no", "", 1, 0, 1.5, np.float64(1.0), [True], np.array([True])]
IS_CAUSAL_TAKERS = {
    "sdpa_forward": lambda c: an.sdpa_forward(Q, Q, Q, is_causal=c),
    "scaled_dot_product_attention": lambda c: an.scaled_dot_product_attention(Q, Q, Q, is_causal=c),
    "flash_attention_forward": lambda c: an.flash_attention_forward(Q, Q, Q, is_causal=c),
    "reference.sdpa_forward": lambda c: reference.sdpa_forward(Q, Q, Q, is_causal=c),
    "sdpa_sinks_forward": lambda c: an.sdpa_sinks_forward(Q[:, None], Q[:, None], Q[:, None],
                                                          np.zeros(1), is_causal=c),
    "mha_forward": lambda c: an.mha_forward(X, X, X, P, num_heads=2, is_causal=c),
    "paper.sdpa_forward": lambda c: paper.sdpa_forward(Q, Q, Q, is_causal=c),
    "paper.mha_forward": lambda c: paper.mha_forward(X, X, X, P, num_heads=2, is_causal=c),
    "additive_attention_forward": lambda c: an.additive_attention_forward(
        Q, Q, Q, an.init_additive_params(4, rng=0), is_causal=c),
    "AttentionSpec": lambda c: Spec(is_causal=c),
}


@pytest.mark.parametrize("entry", list(IS_CAUSAL_TAKERS))
@pytest.mark.parametrize("flag", NOT_BOOLS, ids=[repr(f) for f in NOT_BOOLS])
def test_is_causal_must_be_a_bool(entry, flag):
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        IS_CAUSAL_TAKERS[entry](flag)


@pytest.mark.parametrize("entry", list(IS_CAUSAL_TAKERS))
def test_a_numpy_bool_is_a_bool(entry):
    IS_CAUSAL_TAKERS[entry](np.bool_(True))


def test_a_frozen_spec_does_not_follow_the_callers_dict():
    d = {"rope_type": "linear", "factor": 2.0}
    rope = an.RoPE(scaling=d)
    d["factor"] = 4.0
    assert rope.scaling["factor"] == 2.0
    with pytest.raises(TypeError):
        rope.scaling["factor"] = 4.0                     # read-only
    lists = {"rope_type": "longrope", "short_factor": [1.0, 2.0], "long_factor": [1.0, 3.0],
             "original_max_position_embeddings": 4, "factor": 2.0}
    rope = an.RoPE(scaling=lists)
    lists["short_factor"][0] = 9.0
    assert rope.scaling["short_factor"] == (1.0, 2.0)
    same = an.RoPE(scaling={**lists, "short_factor": [1.0, 2.0]})
    assert rope == same and hash(rope) == hash(same) and rope.scaling == dict(same.scaling)
    spec = Spec(num_heads=2, rope={"scaling": {"rope_type": "linear", "factor": 2.0}})
    assert hash(spec) == hash(Spec(num_heads=2, rope=an.RoPE(scaling={"rope_type": "linear",
                                                                          "factor": 2.0})))
    # the frozen copy still drives the rotation: same numbers as the dict
    x = R.standard_normal((3, 4))
    as_dict = {**rope.options(), "scaling": dict(lists, short_factor=[1.0, 2.0])}
    np.testing.assert_array_equal(an.apply_rope(x, np.arange(3), **rope.options()),
                                  an.apply_rope(x, np.arange(3), **as_dict))
