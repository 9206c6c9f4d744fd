"""Layers read by what they compute (interop/transformers/layer_reading.py), the 22 families beyond the
first 17 kinds (OLMo 2's QK-norm over all heads, BEiT's, Data2VecVision's and Swin's 2-D bias
tables among them; Zamba's hybrid), the LayerNorm QK-norm (core/qk_layernorm.py), and whole
models diffed layer by layer (interop/transformers/model_diff.py)."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import numpy as np
import pytest

from attention_np.paper.gradcheck import numerical_gradient
from attention_np.variants.qk_layernorm import layer_norm_backward, layer_norm_forward
from tests.helpers import max_abs_diff, require

torch = require("torch")
require("transformers")

from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import layer_diff as itf  # noqa: E402
from attention_np.interop.transformers.layer_reading import (  # noqa: E402
    ALiBi,
    GridTable,
    UnsupportedLayer,
    layer_spec,
    params_from_transformers,
)
from attention_np.interop.transformers.model_diff import (  # noqa: E402
    attention_layers,
    compare_transformers_model,
)

R = np.random.default_rng(2525)
# (Data2VecVision and Swin attend a grid of patches, a window: tested below with their shapes)
AGREE = sorted(set(fam.NEW) - {"deberta-v2", "data2vec-vision", "swin"})


@pytest.mark.parametrize("shape", [(5,), (3, 1, 5)])
def test_layer_norm_backward_matches_finite_differences(shape):
    x, dy = R.standard_normal((2, 3, 4, 5)), R.standard_normal((2, 3, 4, 5))
    w, b = 1 + 0.3 * R.standard_normal(shape), R.standard_normal(shape)
    dx, dw, db = layer_norm_backward(dy, layer_norm_forward(x, w, b, 1e-3)[1])
    for a, g in ((x, dx), (w, dw), (b, db)):
        num = numerical_gradient(
            lambda: float(np.sum(layer_norm_forward(x, w, b, 1e-3)[0] * dy)), a)
        assert max_abs_diff(g, num) < 1e-8 * max(1.0, np.abs(num).max())


def test_layer_norm_equals_torch_layer_norm_forward_and_backward():
    x, dy = R.standard_normal((3, 4, 6)), R.standard_normal((3, 4, 6))
    ln = torch.nn.LayerNorm(6, eps=1e-6).double()
    with torch.no_grad():
        ln.weight.copy_(torch.from_numpy(1 + 0.3 * R.standard_normal(6)))
        ln.bias.copy_(torch.from_numpy(R.standard_normal(6)))
    xt = torch.tensor(x, requires_grad=True)
    yt = ln(xt)
    yt.backward(torch.from_numpy(dy))
    y, cache = layer_norm_forward(x, ln.weight.detach().numpy(), ln.bias.detach().numpy(), 1e-6)
    dx, dw, db = layer_norm_backward(dy, cache)
    for ours, theirs in ((y, yt), (dx, xt.grad), (dw, ln.weight.grad), (db, ln.bias.grad)):
        assert max_abs_diff(ours, theirs.detach().numpy()) < 1e-12


@pytest.mark.parametrize("name", AGREE)
def test_every_attention_layer_of_the_new_families_agrees_in_float64(name):
    model = fam.family_model(name, seed=1)
    layers, refused = attention_layers(model)
    assert layers and not refused
    x = R.standard_normal((2, 6, 32))
    pad = np.ones((2, 6), dtype=np.int64)
    pad[1, -2:] = 0
    for _, module, _spec in layers:
        r = itf.compare_transformers_attention(module, x, attention_mask=pad, seed=3)
        assert r.ok, str(r)
        assert max(c.err for c in r.checks if c.rule == "float64") < 1e-12


def test_what_the_reader_finds_in_each_family():
    read = {n: params_from_transformers(attention_layers(fam.family_model(n))[0][0][1])
            for n in ("gpt_neox", "falcon", "phi", "phi3", "stablelm", "cohere", "granite",
                      "albert", "roberta")}
    spec = {n: s for n, (_, s) in read.items()}
    assert (spec["gpt_neox"].attention.rope.rotary_dim, spec["gpt_neox"].head_dim) == (4, 8)
    assert (spec["falcon"].num_heads, spec["falcon"].num_kv_heads) == (4, 2)
    assert spec["phi"].attention.qk_norm == "layer" and spec["phi"].attention.rope.rotary_dim == 4
    assert spec["phi3"].num_kv_heads == 2
    assert spec["stablelm"].attention.qk_norm == "layer"
    assert spec["stablelm"].attention.rope.rotary_dim == 4
    assert (spec["cohere"].attention.rope.layout, spec["cohere"].attention.qk_norm) == \
        ("interleaved", "layer")
    assert spec["granite"].scale == 0.2
    assert spec["albert"].residual.norm_eps is not None and not spec["albert"].residual.argument
    assert "W_o" not in read["roberta"][0] and not spec["roberta"].is_causal


def test_fused_qkv_columns_are_the_layers_own_split():
    """GPT-NeoX (per head) and Falcon (grouped): q, k, v read from the fused weight are what the
    layer's own reshape gives."""
    from attention_np.interop.transformers.weights import find_projections, qkv_columns
    for name in ("gpt_neox", "falcon"):
        module = attention_layers(fam.family_model(name))[0][0][1]
        spec = layer_spec(module)
        p = find_projections(module)
        cols = qkv_columns(p.layout, spec.num_heads, spec.num_kv_heads, spec.head_dim)
        assert sorted(np.concatenate(list(cols.values()))) == list(range(p.fused.weight.shape[0]))


def test_deberta_is_refused_naming_its_disentangled_attention():
    model = fam.family_model("deberta-v2")
    layers, refused = attention_layers(model)
    assert not layers and len(refused) == 2
    assert "disentangled relative attention" in refused[0][1]
    with pytest.raises(UnsupportedLayer, match="disentangled relative attention"):
        itf.compare_transformers_attention(model.encoder.layer[0].attention.self,
                                           R.standard_normal((1, 3, 32)))


def test_a_subclass_is_read_and_a_module_without_projections_is_refused():
    model = fam.family_model("llama")
    base = model.layers[0].self_attn
    sub = type("MyAttention", (type(base),), {})
    layer = copy.deepcopy(base)
    layer.__class__ = sub
    r = itf.compare_transformers_attention(layer, R.standard_normal((2, 5, 32)), seed=1)
    assert r.ok, str(r)
    with pytest.raises(UnsupportedLayer, match="is not an attention layer"):
        layer_spec(torch.nn.Linear(3, 3))


