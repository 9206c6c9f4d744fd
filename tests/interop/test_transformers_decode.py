"""replay_generate on encoder-decoders: T5's and BART's greedy generate(), the decoder's first
self-attention (KV cache; T5's bias table) and cross-attention (the encoder output projected
once) replayed step by step with attention_np, plain and with a padded source."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np.interop.transformers import decode_diff as td
from attention_np.interop.transformers import family_cases as cases
from tests.helpers import require

torch = require("torch")
require("transformers")

TIGHT = 1e-12            # float64 rounding, relative to max(1, max|reference|)
SOURCES = np.array([[3, 5, 7, 9, 11], [2, 4, 6, 8, 10]])
RIGHT_PAD = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
LEFT_PAD = np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])


@pytest.fixture(autouse=True)
def _quiet():
    import transformers
    transformers.logging.set_verbosity_error()


def _steps(n):
    return [f"{layer} step {i} (T=1)" for i in range(n) for layer in ("self", "cross")]


@pytest.mark.parametrize("family", ["t5", "bart"])
@pytest.mark.parametrize("pad", [None, RIGHT_PAD, LEFT_PAD], ids=["plain", "right", "left"])
def test_encoder_decoder_generate_replayed_self_and_cross_attention_per_step(family, pad):
    model = cases.tiny_model(family, seed=0, causal_lm=True)
    report = td.replay_generate(model, SOURCES, attention_mask=pad, max_new_tokens=4)
    assert report.ok, str(report)
    # incremental: each layer ran once per new token, one query at a time (T=1)
    assert [c.name for c in report.checks] == _steps(4)
    for c in report.checks:
        assert c.err <= TIGHT * max(1.0, c.size), (c.name, c.err)
    # transformers projected the encoder output by the cross-attention's W_k once, not per step
    assert report.cross_projections == 1
    assert report.tokens.shape == (2, 5)                    # the start token and 4 new ones
    assert next(model.parameters()).dtype == torch.float32  # the model is left as it was
    if pad is not None:
        assert any("2 padded source position(s) masked" in n for n in report.notes)


def test_the_source_padding_reaches_the_cross_attention(monkeypatch):
    """Without the source padding mask, the cross-attention steps of a padded batch disagree."""
    model = cases.tiny_model("t5", seed=0, causal_lm=True)
    real = td.mha_cross_decode_step
    monkeypatch.setattr(td, "mha_cross_decode_step",
                        lambda *a, mask=None, **kw: real(*a, mask=None, **kw))
    report = td.replay_generate(model, SOURCES, attention_mask=RIGHT_PAD, max_new_tokens=3)
    assert not report.ok
    assert all(c.ok for c in report.checks if c.name.startswith("self"))
    assert not any(c.ok for c in report.checks if c.name.startswith("cross"))


def test_t5_decoder_bias_must_be_the_row_at_the_absolute_position(monkeypatch):
    """The trap: during caching the new query is position S - 1, not 0. Top-left aligned
    relative positions (the query taken as position 0) give the wrong bias from step 1 on."""
    model = cases.tiny_model("t5", seed=0, causal_lm=True)
    real = td.relative_positions
    monkeypatch.setattr(td, "relative_positions",
                        lambda T, S, align: real(T, S, align="top_left"))
    report = td.replay_generate(model, SOURCES, max_new_tokens=4)
    by_name = {c.name: c for c in report.checks}
    assert by_name["self step 0 (T=1)"].ok               # S = 1: both alignments agree
    for i in (1, 2, 3):
        assert not by_name[f"self step {i} (T=1)"].ok and by_name[f"cross step {i} (T=1)"].ok
    assert not report.ok


def test_t5_decoder_bias_demo_matches_transformers_compute_bias_with_the_offset():
    from attention_np.interop.transformers.family_traps import t5_decoder_bias_offset
    demo = t5_decoder_bias_offset(seed=2)
    assert demo.explained, "\n".join(demo.lines)


@pytest.mark.parametrize("family, layer", [("bart", "cross"), ("t5", "self"), ("t5", "cross")])
def test_one_perturbed_weight_is_detected(monkeypatch, family, layer):
    """attention_np reads one weight 1e-6 off what generate() ran with: that layer mismatches."""
    model = cases.tiny_model(family, seed=0, causal_lm=True)
    real = td.params_from_transformers

    def perturbed(module, **kw):
        params, spec = real(module, **kw)
        is_cross = (not module.has_relative_attention_bias if family == "t5"
                    else not module.is_causal)        # decoder layer 0: T5's self has the table
        if (layer == "cross") == is_cross:
            params["W_v"] = params["W_v"].copy()
            params["W_v"][0, 0] += 1e-6
        return params, spec

    monkeypatch.setattr(td, "params_from_transformers", perturbed)
    report = td.replay_generate(model, SOURCES, max_new_tokens=3)
    assert not report.ok
    for c in report.checks:
        assert c.ok == (not c.name.startswith(layer)), (c.name, c.err)


def test_replay_names_the_supported_models():
    with pytest.raises(TypeError, match=r"T5ForConditionalGeneration.*"
                                        r"BartForConditionalGeneration.*got T5Model"):
        td.replay_generate(cases.tiny_model("t5"), SOURCES)
    with pytest.raises(TypeError, match=r"GPT2LMHeadModel.*got BartModel"):
        td.replay_generate(cases.tiny_model("bart"), SOURCES)


# ---------------------------------------------------------------- Gemma 3 and gpt-oss decoders

PROMPTS = np.array([[3, 5, 7, 9], [2, 4, 6, 8]])        # 4 + 4 tokens > WINDOW: the window acts


def _decoder_steps(n, prompt=4):
    return [f"step 0 (T={prompt})"] + [f"step {i} (T=1)" for i in range(1, n)]


@pytest.mark.parametrize("family", ["gemma3", "gpt_oss"])
def test_gemma3_and_gpt_oss_generate_replayed_per_step_to_float64_rounding(family):
    model = cases.tiny_model(family, seed=1, causal_lm=True)
    report = td.replay_generate(model, PROMPTS, max_new_tokens=5)
    assert report.ok, str(report)
    # the prompt, then one query at a time on the cache
    assert [c.name for c in report.checks] == _decoder_steps(5)
    for c in report.checks:
        assert c.err <= TIGHT * max(1.0, c.size), (c.name, c.err)
    # the replayed (sliding) layer's frequencies checked at every step
    assert [c.name for c in report.rope_checks if c.name.startswith("inv_freq")] == \
        [f"inv_freq {i} rel" for i in range(5)]
    assert report.tokens.shape == (2, 9)
    assert next(model.parameters()).dtype == torch.float32      # the model is left as it was
    if family == "gpt_oss":
        assert model.config._experts_implementation == "grouped_mm"     # not switched


@pytest.mark.parametrize("family", ["gemma3", "gpt_oss"])
def test_gemma3_and_gpt_oss_one_perturbed_weight_is_detected(monkeypatch, family):
    model = cases.tiny_model(family, seed=1, causal_lm=True)
    real = td.params_from_transformers

    def perturbed(module, **kw):
        params, spec = real(module, **kw)
        params["W_v"] = params["W_v"].copy()
        params["W_v"][0, 0] += 1e-6
        return params, spec

    monkeypatch.setattr(td, "params_from_transformers", perturbed)
    report = td.replay_generate(model, PROMPTS, max_new_tokens=3)
    assert not report.ok
    assert not any(c.ok for c in report.checks)


@pytest.mark.parametrize("family, option", [("gemma3", "window"), ("gpt_oss", "window"),
                                            ("gpt_oss", "sinks")])
def test_gemma3_and_gpt_oss_replay_needs_the_window_and_the_sinks(monkeypatch, family, option):
    """Without the sliding window (W = 3) the steps whose cache exceeds it disagree; without
    gpt-oss's sinks, every step does."""
    model = cases.tiny_model(family, seed=1, causal_lm=True)
    real = td.mha_decode_step

    def without(x, params, kv, *, spec, **kw):
        if option == "window":
            spec = spec.replace(window=None)
        else:                                  # gpt-oss: the sinks are in params
            params = {n: w for n, w in params.items() if n != "sinks"}
        return real(x, params, kv, spec=spec, **kw)

    monkeypatch.setattr(td, "mha_decode_step", without)
    report = td.replay_generate(model, PROMPTS, max_new_tokens=4)
    assert not report.ok
    # window: the prompt's last row sees 4 > 3 keys, so every step reaches past the window
    assert not any(c.ok for c in report.checks), str(report)


