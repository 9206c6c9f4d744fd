"""Local windows and local/global alternation, read per layer (interop/transformers/
layer_reading.py) and diffed one layer at a time and whole (model_diff.py): GPT-Neo (a window in
the layer's own causal buffer, unscaled scores computed in float32 by transformers), ModernBERT
(bidirectional, a symmetric window, RoPE theta per layer type), Cohere 2 (a sliding layer with
RoPE, then a full layer without), EXAONE 4 and Kolibri (the same pattern, the sweep's tiny
configs); and refusals that name the feature rather than what reading it would trip over."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop import transformers as itf  # noqa: E402
from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import sweep as sw  # noqa: E402
from attention_np.interop.transformers import tiny_models as tm  # noqa: E402
from attention_np.interop.transformers.layer_reading import (  # noqa: E402
    params_from_transformers,
    sliding_window,
)
from attention_np.interop.transformers.model_diff import (  # noqa: E402
    attention_layers,
    compare_transformers_model,
)

FAMILIES = ["gpt_neo", "modernbert", "cohere2"]
CHANGE = 1e-6


def test_the_window_rope_and_scale_are_read_per_layer():
    def specs(name):
        return [s for _, _, s in attention_layers(fam.family_model(name))[0]]

    def theta(s):
        return None if s.attention.rope is None else s.attention.rope.theta
    # the spec's window (left, right): transformers' W = 3 counts the query, (2, 0) causal
    neo = specs("gpt_neo")                      # global, then local with window_size 3
    assert [(s.attention.window, s.is_causal, s.scale, theta(s)) for s in neo] == \
        [(None, True, 1.0, None), ((2, 0), True, 1.0, None)]
    bert = specs("modernbert")                  # full, then |i - j| <= local_attention // 2
    assert [(s.attention.window, s.is_causal, theta(s)) for s in bert] == \
        [(None, False, 1000.0), ((2, 2), False, 30.0)]
    assert [sliding_window(s) for s in bert] == [None, 3]
    modernbert = attention_layers(fam.family_model("modernbert"))[0][0][1]
    assert bert[0].scale == 8 ** -0.5 and "W_o" in params_from_transformers(modernbert)[0]
    cohere = specs("cohere2")                   # sliding with RoPE, full without
    assert [(s.attention.window, theta(s)) for s in cohere] == [((2, 0), 10000.0), (None, None)]


@pytest.mark.parametrize("name", FAMILIES)
def test_each_layer_alone_agrees_at_float64_rounding(name):
    model = fam.family_model(name, seed=1)
    x = np.random.default_rng(5).standard_normal((2, 6, 32))
    pad = np.ones((2, 6), dtype=np.int64)
    pad[1, -2:] = 0
    for _, module, _ in attention_layers(model)[0]:
        r = itf.compare_transformers_attention(module, x, attention_mask=pad, seed=3)
        assert r.ok, str(r)
        assert max(c.err for c in r.checks if c.rule == "float64") < 1e-12, str(r)


def _add_change(module):
    def hook(mod, args, output):
        return (output[0] + CHANGE,) + tuple(output[1:]) if isinstance(output, tuple) \
            else output + CHANGE
    return module.register_forward_hook(hook)


@pytest.mark.parametrize("left_pad", [False, True])
@pytest.mark.parametrize("name", FAMILIES)
def test_the_whole_model_agrees_and_a_1e_6_change_to_its_local_layer_is_caught(name, left_pad):
    model = fam.family_model(name, seed=2)
    inputs = fam.model_inputs(name, model, left_pad=left_pad)
    report = compare_transformers_model(model, **inputs)
    assert report.ok, str(report)
    assert len(report.attention) == 2
    assert max(r.forward_error for r in report.attention) < 1e-12
    layers = attention_layers(model)[0]
    local = next((n, m) for n, m, s in layers if s.attention.window is not None)
    handle = _add_change(local[1])
    try:
        changed = compare_transformers_model(model, **inputs)
    finally:
        handle.remove()
    assert changed.first_disagreement.name == local[0], str(changed)
    bad = [c for c in changed.first_disagreement.checks if not c.ok]
    assert [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) < 1e-12
    assert [r.ok for r in changed.attention].count(False) == 1


@pytest.mark.parametrize("model_type", ["exaone4", "kolibri1"])
def test_full_layers_without_rope_in_sliding_full_models_agree(model_type):
    """The sweep's tiny configs: the full-attention layer takes the model's cos and sin and
    does not rotate; read as such, the whole model agrees."""
    model = tm.build(model_type)
    specs = [s for _, _, s in attention_layers(model)[0]]
    assert [s.attention.rope is not None for s in specs] == [True, False]
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.ok, str(report)


def test_granite_swa_per_layer_windows_and_sinks_agree_in_float64():
    """Granite SWA: full then sliding layers, sinks, no sdpa support: run eager with its
    float32 softmax undone (before: a 7e-8 MISMATCH, float32 rounding)."""
    model = tm.build("granite_swa")
    specs = [s for _, _, s in attention_layers(model)[0]]
    assert [sliding_window(s) for s in specs] == [None, model.config.sliding_window]
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.ok, str(report)
    assert max(r.forward_error for r in report.attention) < 1e-12


def test_gpt_neo_scores_in_float64_in_the_copy_not_float32():
    """transformers' GPT-Neo casts q and k to float32 in its _attn: the copy runs them in
    float64, so that the diff is float64 rounding, not float32's 1e-7."""
    model = fam.family_model("gpt_neo", seed=0)
    report = compare_transformers_model(model, **fam.model_inputs("gpt_neo", model))
    assert max(r.gradient_error for r in report.attention) < 1e-12, str(report)