def test_clip_qkv_is_refused_and_alibi_named_alone():
    tf = require("transformers")
    olmo = tf.OlmoModel(tf.OlmoConfig(**fam.NEW["olmo"][1], clip_qkv=8.0))
    with pytest.raises(UnsupportedLayer, match="clamping q, k, v to \\+-8.0"):
        layer_spec(olmo.layers[0].self_attn)
    falcon = tf.FalconModel(tf.FalconConfig(hidden_size=32, num_attention_heads=4,
                                            num_hidden_layers=1, vocab_size=61, alibi=True))
    assert isinstance(layer_spec(falcon.h[0].self_attention).relative_bias, ALiBi)  # read
    with pytest.raises(UnsupportedLayer, match="ALiBi .* compare_transformers_model"):
        itf.compare_transformers_attention(falcon.h[0].self_attention, np.zeros((1, 3, 32)))


@pytest.mark.parametrize("name", ["bert", "llama", "bart", "falcon", "whisper"])
def test_a_whole_model_agrees_layer_by_layer(name):
    model = fam.family_model(name, seed=2)
    report = compare_transformers_model(model, seed=4, **fam.model_inputs(name, model))
    assert report.ok and report.first_disagreement is None, str(report)
    expected = len(attention_layers(model)[0])
    assert len(report.attention) == expected
    assert "AGREE" in str(report) and "<table>" in report._repr_html_()


def _t5_two_blocks():
    tf = require("transformers")
    cfg = tf.T5Config(d_model=32, d_kv=8, num_heads=4, num_layers=2, num_decoder_layers=2,
                      d_ff=40, vocab_size=61, relative_attention_num_buckets=8,
                      relative_attention_max_distance=20, decoder_start_token_id=0)
    model = tf.T5Model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape))
    return model.eval()


def test_t5_blocks_after_the_first_are_replayed_with_block_0s_bias():
    model = _t5_two_blocks()
    inputs = fam.model_inputs("t5", model)
    report = compare_transformers_model(model, **inputs)
    assert report.ok, str(report)
    names = [r.name for r in report.attention]
    assert "encoder.block.1.layer.0.SelfAttention" in names and len(names) == 2 + 2 * 2


def test_t5_block_1_alone_says_it_runs_without_the_bias_it_gets_in_the_model():
    model = _t5_two_blocks()
    layer = model.encoder.block[1].layer[0].SelfAttention
    x = R.standard_normal((2, 5, 32))
    r = itf.compare_transformers_attention(layer, x)
    assert any("position bias block 0 computed" in n for n in r.notes)
    table = model.encoder.block[0].layer[0].SelfAttention
    with torch.no_grad():
        bias = table.compute_bias(5, 5).double().numpy()           # (1, h, L, S)
    r = itf.compare_transformers_attention(layer, x, position_bias=bias)
    assert r.ok and not r.notes, str(r)


def test_a_weight_changed_by_1e_7_during_the_run_is_the_first_disagreement():
    model = fam.family_model("qwen3", seed=0)        # two layers
    target = model.layers[1].self_attn

    def corrupt(module, args, kwargs):
        with torch.no_grad():
            module.q_proj.weight[0, 0] += 1e-7
    target.register_forward_pre_hook(corrupt, with_kwargs=True)
    report = compare_transformers_model(model, **fam.model_inputs("qwen3", model))
    assert not report.ok
    assert report.first_disagreement.name == "layers.1.self_attn", str(report)
    assert report.layers[0].ok
    assert "first disagreement: layers.1.self_attn" in str(report)


def test_a_wrong_replay_is_the_first_disagreement(monkeypatch):
    from attention_np.interop.transformers import model_diff as tm
    model = fam.family_model("gpt_neox", seed=0)
    real = tm.replay
    calls = []

    def wrong(spec, params, *a, **k):
        calls.append(1)
        if len(calls) == 2:                          # the second layer: W_v off by 1e-7
            params = {**params, "W_v": params["W_v"] + 1e-7}
        return real(spec, params, *a, **k)
    monkeypatch.setattr(tm, "replay", wrong)
    report = compare_transformers_model(model, **fam.model_inputs("gpt_neox", model))
    assert report.first_disagreement.name == "layers.1.attention"


def test_left_padding_rows_are_left_out_of_the_verdict_and_listed():
    model = fam.family_model("llama", seed=0)
    report = compare_transformers_model(model, **fam.model_inputs("llama", model, left_pad=True))
    assert report.ok, str(report)
    assert report.attention[0].excluded_rows == [(1, 0), (1, 1)]
    assert "left out of the verdict" in str(report)


def test_left_padding_in_one_layer_is_left_out_and_listed_not_a_mismatch():
    from attention_np.interop.transformers import family_cases as cases
    module, inputs = cases.case("llama")
    pad = np.ones((2, 6), dtype=np.int64)
    pad[1, :2] = 0
    r = itf.compare_transformers_attention(module, **{**inputs, "attention_mask": pad})
    assert r.ok, str(r)
    assert r.excluded_rows == [(1, 0), (1, 1)]


@pytest.mark.parametrize("name", ["llama", "bert", "cohere", "gpt_neox", "whisper", "qwen3", "t5"])
def test_the_attention_interface_diffs_every_kernel_call_without_family_code(name):
    from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
    model = fam.family_model(name, seed=1)
    report = compare_attention_kernels(model, **fam.model_inputs(name, model))
    assert report.ok and len(report.layers) == len(attention_layers(model)[0]), str(report)


def test_the_attention_interface_shows_sdpa_dropping_gpt_oss_sinks():
    from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
    model = fam.family_model("gpt_oss")
    inputs = fam.model_inputs("gpt_oss", model)
    eager = compare_attention_kernels(model, reference="eager", **inputs)
    assert eager.ok, str(eager)                      # gpt-oss's eager applies the sinks
    sdpa = compare_attention_kernels(model, **inputs)
    worst = sdpa.first_disagreement
    assert worst is not None and next(c for c in worst.checks if c.name == "dsinks").err > 1e-3


