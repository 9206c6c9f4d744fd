"""The LayerSpec a transformers layer is read as (interop/transformers/layer_reading.py): its
``AttentionSpec`` (the window in the spec's ``(left, right)``, transformers' ``W`` derived from it),
the call's shape, and the records of what the spec cannot say, each checked when made."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers import family_cases as cases  # noqa: E402
from attention_np.interop.transformers import layer_reading as lr  # noqa: E402
from attention_np.interop.transformers import reading_scores  # noqa: E402
from attention_np.variants.spec import AttentionSpec, RoPE  # noqa: E402


@pytest.mark.parametrize("family", cases.FAMILIES)
def test_a_layers_spec_is_its_attention_spec_and_the_window_is_dropped_only_when_asked(family):
    module, _ = cases.case(family)
    spec = lr.layer_spec(module)
    assert isinstance(spec.attention, AttentionSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.is_causal = not spec.is_causal
    assert lr.attention_spec(spec, window=True) is spec.attention
    assert lr.attention_spec(spec) == dataclasses.replace(spec.attention, window=None)
    options = lr.mha_options(spec, None)
    assert options["spec"] == lr.attention_spec(spec) and options["scale"] == spec.scale
    assert ("positions" in options) == (spec.attention.rope is not None)
    # transformers' W, read from the layer, is the spec's window given back
    W = lr.read_window(module, getattr(module, "config", None))
    assert lr.sliding_window(spec) == W
    if spec.attention.window is not None:
        left, right = spec.attention.window
        assert (left, right) == (W - 1, 0 if spec.is_causal else W - 1)


def test_the_windowed_families_read_w_as_w_minus_one_keys_before_the_query():
    """The windowed cases (W = 3): a causal layer sees the query and the 2 keys before it."""
    windowed = {f: lr.layer_spec(cases.case(f)[0]) for f in ("mistral", "qwen2", "gemma2", "gpt_oss")}
    assert {f: s.attention.window for f, s in windowed.items()} == \
        dict.fromkeys(windowed, (cases.WINDOW - 1, 0))


def test_the_window_follows_the_causality_the_call_passes():
    """CLIP's text model passes is_causal to its layers: a windowed layer called bidirectional
    keeps W keys on each side (ModernBERT's), called causal W up to the query."""
    spec = lr.layer_spec(cases.case("mistral")[0])
    W = cases.WINDOW
    both = lr.with_causality(spec, False)
    assert (both.is_causal, both.attention.window, lr.sliding_window(both)) == \
        (False, (W - 1, W - 1), W)
    again = lr.with_causality(both, True)
    assert again == spec
    cross = lr.no_causal(spec)
    assert (cross.is_causal, cross.attention.window) == (False, None)
    assert cross.attention.rope == spec.attention.rope          # only the mask changed


@pytest.mark.parametrize("causal, window", [(True, (2, 2)), (True, (None, 0)), (False, (2, 0)),
                                            (False, (2, 1))])
def test_a_window_that_is_no_transformers_window_of_the_layer_is_refused(causal, window):
    with pytest.raises(ValueError, match=r"attention.window .* is not transformers' sliding window"):
        lr.LayerSpec(family="llama", num_heads=4, num_kv_heads=2, head_dim=12, scale=0.5,
                     is_causal=causal, attention=AttentionSpec(window=window))


@pytest.mark.parametrize("change", [{"sin_first": True}, {"angles_layout": "half"},
                                    {"sections": True}, {"in_layer": True},
                                    {"table": "embed_positions"}])
def test_rope_inputs_without_rope_are_refused_and_with_rope_kept(change):
    inputs = lr.RopeInputs(**change)
    shape = dict(family="llama", num_heads=4, num_kv_heads=2, head_dim=12, scale=0.5,
                 is_causal=True)
    with pytest.raises(ValueError, match="rope_inputs .* of a layer without RoPE"):
        lr.LayerSpec(**shape, rope_inputs=inputs)
    spec = lr.LayerSpec(**shape, rope_inputs=inputs, attention=AttentionSpec(rope=RoPE()))
    assert spec.rope_inputs == inputs and spec.rotated_width == 12


def test_attention_must_be_an_attention_spec():
    with pytest.raises(TypeError, match="attention must be an AttentionSpec, got dict"):
        lr.LayerSpec(family="llama", num_heads=4, num_kv_heads=2, head_dim=12, scale=0.5,
                     is_causal=True, attention={"softcap": 2.0})


@pytest.mark.parametrize("argument, norm_eps", [(False, None), (True, 1e-5)])
def test_a_residual_is_one_of_the_two_kinds(argument, norm_eps):
    with pytest.raises(ValueError, match="one of the two"):
        lr.Residual(argument=argument, norm_eps=norm_eps)


def test_the_residuals_are_read_as_their_kind():
    from attention_np.interop.transformers import families as fam
    from attention_np.interop.transformers.model_diff import attention_layers
    albert = attention_layers(fam.family_model("albert"))[0][0][2]
    assert albert.residual == lr.Residual(norm_eps=albert.residual.norm_eps) and \
        albert.residual.norm_eps > 0
    assert attention_layers(fam.family_model("roberta"))[0][0][2].residual is None


@pytest.mark.parametrize("second", ["read_alibi", "read_grid_table"])
def test_a_layer_with_two_relative_position_biases_is_refused_naming_both(monkeypatch, second):
    module = cases.case("t5")[0]                                   # T5's first block: buckets
    assert isinstance(lr.layer_spec(module).relative_bias, lr.T5Buckets)
    other = {"read_alibi": reading_scores.ALiBi((0.5,) * 4),
             "read_grid_table": reading_scores.GridTable(2, 2, False)}[second]
    monkeypatch.setattr(reading_scores, second, lambda *args: other)
    with pytest.raises(lr.UnsupportedLayer, match=f"two relative position biases \\(T5Buckets and "
                                                  f"{type(other).__name__}\\)"):
        lr.layer_spec(module)


@pytest.mark.parametrize("W", [0, -1, 2.5, True])
def test_a_sliding_window_of_no_key_is_refused_by_name(monkeypatch, W):
    monkeypatch.setattr(lr, "read_window", lambda module, cfg: W)
    with pytest.raises(lr.UnsupportedLayer, match=f"a sliding window of {W!r} keys"):
        lr.layer_spec(cases.case("llama")[0])
