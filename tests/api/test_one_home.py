"""Each option has one home (0.3; ../shared/API.md): the paper's own options (``mask``,
``is_causal``, ``scale``, ``num_heads``) and the per-call arrays (``bias``, ``positions``,
``rng``, ``dropout_mask``) are keywords of the call; configuration beyond the paper (window,
RoPE, soft-cap, QK-norm, dropout rate, grouped-query attention, the kernel) is a field of
:class:`~attention_np.AttentionSpec`. On every public entry point an option is accepted in its
home and refused anywhere else with a ``TypeError`` that names where it lives; keywords are
checked for type as well as value (``is_causal="no"`` is an error).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import attention_np as an
from attention_np import paper
from attention_np.kernels import reference
from attention_np.variants.spec import HOMES, SPEC_FIELDS

R = np.random.default_rng(0)
Q = R.standard_normal((2, 2, 3, 4))                   # (B, h, L, d): heads already split
KV1 = R.standard_normal((2, 1, 3, 4))                 # one key/value head (GQA with 2 query heads)
X = R.standard_normal((2, 3, 8))
P = an.init_mha_params(8, 2, rng=0)
SINKS = np.zeros(2)
Spec = an.AttentionSpec


def _cross(kw, spec):
    cache = an.cross_kv_cache(X, P, num_heads=kw.pop("num_heads", 2), spec=spec)
    return an.mha_cross_decode_step(X, P, cache, spec=spec, **{"num_heads": 2, **kw})


# entry point -> call(keywords, spec); the multi-head ones get num_heads=2 unless the test gives it
ENTRY_POINTS = {
    "sdpa_forward": lambda kw, spec: an.sdpa_forward(Q, Q, Q, spec=spec, **kw)[0],
    "flash_attention_forward": lambda kw, spec: an.flash_attention_forward(Q, Q, Q, spec=spec, **kw)[0],
    "sdpa_sinks_forward": lambda kw, spec: an.sdpa_sinks_forward(Q, Q, Q, SINKS, spec=spec, **kw)[0],
    "mha_forward": lambda kw, spec: an.mha_forward(X, X, X, P, spec=spec, **{"num_heads": 2, **kw})[0],
    "mha_decode_step": lambda kw, spec: an.mha_decode_step(X, P, an.KVCache(3), spec=spec,
                                                           **{"num_heads": 2, **kw}),
    "cross_kv_cache": lambda kw, spec: an.cross_kv_cache(X, P, spec=spec, **{"num_heads": 2, **kw}).k,
    "mha_cross_decode_step": _cross,
}
FUNCTIONS = {"sdpa_forward": an.sdpa_forward, "flash_attention_forward": an.flash_attention_forward,
             "sdpa_sinks_forward": an.sdpa_sinks_forward, "mha_forward": an.mha_forward,
             "mha_decode_step": an.mha_decode_step, "cross_kv_cache": an.cross_kv_cache,
             "mha_cross_decode_step": an.mha_cross_decode_step,
             "scaled_dot_product_attention": an.scaled_dot_product_attention}
# keyword-only parameters that are an entry point's own, not options of attention: the tiled
# kernel's block size, the sinks array of the tiled kernel (params['sinks'] in multi-head attention)
OWN = {"flash_attention_forward": {"block_size", "sinks"}}
CALL_OPTIONS = {n for n, (home, _) in HOMES.items() if home == "call"}


@pytest.mark.parametrize("entry", list(FUNCTIONS))
def test_every_keyword_of_an_entry_point_is_a_call_option_and_no_spec_field_is_one(entry):
    params = inspect.signature(FUNCTIONS[entry]).parameters.values()
    keywords = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                and p.default is not p.empty} - {"spec"}
    assert keywords - CALL_OPTIONS - OWN.get(entry, set()) == set()
    assert keywords & set(SPEC_FIELDS) == set()


def test_the_spec_has_no_field_of_the_call():
    assert set(SPEC_FIELDS) == {"window", "rope", "softcap", "qk_norm", "qk_norm_eps", "qk_norm_scope",
                                "dropout_p", "enable_gqa", "kernel"}
    assert CALL_OPTIONS == {"mask", "is_causal", "scale", "num_heads", "bias", "positions", "rng",
                            "dropout_mask"}


@pytest.mark.parametrize("name", sorted(CALL_OPTIONS))
def test_a_call_option_given_to_the_spec_is_refused_naming_the_call(name):
    with pytest.raises(TypeError, match=rf"AttentionSpec got {name}=: {name} is a keyword of the call "
                                        rf"\({name}=\.\.\.\)"):
        Spec(**{name: None})


# a value of each spec field that changes the answer of a plain call, and the entry points that take it
SPEC_VALUES = {"window": (1, 0), "softcap": 0.5, "dropout_p": 0.5, "enable_gqa": True,
               "rope": an.RoPE(), "qk_norm": "layer", "qk_norm_eps": 0.5, "qk_norm_scope": "all",
               "kernel": "reference"}
KERNELS = ("sdpa_forward", "flash_attention_forward", "sdpa_sinks_forward")
MHA = ("mha_forward", "mha_decode_step", "cross_kv_cache", "mha_cross_decode_step")
TAKES = {"window": KERNELS + ("mha_forward", "mha_decode_step"), "softcap": KERNELS + MHA,
         "dropout_p": ("sdpa_forward", "mha_forward"), "enable_gqa": KERNELS,
         "rope": ("mha_forward", "mha_decode_step"), "qk_norm": MHA, "qk_norm_eps": MHA,
         "qk_norm_scope": MHA,
         "kernel": ("mha_forward", "mha_decode_step", "cross_kv_cache", "mha_cross_decode_step")}
ACCEPTED = [(e, f) for f, entries in TAKES.items() for e in entries]


@pytest.mark.parametrize("entry, field", ACCEPTED, ids=[f"{e}-{f}" for e, f in ACCEPTED])
def test_a_spec_field_is_accepted_in_the_spec(entry, field):
    spec = Spec(**{field: SPEC_VALUES[field]})
    kw = {"rng": 0} if field == "dropout_p" else {}
    got = ENTRY_POINTS[entry](kw, spec)
    assert np.all(np.isfinite(got))
    # and it is not ignored (the cross cache holds keys and values, which a soft-cap never reaches)
    if field in ("window", "softcap", "dropout_p", "rope") and entry != "cross_kv_cache":
        assert np.abs(got - ENTRY_POINTS[entry](kw, None)).max() > 1e-6, (entry, field)


def test_enable_gqa_in_the_spec_is_grouped_query_attention():
    out, _ = an.sdpa_forward(Q, KV1, KV1, spec=Spec(enable_gqa=True))
    np.testing.assert_allclose(out, an.sdpa_forward(Q, np.repeat(KV1, 2, 1), np.repeat(KV1, 2, 1))[0],
                               rtol=1e-13, atol=1e-14)


REFUSED = [(e, f) for e in FUNCTIONS for f in SPEC_FIELDS]


@pytest.mark.parametrize("entry, field", REFUSED, ids=[f"{e}-{f}" for e, f in REFUSED])
def test_a_spec_field_given_as_a_keyword_is_refused_naming_the_spec(entry, field):
    call = (lambda kw, spec: an.scaled_dot_product_attention(Q, Q, Q, **kw)) \
        if entry == "scaled_dot_product_attention" else ENTRY_POINTS[entry]
    with pytest.raises(TypeError) as info:
        call({field: SPEC_VALUES[field]}, None)
    msg = str(info.value)
    if entry == "scaled_dot_product_attention":      # no spec at all: Python's own message
        assert f"unexpected keyword argument '{field}'" in msg
    else:
        assert msg == (f"{entry}() got {field}=, which is not taken here: {field} is a field of the "
                       f"spec (spec=AttentionSpec({field}=...))")


@pytest.mark.parametrize("entry", ["mha_forward", "mha_decode_step", "cross_kv_cache"])
def test_grouped_query_attention_in_multi_head_attention_lives_in_params(entry):
    with pytest.raises(TypeError, match=r"num_kv_heads=, which is not taken here: in multi-head "
                                        r"attention the width of params\['W_k'\] decides it"):
        ENTRY_POINTS[entry]({"num_kv_heads": 1}, None)
    with pytest.raises(TypeError, match=r"spec.enable_gqa=True: in multi-head attention the width "
                                        r"of params\['W_k'\] decides it"):
        ENTRY_POINTS[entry]({}, Spec(enable_gqa=True))
    gqa = an.init_mha_params(8, 2, num_kv_heads=1, rng=0)              # what params says is GQA
    out, _ = an.mha_forward(X, X, X, gqa, num_heads=2)
    assert out.shape == X.shape


@pytest.mark.parametrize("entry, name", [("cross_kv_cache", "scale"), ("cross_kv_cache", "mask"),
                                         ("sdpa_forward", "positions"), ("mha_decode_step", "rng"),
                                         ("flash_attention_forward", "dropout_mask")])
def test_a_call_option_a_call_does_not_take_is_python_s_plain_type_error(entry, name):
    with pytest.raises(TypeError) as info:
        ENTRY_POINTS[entry]({name: None}, None)
    assert str(info.value) == f"{entry}() got an unexpected keyword argument {name!r}"


@pytest.mark.parametrize("entry", ["mha_decode_step", "mha_cross_decode_step"])
def test_decoding_has_no_is_causal_keyword_and_says_why(entry):
    with pytest.raises(TypeError, match=f"{entry}\\(\\) got is_causal=: .*(decoding is causal|no causal "
                                        f"mask)"):
        ENTRY_POINTS[entry]({"is_causal": True}, None)


@pytest.mark.parametrize("entry", MHA)
def test_num_heads_is_a_required_keyword_of_multi_head_attention(entry):
    call = {"mha_forward": lambda: an.mha_forward(X, X, X, P),
            "mha_decode_step": lambda: an.mha_decode_step(X, P, an.KVCache(3)),
            "cross_kv_cache": lambda: an.cross_kv_cache(X, P),
            "mha_cross_decode_step": lambda: an.mha_cross_decode_step(
                X, P, an.cross_kv_cache(X, P, num_heads=2))}[entry]
    with pytest.raises(TypeError, match=f"{entry} needs num_heads=, the number of heads h"):
        call()


@pytest.mark.parametrize("entry", MHA)
@pytest.mark.parametrize("bad, error", [("2", ValueError), (2.0, ValueError), (True, ValueError),
                                        (0, ValueError)])
def test_num_heads_must_be_a_positive_int(entry, bad, error):
    with pytest.raises(error, match=f"num_heads must be a positive int, got {bad!r}"):
        ENTRY_POINTS[entry]({"num_heads": bad}, None)


SCALE_TAKERS = ("sdpa_forward", "flash_attention_forward", "sdpa_sinks_forward", "mha_forward",
                "mha_decode_step", "mha_cross_decode_step")


@pytest.mark.parametrize("entry", SCALE_TAKERS)
def test_scale_is_a_keyword_checked_for_type(entry):
    with pytest.raises(TypeError, match="scale must be a real number"):
        ENTRY_POINTS[entry]({"scale": "0.5"}, None)
    a, b = (ENTRY_POINTS[entry]({"scale": s}, None) for s in (0.5, 0.25))
    assert np.abs(a - b).max() > 1e-6                                   # and it is used


NOT_BOOLS = ["no", "", 1, 0, 1.5, np.float64(1.0), [True], np.array([True]), None]
IS_CAUSAL_TAKERS = {
    "sdpa_forward": lambda c: an.sdpa_forward(Q, Q, Q, is_causal=c),
    "scaled_dot_product_attention": lambda c: an.scaled_dot_product_attention(Q, Q, Q, is_causal=c),
    "flash_attention_forward": lambda c: an.flash_attention_forward(Q, Q, Q, is_causal=c),
    "reference.sdpa_forward": lambda c: reference.sdpa_forward(Q, Q, Q, is_causal=c),
    "sdpa_sinks_forward": lambda c: an.sdpa_sinks_forward(Q, Q, Q, SINKS, is_causal=c),
    "mha_forward": lambda c: an.mha_forward(X, X, X, P, num_heads=2, is_causal=c),
    "paper.sdpa_forward": lambda c: paper.sdpa_forward(Q, Q, Q, is_causal=c),
    "paper.mha_forward": lambda c: paper.mha_forward(X, X, X, P, num_heads=2, is_causal=c),
    "additive_attention_forward": lambda c: an.additive_attention_forward(
        Q, Q, Q, an.init_additive_params(4, rng=0), is_causal=c),
}


@pytest.mark.parametrize("entry", list(IS_CAUSAL_TAKERS))
@pytest.mark.parametrize("flag", NOT_BOOLS, ids=[repr(f) for f in NOT_BOOLS])
def test_is_causal_must_be_a_bool(entry, flag):
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        IS_CAUSAL_TAKERS[entry](flag)


@pytest.mark.parametrize("entry", list(IS_CAUSAL_TAKERS))
def test_a_numpy_bool_is_a_bool(entry):
    IS_CAUSAL_TAKERS[entry](np.bool_(True))


@pytest.mark.parametrize("field, bad", [("enable_gqa", "yes"), ("enable_gqa", 1), ("dropout_p", "0.1"),
                                        ("dropout_p", None)])
def test_spec_fields_are_checked_for_type(field, bad):
    with pytest.raises(TypeError, match=field):
        Spec(**{field: bad})


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
    spec = Spec(rope={"scaling": {"rope_type": "linear", "factor": 2.0}})
    assert hash(spec) == hash(Spec(rope=an.RoPE(scaling={"rope_type": "linear", "factor": 2.0})))
    # the frozen copy still drives the rotation: same numbers as the dict
    x = R.standard_normal((3, 4))
    as_dict = {**rope.options(), "scaling": dict(lists, short_factor=[1.0, 2.0])}
    np.testing.assert_array_equal(an.apply_rope(x, np.arange(3), **rope.options()),
                                  an.apply_rope(x, np.arange(3), **as_dict))


def test_the_reference_kernel_takes_the_window_in_the_spec_and_refuses_what_it_cannot_do():
    caller = "attention_np.kernels.reference.sdpa_forward"
    windowed, _ = reference.sdpa_forward(Q, Q, Q, spec=Spec(window=(1, 0)))
    np.testing.assert_allclose(windowed, an.sdpa_forward(Q, Q, Q, spec=Spec(window=(1, 0)))[0],
                               rtol=1e-13, atol=1e-14)
    with pytest.raises(TypeError, match=rf"^{caller}\(\) got window=, which is not taken here: "
                                        r"window is a field of the spec"):
        reference.sdpa_forward(Q, Q, Q, window=(1, 0))
    for field in ("softcap", "dropout_p", "enable_gqa"):
        with pytest.raises(ValueError, match=rf"{caller} cannot do spec.{field}"):
            reference.sdpa_forward(Q, Q, Q, spec=Spec(**{field: SPEC_VALUES[field]}))