def test_the_attention_interface_diffs_gemma2_soft_cap_with_the_float64_eager():
    from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
    model = fam.family_model("gemma2")
    report = compare_attention_kernels(model, reference="attention_np_eager_float64",
                                       **fam.model_inputs("gemma2", model))
    assert report.ok and len(report.layers) == 2, str(report)


def test_diff_model_cli_runs_a_family_and_lists_the_known_ones_for_an_unknown(capsys):
    from attention_np.__main__ import main
    assert main(["diff", "--model", "phi"]) == 0
    assert "AGREE" in capsys.readouterr().out
    assert main(["diff", "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope' is not a known family" in err and "whisper" in err and "cohere" in err
    assert main(["diff", "--model", "deberta-v2"]) == 1
    assert "disentangled relative attention" in capsys.readouterr().out


def test_bad_model_or_inputs_are_named_before_any_work():
    from attention_np.interop.transformers.kernel_diff import compare_attention_kernels
    model = fam.family_model("llama")
    with pytest.raises(TypeError, match="model must be a transformers model"):
        compare_transformers_model("llama", input_ids=np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="no inputs"):
        compare_transformers_model(model)
    with pytest.raises(TypeError, match=r"LlamaModel.forward takes no \['input_idz'\]"):
        compare_transformers_model(model, input_idz=np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="reference must be one of .*got 'fast'"):
        compare_attention_kernels(model, reference="fast", input_ids=np.zeros((1, 3), np.int64))


# Families read by what they compute: QK-norm over all heads (OLMo 2), 2-D relative position bias
# tables (Data2VecVision with a class token, Swin per window with its shifted windows). Each agrees
# at float64 rounding, layer and model, and 1e-6 added to one layer's output is caught and named.

def _caught(model, inputs):
    """The whole model diffed with 1e-6 added to its first attention layer's output: AGREE means
    every other layer agrees (max error returned) and that layer differs by exactly the change."""
    from attention_np.interop.transformers import sweep as sw
    found = attention_layers(model)[0]
    verdict, err, why = sw.diff_model(model, inputs, found)
    assert verdict == "AGREE", why
    assert f"caught at {found[0][0]}" in why
    return err


def test_olmo2_qk_norm_over_all_heads_is_read_and_agrees_layer_and_model():
    model = fam.family_model("olmo2", seed=1)
    layers, refused = attention_layers(model)
    assert len(layers) == 2 and not refused
    spec = layers[0][2]
    assert (spec.attention.qk_norm, spec.attention.qk_norm_scope) == ("rms", "all")
    params = params_from_transformers(layers[0][1])[0]
    assert params["q_norm"].shape == (4 * 8,) and params["k_norm"].shape == (2 * 8,)
    r = itf.compare_transformers_attention(layers[0][1], R.standard_normal((2, 6, 32)), seed=3)
    assert r.ok and max(c.err for c in r.checks if c.rule == "float64") < 1e-12, str(r)
    assert _caught(model, fam.model_inputs("olmo2", model)) < 1e-12


def test_data2vec_vision_reads_its_bias_table_and_agrees_layer_and_model():
    model = fam.family_model("data2vec-vision", seed=1)
    layers, refused = attention_layers(model)
    assert len(layers) == 2 and not refused
    module, spec = layers[0][1], layers[0][2]
    assert spec.relative_bias == GridTable(4, 4, True) and spec.scale == 1 / np.sqrt(8)
    params = params_from_transformers(module)[0]
    assert params["bias_table"].shape == (7 * 7 + 3, 4) and "W_o" not in params
    for impl in ("sdpa", "eager"):                   # Data2VecVision's two classes
        layer = fam.family_model("data2vec-vision", seed=1, attn_implementation=impl)
        r = itf.compare_transformers_attention(attention_layers(layer)[0][0][1],
                                               R.standard_normal((2, 17, 32)), seed=3,
                                               attn_implementation=None)
        assert r.ok and "dbias_table" in [c.name for c in r.checks], str(r)
        assert max(c.err for c in r.checks) < 1e-12
    assert _caught(model, fam.model_inputs("data2vec-vision", model)) < 1e-12
    with pytest.raises(ValueError, match=r"hidden_states must be \(B, 17, d_model\)"):
        itf.compare_transformers_attention(module, R.standard_normal((2, 6, 32)))


def test_data2vec_vision_shared_table_agrees_in_the_model_and_the_layer_says_what_it_lacks():
    tf = require("transformers")
    kw = dict(fam.NEW["data2vec-vision"][1], use_relative_position_bias=False,
              use_shared_relative_position_bias=True)
    model = fam.randomize(tf.Data2VecVisionModel(tf.Data2VecVisionConfig(**kw)), 1)
    assert attention_layers(model)[0][0][2].relative_bias is None
    assert _caught(model, fam.model_inputs("data2vec-vision", model)) < 1e-12
    report = compare_transformers_model(model, **fam.model_inputs("data2vec-vision", model))
    assert report.ok and report.layers[0].name == "encoder.relative_position_bias (bias table)"
    assert report.layers[0].forward_error < 1e-12
    r = itf.compare_transformers_attention(model.encoder.layer[0].attention.attention,
                                           R.standard_normal((2, 17, 32)))
    assert any("shared relative position bias" in n for n in r.notes)


def test_data2vec_vision_at_another_resolution_is_refused_naming_the_interpolated_table():
    model = fam.family_model("data2vec-vision", seed=1)
    pixels = torch.from_numpy(R.standard_normal((1, 3, 24, 24)))
    report = compare_transformers_model(model, pixel_values=pixels, interpolate_pos_encoding=True)
    assert report.verdict == "INCOMPLETE" and not report.layers
    assert all("relative position bias table interpolated" in why for _, why in report.refused)


def test_swin_window_attention_agrees_with_its_table_and_shifted_window_mask():
    model = fam.family_model("swin", seed=1)
    layers, refused = attention_layers(model)
    assert len(layers) == 4 and not refused
    block = model.encoder.layers[0].blocks[1]              # the shifted one: 8x8, windows of 4x4
    spec = layer_spec(block.attention)
    assert spec.relative_bias == GridTable(4, 4, False) and block.shift_size == 2
    mask = block.get_attn_mask(8, 8, torch.float64, "cpu")           # (4 windows, 16, 16)
    x = R.standard_normal((2 * 4, 16, 16))                           # B = 2 images x 4 windows
    r = itf.compare_transformers_attention(block.attention, x, window_mask=mask, seed=3)
    assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    # the mask matters: it moves the layer's output (so agreeing with it is a real test)
    layer = copy.deepcopy(block.attention).double()
    with torch.no_grad():
        moved = layer(torch.from_numpy(x), mask)[0] - layer(torch.from_numpy(x))[0]
    assert moved.abs().max() > 1e-3
    assert itf.compare_transformers_attention(block.attention, x, seed=3).ok     # no mask
    assert _caught(model, fam.model_inputs("swin", model)) < 1e-12
    with pytest.raises(ValueError, match="one window; B counts the windows"):
        itf.compare_transformers_attention(block.attention, R.standard_normal((2, 6, 16)))
    with pytest.raises(ValueError, match=r"window_mask must be \(num_windows, N, N\)"):
        itf.compare_transformers_attention(block.attention, x[:6], window_mask=mask)
    with pytest.raises(ValueError, match="window_mask is Swin's shifted-window mask"):
        llama = fam.family_model("llama").layers[0].self_attn
        itf.compare_transformers_attention(llama, R.standard_normal((2, 6, 32)), window_mask=mask)


def test_zamba_attention_is_compared_and_its_mamba_layers_refused_by_name():
    """A hybrid model: its shared attention blocks agree (one alone too: its forward takes
    layer_idx), its Mamba state-space layers are listed as refused, by that name."""
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    model = tm.build("zamba")
    layers, refused = attention_layers(model)
    assert [n for n, *_ in layers] == ["layers.1.shared_transf.self_attn",
                                       "layers.2.shared_transf.self_attn"]
    assert [n for n, _ in refused] == ["layers.0.mamba", "layers.1.mamba_decoder.mamba",
                                       "layers.2.mamba_decoder.mamba"]
    assert all("ZambaMambaMixer: a state-space layer (Mamba's selective scan" in why
               for _, why in refused)
    r = itf.compare_transformers_attention(layers[0][1], R.standard_normal((2, 6, 64)), seed=3)
    assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.verdict == "INCOMPLETE" and len(report.attention) == 2
    assert all(r.ok for r in report.layers) and len(report.refused) == 3
    row = sw.sweep_one("zamba")          # the change caught at the first attention layer
    assert row.verdict == "refused" and "state-space layer" in row.reason and row.max_error < 1e-12
    with pytest.raises(UnsupportedLayer, match="is not an attention layer"):
        layer_spec(model.layers[0].mamba)


def test_beit_tables_outside_its_attention_layers_are_rows_of_their_own():
    """BEiT computes each layer's bias in its BeitLayer and passes it as the attention mask: the
    bias is compared with ours from the table read before the run (a row per table), the layer
    on the mask it got; at another image size the interpolated table is refused by name."""
    model = fam.family_model("beit", seed=1)
    inputs = fam.model_inputs("beit", model)
    report = compare_transformers_model(model, **inputs)
    assert report.ok, str(report)
    assert [r.name for r in report.layers if r.kind == "bias table"] == [
        "layers.0.relative_position_bias (bias table)",
        "layers.1.relative_position_bias (bias table)"]
    assert max(r.forward_error for r in report.layers) < 1e-12
    assert _caught(model, inputs) < 1e-12
    pixels = torch.from_numpy(R.standard_normal((1, 3, 24, 24)))
    report = compare_transformers_model(model, pixel_values=pixels, interpolate_pos_encoding=True)
    assert report.verdict == "INCOMPLETE"
    assert any("bias table interpolated (bilinear)" in why for _, why in report.refused)


@pytest.mark.parametrize("config, model", [("DonutSwinConfig", "DonutSwinModel"),
                                           ("MaskFormerSwinConfig", "MaskFormerSwinModel")])
def test_swin_copies_whose_layers_hold_the_table_agree(config, model):
    """Donut-Swin and MaskFormer-Swin keep Swin's older self-attention: the table is the layer's
    own parameter (not a relative_position_bias module); read and gathered the same way."""
    tf = require("transformers")
    cfg = getattr(tf, config)(**fam.NEW["swin"][1])
    swin = fam.randomize(getattr(tf, model)(cfg), 1)
    layers, refused = attention_layers(swin)
    assert len(layers) == 4 and not refused
    assert all(spec.relative_bias == GridTable(4, 4, False) for *_, spec in layers)
    assert swin.encoder.layers[0].blocks[1].shift_size == 2
    assert "bias_table" in params_from_transformers(layers[1][1])[0]
    assert _caught(swin, fam.model_inputs("swin", swin)) < 1e-12


# The sweep's seven errors and the refusals that blamed the scale: each family agrees (a 1e-6
# change caught) or is refused by the algorithm it computes, never by the scale check it
# would trip over.

def _idefics():
    from attention_np.interop.transformers import tiny_models as tm
    model = tm.build("idefics")
    cfg = model.config
    ids = torch.from_numpy(np.random.default_rng(0).integers(3, 99, (2, 6)))
    pixels = torch.from_numpy(R.standard_normal((2, 1, 3, cfg.vision_config.image_size,
                                                 cfg.vision_config.image_size)))
    return model, {"input_ids": ids, "pixel_values": pixels,
                   "image_attention_mask": torch.ones((2, 6, 1), dtype=torch.long)}


def test_idefics_rope_turned_inside_the_layer_agrees_and_a_changed_frequency_is_named():
    """IDEFICS's layer runs its own rotary_emb on the position_ids it is passed (no
    position_embeddings): read as RoPE, its inv_freq checked against ours, layer and model."""
    from attention_np.interop.transformers import sweep as sw
    model, inputs = _idefics()
    layer = model.layers[0].self_attn
    spec = layer_spec(layer)
    assert spec.rope_inputs.in_layer
    assert spec.attention.rope.theta == model.config.rope_parameters["rope_theta"]
    assert layer_spec(model.gated_cross_attn_layers[0].cross_attn).attention.rope is None
    x = R.standard_normal((2, 6, 32))
    r = itf.compare_transformers_attention(layer, x, position_ids=np.arange(2, 8), seed=3)
    assert r.ok and max(c.err for c in r.checks if c.rule == "float64") < 1e-12, str(r)
    assert "inv_freq 0 rel" in [c.name for c in r.checks]
    verdict, err, why = sw.diff_layers([("layers.0.self_attn", layer, spec)])
    assert verdict == "AGREE" and "+1e-06 caught" in why
    report = compare_transformers_model(model, **inputs)
    assert report.ok and "layers.0.self_attn.rotary_emb (cos, sin)" in [
        row.name for row in report.layers], str(report)
    assert max(row.forward_error for row in report.attention) < 1e-12
    with torch.no_grad():                                  # a porting bug: its frequencies
        model.layers[0].self_attn.rotary_emb.inv_freq.mul_(1.01)
    report = compare_transformers_model(model, **inputs)
    assert report.first_disagreement.name == "layers.0.self_attn.rotary_emb (cos, sin)"
    changed = copy.deepcopy(layer)
    with torch.no_grad():
        changed.rotary_emb.inv_freq.mul_(1.01)
    r = itf.compare_transformers_attention(changed, x, seed=3)
    assert [c.name for c in r.checks if not c.ok] == ["inv_freq 0 rel"]
    layer.qk_layer_norms = True
    with pytest.raises(UnsupportedLayer, match="a QK-norm after RoPE"):
        layer_spec(layer)


# (model type, the class refused, the algorithm named): each built by the sweep's tiny config
OTHER_ALGORITHMS = {
    "fun_asr_nano_encoder": ("FunAsrNanoAttention", "an FSMN memory block"),
    "t5gemma2": ("T5Gemma2MergedAttention", "merged self- and cross-attention"),
    "videoprism": ("VideoPrismMultiheadAttentionPoolingHead", "attention pooling"),
    "timesfm": ("TimesFmAttention", "a learned scale per query feature"),
    "gemma3n_audio": ("Gemma3nAudioAttention", "chunked local attention with relative position"),
    "nystromformer": ("NystromformerSelfAttention", "Nystrom approximate attention"),
    "vjepa2": ("VJEPA2RopeAttention", "3-D RoPE (V-JEPA 2"),
    "vits": ("VitsAttention", "relative position representations of keys and values"),
    "autoformer": ("AutoformerAttention", "the auto-correlation mechanism (Autoformer"),
    "yoso": ("YosoSelfAttention", "YOSO attention"),
    "mra": ("MraSelfAttention", "multi-resolution approximate attention"),
    "minimax": ("MiniMaxLightningAttention", "lightning attention"),
    "longt5": ("LongT5LocalAttention", "block-local attention (LongT5"),
    "convbert": ("ConvBertSelfAttention", "span-based dynamic convolution"),
    "aria": ("AriaCrossAttention", "in front of torch's nn.MultiheadAttention"),
    "bros": ("BrosSelfAttention", "bounding-box position scores"),
    "lilt": ("LiltSelfAttention", "two coupled attention streams"),
    "ibert": ("IBertSelfAttention", "integer-only quantized attention"),
    "canine": ("CanineSelfAttention", "from_tensor, to_tensor"),
    "roformer": ("RoFormerSelfAttention", "RoFormer's rotary embedding"),
    "wav2vec2-bert": ("Wav2Vec2BertSelfAttention", "a distance embedding"),
    "moonshine": ("MoonshineAttention", "an odd rotated width of 3 features"),
    "xlstm": ("xLSTMLayer", "an mLSTM layer"),
    "prophetnet": ("ProphetNetNgramSelfAttention", "n-gram self-attention"),
    "lxmert": ("LxmertAttention", "attention over a context passed as a second input"),
    "idefics2": ("Idefics2PerceiverAttention", "Perceiver resampler attention"),
    "mpnet": ("MPNetSelfAttention", "a relative position bias computed outside the layer"),
}


@pytest.mark.parametrize("model_type", sorted(OTHER_ALGORITHMS))
def test_another_algorithm_is_refused_by_its_name_not_by_the_scale(model_type):
    from attention_np.interop.transformers import tiny_models as tm
    cls, what = OTHER_ALGORITHMS[model_type]
    refused = attention_layers(tm.build(model_type))[1]
    reasons = [why for _, why in refused if why.startswith(cls + ":")]
    assert reasons and all(what in why for why in reasons), refused
    assert not any("scale" in why and "not readable" in why for _, why in refused)


@pytest.mark.parametrize("model_type", ["nemotron3_diarization_audio",
                                        "nemotron3_5_transcribe_asr_audio"])
def test_nemotron3_audio_agrees_and_values_wider_than_the_keys_are_refused(model_type):
    """Its v_proj is num_attention_heads wide whatever num_key_value_heads says: with fewer
    key/value heads the keys are grouped and the values not (eager cannot run it); the
    family's own config (the two equal) agrees, the 1e-6 change caught."""
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    row = sw.sweep_one(model_type)
    assert row.verdict == "AGREE" and "+1e-06 caught" in row.reason, row
    tf = require("transformers")
    cfg = tm.tiny_config(model_type)
    cfg.num_key_value_heads = 2
    model = fam.randomize(tf.AutoModel.from_config(cfg), 1)
    refused = attention_layers(model)[1]
    assert refused and all("keys of 2 heads beside values of 4 heads" in why
                           for _, why in refused)


@pytest.mark.parametrize("model_type", ["tapas", "vilt", "mobilevit", "rembert"])
def test_a_score_scale_inline_in_the_forward_is_read_and_a_wrong_one_is_caught(
        model_type, monkeypatch):
    """BERT's older copies divide their scores by math.sqrt(self.attention_head_size) in their
    forward: read as 1/sqrt(d); they agree (MobileViT's layer returns its output alone), the
    1e-6 change caught; a scale read 1 % off is a MISMATCH of the layer."""
    from attention_np.interop.transformers import layer_reading as lr
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    row = sw.sweep_one(model_type)
    assert row.verdict == "AGREE" and "+1e-06 caught" in row.reason, row
    layers = attention_layers(tm.build(model_type))[0]
    name, module, spec = layers[0]
    assert spec.scale == 1 / np.sqrt(module.attention_head_size)
    d_model = params_from_transformers(module)[0]["W_q"].shape[0]
    x = R.standard_normal((2, 6, d_model))
    assert itf.compare_transformers_attention(module, x).ok
    read = lr.score_scale
    monkeypatch.setattr(lr, "score_scale", lambda m, d: 1.01 * read(m, d))
    r = itf.compare_transformers_attention(module, x)
    assert not r.ok and "out" in [c.name for c in r.checks if not c.ok]


def test_data2vec_vision_without_a_bias_table_reads_its_inline_scale_and_agrees():
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    tf = require("transformers")
    for impl in ("sdpa", "eager"):                   # its two classes, two forms of the scale
        cfg = tm.tiny_config("data2vec-vision")
        cfg.use_relative_position_bias = False
        model = fam.randomize(tf.AutoModel.from_config(cfg, attn_implementation=impl), 1)
        found, refused = attention_layers(model)
        assert found and not refused
        assert found[0][2].relative_bias is None and found[0][2].scale == 1 / np.sqrt(8)
        verdict, err, why = sw.diff_layers(found)
        assert verdict == "AGREE" and err < 1e-12, why


def test_prophetnet_encoder_attention_is_read_and_agrees_beside_its_refused_ngram_decoder():
    """ProphetNet names its heads num_attn_heads and scales q by 1/sqrt(head_dim) in its
    forward: its encoder and cross attention are read and agree (the 1e-6 change caught); its
    decoder's n-gram self-attention is refused by that name."""
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    found = attention_layers(tm.build("prophetnet"))[0]
    kinds = {type(m).__name__ for _, m, _ in found}
    assert kinds == {"ProphetNetAttention"}
    assert all(spec.scale == spec.head_dim ** -0.5 and spec.num_heads * spec.head_dim == 32
               for *_, spec in found)                  # (16 heads of 2: its config's names)
    verdict, err, why = sw.diff_layers([f for f in found if f[0].startswith("encoder.")])
    assert verdict == "AGREE" and err < 1e-12, why
@pytest.mark.parametrize("family, layer", [
    ("blip-2", "Blip2Attention"), ("instructblip", "InstructBlipAttention"),
    ("timesformer", "TimesformerSelfAttention"), ("mgp-str", "MgpstrAttention")])
def test_a_fused_qkv_linear_is_read_as_q_k_v_columns_and_agrees_with_the_change_caught(
        family, layer):
    """Before: refused as 'no q, k, v projections'. One ``qkv`` Linear that the forward splits
    ``reshape(B, L, 3, h, d)`` ([q | k | v], TimeSformer and MGP-STR without a head_dim
    attribute), the output projection ``proj`` / ``projection`` (BLIP-2's bias: q_bias, a
    k part, v_bias, one parameter)."""
    from attention_np.interop.transformers import sweep as sw
    row = sw.sweep_one(family)
    assert row.verdict == "AGREE" and layer in row.reason and "+1e-06 caught" in row.reason, row
    assert row.max_error < 1e-12


def test_fused_qkv_columns_read_wrong_are_the_layers_mismatch(monkeypatch):
    """Ours changed instead (k and v columns of BLIP-2's qkv swapped): dW_k and dW_v disagree."""
    from attention_np.interop.transformers import layer_reading
    from attention_np.interop.transformers import tiny_models as tm
    module = tm.build("blip-2").vision_model.encoder.layers[0].self_attn
    x = R.standard_normal((2, 5, 32))
    assert itf.compare_transformers_attention(module, x).ok
    read = layer_reading.qkv_columns

    def swapped(*a, **k):
        cols = read(*a, **k)
        return {**cols, "k": cols["v"], "v": cols["k"]}
    monkeypatch.setattr(layer_reading, "qkv_columns", swapped)
    r = itf.compare_transformers_attention(module, x)
    assert not r.ok and {"out", "dW_k", "dW_v"} <= {c.name for c in r.checks if not c.ok}, str(r)


def _siglip_head():
    from attention_np.interop.transformers import tiny_models as tm
    model = tm.build("siglip_vision_model")
    return model, torch.from_numpy(R.standard_normal((2, 3, 32, 32)))


def test_torch_multihead_attention_pooling_head_agrees_as_self_and_probe_cross_attention():
    """Before: SigLIP's (Gemma 3's, LFM2-VL's, DeepSeek-VL's) pooling head, a
    ``torch.nn.MultiheadAttention`` (in_proj_weight fused [q | k | v], scale 1/sqrt(head_dim)
    as torch computes it), refused as 'no q, k, v projections'. Read: alone as self-attention,
    as the head calls it (a learned probe query over the hidden states: cross-attention), and
    in the whole model, the head's row among the encoder's."""
    from attention_np.interop.transformers import sweep as sw
    model, pixels = _siglip_head()
    attn = model.head.attention
    spec = layer_spec(attn)
    assert (spec.num_heads, spec.head_dim, spec.scale, spec.is_causal) == (4, 8, 8 ** -0.5,
                                                                             False)
    x = R.standard_normal((2, 17, 32))
    probe = model.head.probe.detach().numpy().astype(np.float64).repeat(2, axis=0)  # (2, 1, 32)
    for r in (itf.compare_transformers_attention(attn, x),
              itf.compare_transformers_attention(attn, probe, key_value_states=x)):
        assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    assert "dkey_value" in [c.name for c in r.checks]
    report = compare_transformers_model(model, pixel_values=pixels)
    assert report.ok and [r.name for r in report.attention][-1] == "head.attention", str(report)
    row = sw.sweep_one("siglip_vision_model")
    assert row.verdict == "AGREE" and "MultiheadAttention" in row.reason, row


def test_a_changed_multihead_attention_scale_is_the_heads_mismatch(monkeypatch):
    """Ours changed (the head's scale read 1% too large): the head alone disagrees."""
    from attention_np.interop.transformers import layer_reading
    model, pixels = _siglip_head()
    read = layer_reading.score_scale
    monkeypatch.setattr(layer_reading, "score_scale", lambda m, d: read(m, d) * (
        1.01 if type(m).__name__ == "MultiheadAttention" else 1.0))
    report = compare_transformers_model(model, pixel_values=pixels)
    assert report.verdict == "MISMATCH" and report.first_disagreement.name == "head.attention", \
        str(report)


def test_multihead_attention_options_beyond_the_spec_are_refused_by_name():
    nn = torch.nn
    with pytest.raises(UnsupportedLayer, match=r"time-first inputs \(L, B, E\)"):
        layer_spec(nn.MultiheadAttention(8, 2))
    with pytest.raises(UnsupportedLayer, match="add_bias_kv"):
        layer_spec(nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True))
    with pytest.raises(UnsupportedLayer, match="add_zero_attn"):
        layer_spec(nn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True))
    with pytest.raises(UnsupportedLayer, match="kdim or vdim"):
        layer_spec(nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True))