def test_gemma3_replay_checks_the_sliding_layers_own_rope_frequencies():
    """Gemma 3 keeps one inv_freq per layer type (sliding: theta 10 000, full: 1 000 000); the
    replayed first layer is a sliding one, and its type's buffer is the one checked."""
    model = cases.tiny_model("gemma3", seed=1, causal_lm=True)
    rotary = model.model.rotary_emb
    assert model.model.layers[0].self_attn.layer_type == "sliding_attention"
    with torch.no_grad():
        rotary.sliding_attention_inv_freq.mul_(1 + 1e-5)     # 1e-5 relative: > 8 float32 ulps
    report = td.replay_generate(model, PROMPTS, max_new_tokens=3)
    assert all(c.ok for c in report.checks)        # the replay's own cos/sin are float64
    assert not any(c.ok for c in report.rope_checks if c.name.startswith("inv_freq"))
    assert not report.ok
    # the full-attention type's buffer is another one: ours for theta 1e6 is far from sliding's
    full = np.asarray(rotary.full_attention_inv_freq, dtype=np.float64)
    sliding = np.asarray(rotary.sliding_attention_inv_freq, dtype=np.float64)
    assert np.abs(full / sliding - 1).max() > 0.5


@pytest.mark.float32
def test_gpt_oss_eager_experts_equal_grouped_mm_in_float32():
    """transformers' default experts (grouped_mm) refuse float64; the replay's float64 copy runs
    experts_implementation="eager" (float64_experts). In float32 both are the same function:
    each is as close to the float64 eager experts as float32 rounding allows the other."""
    import copy

    from attention_np.interop.tolerance import check_float32
    from attention_np.interop.transformers.recent import float64_experts
    model = cases.tiny_model("gpt_oss", seed=2, causal_lm=True)
    assert model.config._experts_implementation == "grouped_mm"
    eager = copy.deepcopy(model)
    float64_experts(eager)
    assert eager.config._experts_implementation == "eager"
    oracle = copy.deepcopy(eager).double()
    x = torch.from_numpy(np.random.default_rng(2).standard_normal((2, 20, cases.D_MODEL)))
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="Float32, BFloat16 or Float16"):
            copy.deepcopy(model).double().model.layers[0].mlp(x)   # grouped_mm in float64
        out = {}
        for name, m, xi in (("grouped_mm", model, x.float()), ("eager", eager, x.float()),
                            ("oracle", oracle, x)):
            y, scores = m.model.layers[0].mlp(xi)
            out[name] = y.numpy().astype(np.float64)
    # both experts are hit (top-1 of 2): the comparison covers each expert's weights
    _, _, chosen = oracle.model.layers[0].mlp.router(x.reshape(-1, cases.D_MODEL))
    assert set(chosen.flatten().tolist()) == {0, 1}
    assert check_float32("grouped_mm", out["grouped_mm"], out["oracle"], out["eager"]).ok
    assert check_float32("eager", out["eager"], out["oracle"], out["grouped_mm"]).ok
    assert np.abs(out["oracle"]).max() > 0.1              # not a vanishing output