def _deberta_v2_without_relative_attention():
    cfg = tm.tiny_config("deberta-v2")
    assert not cfg.relative_attention
    return transformers.AutoModel.from_config(cfg).eval()


def _data2vec_vision_with_its_bias_table():
    cfg = tm.tiny_config("data2vec-vision")
    cfg.use_relative_position_bias = True
    return transformers.AutoModel.from_config(cfg).eval()


def _mpt_with_clip_qkv():
    cfg = tm.tiny_config("mpt")
    cfg.attn_config.clip_qkv = 0.5
    return transformers.AutoModel.from_config(cfg).eval()


# how to build the model, the feature its refusal must name
REFUSALS = {
    "deberta-v2": (_deberta_v2_without_relative_attention,
                   "DeBERTa-v2 attention without relative attention"),
    "mpt": (_mpt_with_clip_qkv, "clamping q, k, v to +-0.5"),
    "longformer": (lambda: tm.build("longformer"), "sliding-window attention with global tokens"),
    "big_bird": (lambda: tm.build("big_bird"), "block-sparse attention"),
    "afmoe": (lambda: tm.build("afmoe"), "gated attention output"),
    "qwen3_next": (lambda: tm.build("qwen3_next"), "gated attention output"),
    "muse_glimmer_text": (lambda: tm.build("muse_glimmer_text"), "gated attention output"),
    "diffllama": (lambda: tm.build("diffllama"), "differential attention"),
    "doge": (lambda: tm.build("doge"), "a dynamic mask"),
    "bitnet": (lambda: tm.build("bitnet"), "attn_sub_norm"),
}


def test_data2vec_vision_with_its_bias_table_is_read_not_refused():
    """Its scale sits in its forward and its table beside it: both read, so the layer agrees."""
    found, refused = attention_layers(_data2vec_vision_with_its_bias_table())
    assert not [why for _, why in refused if "not an attention layer" not in why], refused
    x = np.random.default_rng(0).standard_normal((1, 17, 32))     # a 4x4 grid and a class token
    assert itf.compare_transformers_attention(found[0][1], x).ok


@pytest.mark.parametrize("family", sorted(REFUSALS))
def test_a_refusal_names_the_feature_not_the_scale_or_a_width(family):
    build, feature = REFUSALS[family]
    found, refused = attention_layers(build())
    # a hybrid's recurrent layers are refused by their own name (test_transformers_families.py)
    attention = [why for _, why in refused if "not an attention layer" not in why
                 and "delta-rule layer" not in why and "state-space layer" not in why]
    assert attention, refused
    for why in attention:
        assert feature in why, why
        assert "score scale is not readable" not in why, why
        assert "query projection of width" not in why, why