def test_multihead_attention_called_with_key_apart_from_value_is_refused_in_the_model():
    """A call whose key and value are two tensors (not one sequence) is refused by name in the
    whole-model diff, not replayed as something else."""
    model, pixels = _siglip_head()

    def other_value(module, args):                     # the head: attention(probe, h, 2 h)
        return args[0], args[1], 2 * args[2]
    model.head.attention.register_forward_pre_hook(other_value)
    report = compare_transformers_model(model, pixel_values=pixels)
    assert report.verdict == "INCOMPLETE" and report.refused[0][0] == "head.attention"
    assert "keys and values from two different inputs" in report.refused[0][1], str(report)


def test_ctrl_attention_taking_v_k_q_agrees_and_a_changed_scale_is_its_mismatch():
    """Before: refused as 'no q, k, v projections' (Wq, Wk, Wv; forward(v, k, q), each the
    same normed hidden states). The whole model agrees with the change caught; q scaled by
    1.01 inside the first layer is that layer's mismatch."""
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    row = sw.sweep_one("ctrl")
    assert row.verdict == "AGREE" and "caught at h.0.multi_head_attention" in row.reason, row
    model = tm.build("ctrl")
    r = itf.compare_transformers_attention(model.h[0].multi_head_attention,
                                           R.standard_normal((2, 6, 32)))
    assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    model.h[0].multi_head_attention.Wq.register_forward_hook(lambda m, a, out: out * 1.01)
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.first_disagreement.name == "h.0.multi_head_attention", str(report)


