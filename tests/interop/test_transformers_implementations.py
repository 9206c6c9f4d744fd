"""One verdict whatever the attention implementation: a layer of every family_cases kind, its model
built with eager, sdpa, flex_attention or the float64 eager, diffed alone with the implementation
it was built with and with each one asked for, and its model diffed whole: the same float64
verdict every way (interop/transformers/layer_diff.py ``layer_implementation``), a 1e-6 change
caught every way, and a note where the implementation run is not the one asked for."""

from __future__ import annotations

import warnings

import pytest

from tests.helpers import require

torch = require("torch")
require("transformers")

from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import family_cases as cases  # noqa: E402
from attention_np.interop.transformers import layer_diff as itf  # noqa: E402
from attention_np.interop.transformers.model_diff import compare_transformers_model  # noqa: E402
from attention_np.interop.transformers.recent import (  # noqa: E402
    EAGER_FLOAT64,
    eager_float64_attention,
)
from attention_np.interop.transformers.sweep import _change  # noqa: E402

TIGHT = 1e-12
# how a model can be built (flex_attention: where the family and the CPU allow it)
BUILT = ("eager", "sdpa", "flex_attention", EAGER_FLOAT64)
# what the layer diff can be asked for (None: the implementation the model was built with)
ASKED = (None, "eager", "sdpa", EAGER_FLOAT64, "flex_attention")


@pytest.fixture(autouse=True)
def _registered():
    """transformers builds a model with the float64 eager only once it is registered."""
    import transformers
    from transformers.masking_utils import eager_mask
    transformers.logging.set_verbosity_error()
    transformers.AttentionInterface.register(EAGER_FLOAT64, eager_float64_attention)
    transformers.AttentionMaskInterface.register(EAGER_FLOAT64, eager_mask)


def _model(family: str, built: str):
    """The tiny model of ``family`` built with ``built``, or a skip naming transformers' refusal
    (a family that declares no flex_attention support)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cases.tiny_model(cases.MODELS.get(family, family), seed=1,
                                    attn_implementation=built)
    except (ValueError, ImportError) as e:
        pytest.skip(f"{family} cannot be built with {built}: {e}")


def _inputs(family: str) -> dict:
    _, inputs = cases.case(family, seed=1)
    inputs.pop("attn_implementation", None)      # each test says which it asks for
    return inputs


def _tight(report):
    assert report.ok, str(report)
    for c in report.checks:         # the float32 rule: inv_freq against transformers' buffer
        assert c.rule == "float32" or c.err <= TIGHT * max(1.0, c.size), (c.name, c.err, str(report))


@pytest.mark.parametrize("built", BUILT)
@pytest.mark.parametrize("family", cases.FAMILIES)
def test_a_layer_diffed_with_the_implementation_its_model_was_built_with_agrees(family, built):
    model = _model(family, built)
    layer = cases.attention_layer(family, model)
    before = layer.config._attn_implementation
    report = itf.compare_transformers_attention(layer, **_inputs(family), seed=2,
                                                attn_implementation=None)
    _tight(report)
    assert layer.config._attn_implementation == before                  # the model untouched
    if before == "flex_attention":                        # (gpt-oss is built eager whatever)
        assert any("'flex_attention' has no float64 backward on the CPU" in n
                   for n in report.notes), report.notes


@pytest.mark.parametrize("family", cases.FAMILIES)
def test_a_layer_gets_one_verdict_whatever_implementation_is_asked_and_the_change_is_caught(
        family):
    layer = cases.attention_layer(family, _model(family, "sdpa"))
    inputs = _inputs(family)
    outs = {}
    for asked in ASKED:
        report = itf.compare_transformers_attention(layer, **inputs, seed=2,
                                                    attn_implementation=asked)
        _tight(report)
        ran = report.module.rsplit("(", 1)[1].rstrip(")")
        if asked is not None and ran != asked:             # switched: the note says why
            assert any(f"the copy ran {ran!r}" in n for n in report.notes), (asked, report.notes)
        outs[asked] = next(c.err for c in report.checks if c.name == "out")
        handle = _change(layer)                             # +1e-6 on the torch side's output
        try:
            changed = itf.compare_transformers_attention(layer, **inputs, seed=2,
                                                         attn_implementation=asked)
        finally:
            handle.remove()
        out = next(c for c in changed.checks if c.name == "out")
        assert not changed.ok and 5e-7 < out.err < 2e-6, (asked, str(changed))
    assert max(outs.values()) <= TIGHT


@pytest.mark.parametrize("built", BUILT)
@pytest.mark.parametrize("family", fam.OLD)
def test_the_whole_model_agrees_however_it_was_built(family, built):
    model = _model(family, built)
    report = compare_transformers_model(model, **fam.model_inputs(family, model, seed=1), seed=2)
    assert report.verdict == "AGREE", str(report)
    assert all(r.forward_error <= TIGHT for r in report.attention), str(report)