def test_gpt1_fused_conv1d_its_bool_scale_and_float_causal_buffer_agree(monkeypatch):
    """Before: OpenAI GPT refused as 'a fused q/k/v projection without a readable head_dim'.
    Read: c_attn split ``x.split(split_size, dim=2)`` ([q | k | v], head_dim split_size / h),
    the scale from ``Attention(scale=True/False)`` (``w / math.sqrt(v.size(-1))`` or none), the
    causal mask from its float ``bias`` buffer (``w * b - 1e4 * (1 - b)``). The whole model agrees
    with the change caught; its layer returns a list, not a tuple. Ours changed (the causal mask
    dropped) is the first layer's mismatch."""
    from transformers.models.openai.modeling_openai import Attention

    from attention_np.interop.transformers import layer_reading
    from attention_np.interop.transformers import sweep as sw
    from attention_np.interop.transformers import tiny_models as tm
    row = sw.sweep_one("openai-gpt")
    assert row.verdict == "AGREE" and "caught at h.0.attn" in row.reason, row
    model = tm.build("openai-gpt")
    spec = layer_spec(model.h[0].attn)
    assert (spec.head_dim, spec.scale, spec.is_causal) == (8, 8 ** -0.5, True)
    unscaled = fam.randomize(Attention(32, 16, model.config, scale=False), 1)
    assert layer_spec(unscaled).scale == 1.0
    r = itf.compare_transformers_attention(unscaled, R.standard_normal((2, 6, 32)))
    assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    monkeypatch.setattr(layer_reading, "tril_weights", lambda m: False)
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.first_disagreement.name == "h.0.attn", str(report)
# Vision towers the sweep called MISMATCH, each for its own reason (the reader's, not theirs):
# InternVL's and Qianfan-OCR's W^O is their projection_layer, Kosmos-2.5's its output (both read
# as a layer without W^O before); Kosmos-2.5's attention is always its family's eager (a float32
# softmax whatever attn_implementation says); Mllama's has no is_causal attribute, which
# transformers' sdpa takes for True when no mask is passed (its model always passes one).

def _tower(model_type: str, **changes):
    """A tiny random vision tower of ``model_type``'s sweep config (``changes`` on it)."""
    import importlib

    from attention_np.interop.transformers import tiny_models as tm
    cfg = tm.tiny_config(model_type)
    cfg = getattr(cfg, "vision_config", None) or cfg
    for k, v in changes.items():
        setattr(cfg, k, v)
    modeling = importlib.import_module(type(cfg).__module__.replace(".configuration_",
                                                                    ".modeling_"))
    return fam.randomize(getattr(modeling, type(cfg).__name__.replace("Config", "Model"))(cfg), 1)


def _tower_inputs(model) -> dict:
    cfg = model.config
    if "Kosmos2_5" in type(model).__name__ or "Pix2Struct" in type(model).__name__:
        # (row, column, patch pixels) of 3x3 patches, the last two of the second padding
        patches = R.standard_normal((2, 9, 2 + cfg.patch_embed_hidden_size))
        patches[:, :, :2] = np.stack(np.divmod(np.arange(9), 3), -1) + 1
        patches[1, -2:] = 0.0
        return {"flattened_patches": patches, "attention_mask": (patches.sum(-1) != 0) * 1.0}
    if "Mllama" in type(model).__name__:       # 2 of the 4 tiles of one image
        return {"pixel_values": R.standard_normal((1, 1, 4, 3, 32, 32)),
                "aspect_ratio_ids": torch.tensor([[1]]),
                "aspect_ratio_mask": torch.tensor([[[1, 1, 0, 0]]])}
    return {"pixel_values": R.standard_normal((2, 3, 32, 32))}


SMALL_IMAGE = dict(image_size=[32, 32], patch_size=[8, 8])
OUTPUT_NAMED = {             # the tower, its first attention layer, the name of its W^O
    "internvl_vision": (SMALL_IMAGE, "encoder.layer.0.attention", "projection_layer"),
    "qianfan_ocr_vision": (SMALL_IMAGE, "layers.0.attention", "projection_layer"),
    "kosmos-2.5": (dict(patch_embed_hidden_size=12), "encoder.layer.0.attention", "output"),
    # not in the sweep (no AutoModel class): Pix2Struct's vision tower, Kosmos-2.5's original
    "pix2struct": (dict(patch_embed_hidden_size=12), "encoder.layer.0.attention", "output"),
}


@pytest.mark.parametrize("model_type", sorted(OUTPUT_NAMED))
def test_a_towers_w_o_under_another_name_is_read_and_agrees_layer_and_model(model_type,
                                                                           monkeypatch):
    changes, name, o_name = OUTPUT_NAMED[model_type]
    model = _tower(model_type, **changes)
    layer = model.get_submodule(name)
    params, spec = params_from_transformers(layer)
    assert "W_o" in params and not spec.is_causal
    np.testing.assert_array_equal(params["W_o"], getattr(layer, o_name).weight.detach().numpy().T)
    r = itf.compare_transformers_attention(layer, R.standard_normal((2, 6, 32)), seed=3)
    assert r.ok and "dW_o" in [c.name for c in r.checks], str(r)
    assert next(c.err for c in r.checks if c.name == "out") < 1e-12   # (Pix2Struct: unscaled
    inputs = _tower_inputs(model)                    # scores, its gradients up to 1e-12 off)
    assert _caught(model, inputs) < 1e-12               # + 1e-6 on the first layer: caught
    # the model's W^O changed after ours was read: that layer's disagreement, by name
    def corrupt(module, args):                          # (module: the diff's float64 copy)
        with torch.no_grad():
            module.get_submodule(o_name).weight[0, 0] += 1e-3
    handle = layer.register_forward_pre_hook(corrupt)
    report = compare_transformers_model(model, **inputs)
    handle.remove()
    assert report.verdict == "MISMATCH" and report.first_disagreement.name == name, str(report)
    # the name unknown again: refused, naming it (never compared without its W^O, a MISMATCH)
    from attention_np.interop.transformers import weights
    monkeypatch.setitem(weights.NAMES, "o", tuple(n for n in weights.NAMES["o"] if n != o_name))
    with pytest.raises(UnsupportedLayer, match=rf"names the reader does not know, \['{o_name}'\]"):
        layer_spec(layer)


def test_internvl_qk_norm_over_the_whole_width_is_read_and_agrees():
    """InternVL's optional QK-norm (use_qk_norm) is an RMSNorm over all heads' features, before
    the split (as OLMo 2's): read as qk_norm_scope="all"; off in its default config, it was not
    what made the sweep's row a MISMATCH (its W^O was)."""
    model = _tower("internvl_vision", use_qk_norm=True, **SMALL_IMAGE)
    layer = model.encoder.layer[0].attention
    params, spec = params_from_transformers(layer)
    assert (spec.attention.qk_norm, spec.attention.qk_norm_scope, spec.attention.qk_norm_eps) == \
        ("rms", "all", 1e-6)
    assert params["q_norm"].shape == params["k_norm"].shape == (32,)
    r = itf.compare_transformers_attention(layer, R.standard_normal((2, 6, 32)), seed=3)
    assert r.ok and {"dq_norm", "dk_norm"} <= {c.name for c in r.checks}, str(r)
    assert max(c.err for c in r.checks) < 1e-12
    inputs = _tower_inputs(model)
    assert _caught(model, inputs) < 1e-12

    def corrupt(module, args):                          # after our copy of the norm was read
        with torch.no_grad():
            module.k_norm.weight[0] += 1e-3
    layer.register_forward_pre_hook(corrupt)
    report = compare_transformers_model(model, **inputs)
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "encoder.layer.0.attention", str(report)


def test_kosmos_2_5_vision_attention_runs_its_float32_eager_whatever_the_implementation():
    from attention_np.interop.transformers import recent
    model = _tower("kosmos-2.5", patch_embed_hidden_size=12)
    layer = model.encoder.layer[0].attention
    assert recent.own_eager_only(layer)
    assert not recent.own_eager_only(fam.family_model("llama").layers[0].self_attn)
    x = R.standard_normal((2, 6, 32))
    for impl in ("sdpa", "eager"):
        r = itf.compare_transformers_attention(layer, x, seed=3, attn_implementation=impl)
        assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
        assert any("runs its family's eager attention whatever" in n for n in r.notes)
    # run as the interface says, its softmax stays float32: a MISMATCH at float32 rounding
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(itf, "scores_in_own_method", lambda layer: False)
        r = itf.compare_transformers_attention(layer, x, seed=3)
    out = next(c for c in r.checks if c.name == "out")
    assert not r.ok and 1e-9 < out.err < 1e-5, str(r)


def test_mllama_vision_attention_without_is_causal_is_bidirectional_as_in_its_model():
    from attention_np.interop.transformers import model_diff
    model = _tower("mllama", intermediate_layers_indices=[0, 1], num_global_layers=1)
    layer = model.transformer.layers[0].self_attn
    assert not hasattr(layer, "is_causal") and not layer_spec(layer).is_causal
    x = R.standard_normal((2, 6, 32))
    # the trap: alone, without a mask, transformers' sdpa takes the absent is_causal for True
    copy64 = copy.deepcopy(layer).double()
    xt = torch.from_numpy(x)
    with torch.no_grad():
        alone = copy64(xt)[0]
        with_mask = copy64(xt, attention_mask=torch.zeros((2, 1, 6, 6), dtype=torch.float64))[0]
    assert (alone - with_mask).abs().max() > 1e-2
    r = itf.compare_transformers_attention(layer, x, seed=3)
    assert r.ok and max(c.err for c in r.checks) < 1e-12, str(r)
    # in its model (the aspect-ratio mask passed to every layer): every layer agrees, 1e-6 caught
    inputs = _tower_inputs(model)
    assert _caught(model, inputs) < 1e-12
    # our reading made causal: the first layer's disagreement, by name
    read = model_diff.layer_spec

    def causal(module):
        spec = read(module)
        return replace(spec, is_causal=True) if type(module).__name__ == \
            "MllamaVisionAttention" else spec
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(model_diff, "layer_spec", causal)
        report = compare_transformers_model(model, **inputs)
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "transformer.layers.0.self_attn", str(report)


def test_layers_with_projections_the_reader_does_not_read_are_refused_by_what_they_add():
    """Aria's cross attention (a torch MultiheadAttention after its q, k, v projections),
    ConvBERT's mixed attention, LiLT's layout stream: refused by that name (before the scale
    they would otherwise trip over), never read as a layer without W^O."""
    from attention_np.interop.transformers import tiny_models as tm
    for model_type, name, what in (
            ("aria", "multi_modal_projector.cross_attn", "nn.MultiheadAttention"),
            ("convbert", "encoder.layer.0.attention.self", "mixed attention"),
            ("lilt", "encoder.layer.0.attention.self", "two coupled attention streams (LiLT")):
        model = tm.build(model_type)
        with pytest.raises(UnsupportedLayer, match=re.escape(what)):
            layer_spec(model.get_submodule(name))
