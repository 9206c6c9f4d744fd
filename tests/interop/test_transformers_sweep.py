"""The sweep (interop/transformers/sweep.py): a tiny random model of every model class of the
installed transformers, each AGREE with a 1e-6 change caught and named, or refused by name; its
table in docs/transformers_sweep.md and its counts in the README held to a fresh run, and those
of the cached sweep (each decoder continuing from a filled cache: docs/transformers_sweep_cached.md); and the
corruptions an engineer ports wrong (RoPE frequency, attention factor, scale, bias table), each
a named disagreement."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import sweep as sw  # noqa: E402
from attention_np.interop.transformers import tiny_models as tm  # noqa: E402
from attention_np.interop.transformers.model_diff import compare_transformers_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "transformers_sweep.md"
CACHED_DOC = ROOT / "docs" / "transformers_sweep_cached.md"


SWEEP = pytest.mark.skipif(
    os.environ.get("ATTENTION_NP_SWEEP") != "1",
    reason="the sweep builds a tiny model of every transformers model class (about 7 minutes of "
           "CPU, and 3 more for the cached sweep, one worker process per core; CI runs it after "
           "the default run, which leaves it out, docs/transformers_sweep.md, "
           "docs/transformers_sweep_cached.md): "
           "ATTENTION_NP_SWEEP=1 python -m pytest -m sweep tests/interop/test_transformers_sweep.py")


@pytest.fixture(scope="module")
def rows():
    """One sweep for every test here (each model built once)."""
    return sw.sweep()


@pytest.mark.sweep
@SWEEP
def test_every_model_class_is_in_the_sweep_once(rows):
    assert [r.family for r in rows] == sw.model_types()


@pytest.mark.sweep
@SWEEP
def test_each_row_agrees_with_the_change_caught_or_says_why(rows):
    for r in rows:
        if r.verdict == "AGREE":
            # max_error is NaN when every call is of the changed layer (ALBERT shares one); it
            # must sit well below the 1e-6 change for "caught" to mean something (float64 rounding,
            # or a model's float32 rotary angles: glmasr_encoder 2e-08)
            assert "+1e-06 caught" in r.reason and not r.max_error >= 1e-7, r
        elif r.verdict in ("refused", "skipped"):
            assert len(r.reason) > 20, r             # a feature or a build error, named
    # the commonest families, read by what they compute, all agree
    agree = {r.family for r in rows if r.verdict == "AGREE"}
    assert {"bert", "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "phi", "t5", "bart",
            "vit", "gpt_neox", "olmo", "granite", "mixtral", "whisper"} <= agree


@pytest.mark.sweep
@SWEEP
def test_the_false_verdicts_are_the_ones_the_docs_list_as_open(rows):
    """A MISMATCH, an uncaught change or an error is a bug of the reader; the table lists each
    as open. A new one fails here (the table would have to be regenerated to hide it)."""
    listed = {(f, v) for f, _, v, _ in sw.read_table(DOC.read_text())
              if v in ("MISMATCH", "not caught", "error")}
    assert {(r.family, r.verdict) for r in rows if r.false_verdict} <= listed


@pytest.mark.sweep
@SWEEP
def test_the_docs_table_is_this_sweep(rows):
    table = sw.read_table(DOC.read_text())
    assert [(f, m, v) for f, m, v, _ in table] == [(r.family, r.model, r.verdict) for r in rows]
    for (_, _, v, reason), r in zip(table, rows, strict=True):
        if v == "refused":                        # the feature named, word for word
            assert reason == r.reason.replace("\n", " "), (reason, r.reason)
    assert f"**{sw.counts_line(rows)}.**" in DOC.read_text()


@pytest.fixture(scope="module")
def cached_rows():
    """One cached sweep (every model class, each decoder continuing from a filled cache)."""
    return sw.sweep(cached=True)


@pytest.mark.sweep
@SWEEP
def test_each_cached_row_agrees_from_its_cache_or_says_why(cached_rows):
    """The cached mode on every model class: each decoder's prompt, then 2 tokens on its cache;
    an AGREE has every call and cache row agreeing and the change caught at both calls of the
    changed layer; a skip says why there is no cached mode, a refusal names the feature or
    the cache kind."""
    assert [r.family for r in cached_rows] == sw.model_types()
    for r in cached_rows:
        if r.verdict == "AGREE":
            assert "tokens on its cache" in r.reason and not r.max_error >= 1e-7, r
            assert "#1" in r.reason.split("caught at")[1], r
        elif r.verdict == "skipped":
            assert r.reason.startswith(("tiny model not built: ", "no cached mode: ")), r
            assert len(r.reason) > 30, r
        elif r.verdict == "refused":
            assert len(r.reason) > 20, r
    # one decoder of each kind of position, attention and cache layer: all agree
    agree = {r.family for r in cached_rows if r.verdict == "AGREE"}
    assert {"llama", "mistral", "gpt2", "gemma2", "gemma3_text", "qwen2", "qwen3", "olmo2",
            "gpt_oss", "phi", "gpt_neox", "gptj", "cohere", "falcon", "bloom", "moshi",
            "llava"} <= agree


@pytest.mark.sweep
@SWEEP
def test_the_cached_false_verdicts_are_the_ones_its_docs_list_as_open(cached_rows):
    listed = {(f, v) for f, _, v, _ in sw.read_table(CACHED_DOC.read_text())
              if v in ("MISMATCH", "not caught", "error")}
    assert {(r.family, r.verdict) for r in cached_rows if r.false_verdict} <= listed


@pytest.mark.sweep
@SWEEP
def test_the_cached_docs_table_is_this_sweep(cached_rows):
    table = sw.read_table(CACHED_DOC.read_text())
    assert [(f, m, v) for f, m, v, _ in table] == \
        [(r.family, r.model, r.verdict) for r in cached_rows]
    for (_, _, v, reason), r in zip(table, cached_rows, strict=True):
        if v in ("refused", "skipped"):           # the feature or the reason, word for word
            assert reason == r.reason.replace("\n", " ").strip(), (reason, r.reason)
    assert f"**{sw.counts_line(cached_rows, cached=True)}.**" in CACHED_DOC.read_text()


def test_the_readme_cached_counts_are_the_cached_docs_table():
    table = sw.read_table(CACHED_DOC.read_text())
    line = sw.counts_line([sw.SweepRow(f, m, v) for f, m, v, _ in table], cached=True)
    assert line in " ".join((ROOT / "README.md").read_text().split()), line
    assert "(transformers_sweep_cached.md)" in DOC.read_text()


@pytest.mark.parametrize("family, layer", [
    ("llava", "language_model.layers.0.self_attn"),       # use_cache through **kwargs: before,
    ("internvl", "language_model.layers.0.self_attn"),    # skipped ("forward takes no cache")
    ("moshi", "layers.0.self_attn"),    # its own rotary embedding: before, refused by that
])
def test_decoders_of_the_kinds_once_skipped_or_refused_agree_continuing_from_their_cache(
        family, layer):
    row = sw.sweep_one(family, cached=True)
    assert row.verdict == "AGREE", row
    assert f"caught at {layer}, {layer}#1" in row.reason and "2 cache rows" in row.reason, row


def test_a_cache_corrupted_in_the_prompt_of_a_layer_with_its_own_rotary_embedding_is_caught():
    """Moshi's layers turn their keys with their own rotary embedding: the cached keys are
    recomputed with the cos and sin it returned, so keys off by 1e-6 in the prompt's call are
    that layer's cache row's MISMATCH, and no other row's."""
    model = tm.build("moshi")
    prompt, rest = sw.split_prompt(sw.text_inputs(model))
    calls = []

    def corrupt(mod, args, output):
        calls.append(1)
        return output + sw.CHANGE if len(calls) == 1 else output       # the prompt's call only
    model.layers[0].self_attn.k_proj.register_forward_hook(corrupt)
    report = compare_transformers_model(model, prompt=prompt, **rest)
    assert [r.name for r in report.layers if not r.ok] == ["layers.0.self_attn#1 (cache)"], \
        str(report)


@pytest.mark.parametrize("family, verdict, why", [
    ("bert", "skipped", "no cached mode: an encoder (BertConfig.is_decoder=False): BertModel "
                        "returned no cache for the prompt"),
    ("recurrent_gemma", "skipped", "no cached mode: RecurrentGemmaModel's output "
                                   "(BaseModelOutput) has no cache field"),
    ("albert", "skipped", "no cached mode: AlbertModel.forward takes no cache"),
    ("vit", "skipped", "no cached mode: not a text model (its main input: pixel_values)"),
    ("blip_2_qformer", "skipped", "no cached mode: Blip2QFormerModel.forward takes no "
                                  "input_ids"),
    ("clip", "skipped", "no cached mode: the model does not run on input ids alone "
                        "(AttributeError)"),
    ("t5", "refused", "the cache of an encoder-decoder: an EncoderDecoderCache as the cache is "
                      "not supported (an encoder-decoder's two caches"),
    ("whisper", "refused", "EncoderDecoderCache"),
])
def test_a_model_without_a_cached_mode_says_which_kind_it_is(family, verdict, why):
    """Before: 137 rows "not a text model run on input ids" (encoder-decoders, vision models,
    towers alike) and BERT's and RecurrentGemma's "returned no cache for the prompt"."""
    row = sw.sweep_one(family, cached=True)
    assert row.verdict == verdict and why in row.reason, row
    assert row.reason.startswith(why) or verdict == "refused", row


def test_the_readme_counts_are_the_docs_table():
    table = sw.read_table(DOC.read_text())
    line = sw.counts_line([sw.SweepRow(f, m, v) for f, m, v, _ in table])
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert line in readme, line
    assert "(transformers_sweep.md)" in (ROOT / "docs" / "frameworks.md").read_text()


def _llama():
    model = fam.family_model("llama", seed=1)
    return model, fam.model_inputs("llama", model)


@pytest.mark.parametrize("what", ["inv_freq", "attention_scaling"])
def test_a_changed_rope_frequency_or_factor_is_the_rotary_rows_mismatch(what):
    model, inputs = _llama()
    assert compare_transformers_model(model, **inputs).ok
    rotary = model.rotary_emb
    if what == "inv_freq":
        rotary.inv_freq.mul_(1.01)
    else:
        rotary.attention_scaling *= 1.01
    report = compare_transformers_model(model, **inputs)
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "rotary_emb (cos, sin)", str(report)
    assert "first disagreement: rotary_emb (cos, sin)" in str(report)
    assert "MISMATCH" in report._repr_html_() and "tolerance" in report._repr_html_()


def test_a_changed_scale_is_the_layers_mismatch():
    """q scaled by 1.01 inside the layer is the scores' scale times 1.01."""
    model, inputs = _llama()
    q_proj = model.layers[0].self_attn.q_proj
    q_proj.register_forward_hook(lambda m, a, out: out * 1.01)
    report = compare_transformers_model(model, **inputs)
    assert report.first_disagreement.name == "layers.0.self_attn", str(report)


# the layer whose table is changed, and the table: T5's buckets, Data2VecVision's 2-D offsets
# (with a class token), Swin's per window (its second block: shifted windows)
TABLES = {
    "t5": ("encoder.block.0.layer.0.SelfAttention", "relative_attention_bias.weight", ""),
    "data2vec-vision": ("encoder.layer.1.attention.attention",
                        "relative_position_bias.relative_position_bias_table", ""),
    "swin": ("encoder.layers.0.blocks.1.attention",
             "relative_position_bias.relative_position_bias_table", ""),
    # BEiT's table is outside its attention layer (each BeitLayer's): its own row
    "beit": ("layers.1.relative_position_bias", "relative_position_bias_table", " (bias table)"),
}


@pytest.mark.parametrize("family", sorted(TABLES))
def test_a_changed_bias_table_is_the_layers_mismatch(family):
    model = fam.family_model(family, seed=1)
    inputs = fam.model_inputs(family, model)
    assert compare_transformers_model(model, **inputs).ok
    name, table, row = TABLES[family]
    layer = model.get_submodule(name)

    def corrupt(module, args, kwargs):               # after our copy of the table was read
        with torch.no_grad():
            module.get_parameter(table)[0, 0] += 1e-3
    layer.register_forward_pre_hook(corrupt, with_kwargs=True)
    report = compare_transformers_model(model, **inputs)
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == name + row, str(report)


def test_one_verdict_in_text_html_and_ok_when_a_layer_is_refused():
    model = fam.family_model("deberta-v2")
    report = compare_transformers_model(model, **fam.model_inputs("deberta-v2", model))
    assert report.verdict == "INCOMPLETE" and not report.ok
    assert "-> INCOMPLETE" in str(report) and "-&gt; INCOMPLETE" in report._repr_html_()
    assert "no attention layer found" not in str(report)


def test_a_tiny_config_is_small_and_builds():
    cfg = tm.tiny_config("llama")
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers) == (32, 4, 2)
    model = tm.build("llama")
    assert sum(p.numel() for p in model.parameters()) < 100_000
    assert not np.isnan(next(model.parameters()).detach().numpy()).any()



def test_the_per_layer_cut_keeps_one_layer_of_each_kind_at_the_same_layers():
    """Per-layer lists and a per-layer dict (Gemma 4's ``per_layer_config``: its
    full-attention layers' wider head) are cut at the same layers: the first of each kind
    (what the lists and the dict say of a layer together), the model deepened to hold them."""
    d = {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8,
         "layer_types": ["sliding", "sliding", "sliding", "full"] * 2,
         "mlp_layer_types": ["dense"] + ["sparse"] * 7,
         "num_key_value_heads_per_layer": [8, 2, 2, 2, 8, 2, 2, 2],
         "per_layer_config": {"03": {"head_dim": 512}, "07": {"head_dim": 512}},
         "kv_source_layers": list(range(8)),        # each layer its own key/value source
         "target_layer_ids": [1, 3, 5, 6, 7, 8, 9, 10],       # ids of another model's layers
         "swa_num_key_value_heads": 16}               # the sliding layers' own (Inkling's)
    small = tm._shrink(d)
    assert small["swa_num_key_value_heads"] == 2
    # kinds: layer 0 (sliding, dense, 8 kv heads), 1 (sliding, sparse, 2), 3 (full, override)
    assert small["num_hidden_layers"] == 4         # and 4 (sliding, sparse, 8 kv heads)
    assert small["layer_types"] == ["sliding", "sliding", "full", "sliding"]
    assert small["mlp_layer_types"] == ["dense", "sparse", "sparse", "sparse"]
    assert small["num_key_value_heads_per_layer"] == [4, 2, 2, 4]       # all heads, or GQA
    assert small["per_layer_config"] == {"02": {"head_dim": 8}}         # the full layer's
    assert small["kv_source_layers"] == [0, 1, 2, 3]
    assert small["target_layer_ids"] == d["target_layer_ids"]
    two = tm._shrink({**d, "layer_types": ["full"] * 8, "mlp_layer_types": ["dense"] * 8,
                      "num_key_value_heads_per_layer": [8] * 8, "per_layer_config": {}})
    assert two["num_hidden_layers"] == 2 and two["layer_types"] == ["full", "full"]


def test_per_stage_heads_and_depths_and_backbone_outputs_fit_the_small_model():
    """Donut's Swin per-stage heads (3 does not divide a width of 32) become 4 a stage, its
    depths at most 2; DINOv2's backbone output ``stage12`` names a stage the 2-layer model
    lacks: dropped (transformers then takes the last stage)."""
    small = tm._shrink({"embed_dim": 96, "num_heads": [3, 6, 12, 24], "depths": [2, 2, 18, 2],
                        "out_features": ["stage4"], "out_indices": [4],
                        "stage_names": ["stem", "stage1", "stage2", "stage3", "stage4"]})
    assert (small["num_heads"], small["depths"]) == ([4, 4, 4, 4], [2, 2, 2, 2])
    assert small["out_features"] == ["stage4"]               # a stage the model still has
    cfg = tm.tiny_config("donut-swin")
    assert (cfg.num_heads, cfg.depths) == ([4, 4, 4, 4], [2, 2, 2, 2])
    cfg = tm.tiny_config("dinov2")
    assert cfg.num_hidden_layers == 2 and cfg.out_features == ["stage2"]


def test_a_config_over_the_cap_is_narrowed_by_its_width_names():
    """XLM's ``emb_dim`` (2048, 101M parameters after the generic shrink) is a width by its
    name: the second shrink makes it 32, and the model fits the cap; a family under the
    cap is built from the first shrink alone (Llama's config is unchanged by it)."""
    assert tm.tiny_config("xlm").emb_dim == 2048
    assert tm.tiny_config("xlm", narrow=True).emb_dim == 32
    assert sum(p.numel() for p in tm.build("xlm").parameters()) <= tm.CAP
    assert tm.tiny_config("llama", narrow=True).to_dict() == tm.tiny_config("llama").to_dict()
    narrow = tm._narrow({"hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3],
                         "entity_vocab_size": 500000, "kernel_size": 128,
                         "sub": {"intermediate_size": 4096, "qk_head_dim": 192}})
    assert narrow == {"hidden_sizes": [8, 16, 32, 64], "depths": [2, 2, 2, 2],
                      "entity_vocab_size": 99, "kernel_size": 128,
                      "sub": {"intermediate_size": 64, "qk_head_dim": 8}}


def test_a_width_the_family_leaves_none_is_given():
    """Ministral's ``head_dim`` and ESM's ``vocab_size`` default to None, which their
    modeling code uses in arithmetic: the small values (8 = 32 / 4 heads; 99)."""
    assert tm.tiny_config("ministral").head_dim == 8
    assert tm.tiny_config("esm").vocab_size == sw.VOCAB


def test_a_family_whose_own_default_config_does_not_build_is_skipped_saying_so():
    """DBRX's default attention sub-config lacks the ``rope_theta`` its modeling reads: no
    shrink can fix that, and the skip reason says the default fails too; a missing library
    is named as it is (DiNAT: natten)."""
    with pytest.raises(ValueError, match="own default config does not build either: "
                                         "AttributeError"):
        tm.build("dbrx")
    row = sw.sweep_one("dinat")
    assert row.verdict == "skipped" and "natten" in row.reason

def _alibi_model(family):
    if family == "falcon":
        cfg = tm.tiny_config("falcon")
        cfg.alibi = True
        torch.manual_seed(0)
        return transformers.AutoModel.from_config(cfg).eval()
    return tm.build(family)


@pytest.mark.parametrize("family, builder", [
    ("bloom", "build_alibi_tensor"), ("falcon", "build_alibi_tensor"),
    ("mpt", "build_mpt_alibi_tensor")])
def test_alibi_agrees_and_a_changed_slope_is_the_first_layers_mismatch(family, builder,
                                                                         monkeypatch):
    """BLOOM's and Falcon's alibi argument, MPT's position_bias: compared with ours (never
    taken from the model), so slopes 1 % off are the first layer's disagreement."""
    model = _alibi_model(family)
    inputs = sw.text_inputs(model)
    report = compare_transformers_model(model, **inputs)
    assert report.ok and len(report.layers) == 2, str(report)
    module = __import__(type(model).__module__, fromlist=[builder])
    original = getattr(module, builder)
    if family == "mpt":              # a method of the model calls the module's function
        monkeypatch.setattr(module, builder, lambda *a, **k: original(*a, **k) * 1.01)
    else:
        monkeypatch.setattr(module, builder, lambda m, h, dtype: original(m, h, dtype) * 1.01)
    report = compare_transformers_model(model, **inputs)
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == report.layers[0].name, str(report)


def test_partial_interleaved_rope_of_gptj_agrees_with_its_sin_cos_row():
    model = tm.build("gptj")
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.ok, str(report)
    assert [r.kind for r in report.layers] == ["rotary", "attention", "attention"]
    assert [c.name for c in report.layers[0].checks] == ["sin", "cos"]


def test_qwen2_vl_text_model_mrope_with_text_positions_agrees():
    model = tm.build("qwen2_vl_text")
    assert compare_transformers_model(model, **sw.text_inputs(model)).ok


def _window_to(value):
    """A forward pre-hook setting a model's sliding window to ``value`` once it runs (after
    the diff has read it): Mistral's in its config (its model builds the mask from it),
    GPT-Neo's local layer's in its own causal buffer."""
    def hook(module, args, kwargs):
        if hasattr(module, "config") and hasattr(module.config, "sliding_window"):
            module.config.sliding_window = value
        else:
            P = module.bias.shape[-1]
            keep = torch.ones((P, P), dtype=torch.bool).tril()
            module.bias.copy_((keep & ~keep.tril(-value))[None, None])
    return hook


@pytest.mark.parametrize("family, where", [("mistral", None), ("gpt_neo", "h.1.attn.attention")])
def test_a_changed_window_is_the_layers_mismatch(family, where):
    """The window the model runs with is not the one read (3 -> 2, after the diff read it):
    the layer disagrees and is named; the model's mask is never taken as ours."""
    model = fam.family_model(family, seed=1)
    inputs = fam.model_inputs(family, model)
    assert compare_transformers_model(model, **inputs).ok
    target = model if where is None else model.get_submodule(where)
    handle = target.register_forward_pre_hook(_window_to(2), with_kwargs=True)
    report = compare_transformers_model(model, **inputs)
    handle.remove()
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == (where or "layers.0.self_attn"), str(report)


def test_a_window_read_wrong_is_the_layers_mismatch(monkeypatch):
    """Ours changed instead (ModernBERT's local layer read with |i - j| <= 1, not 2): the
    local layer disagrees, the global one still agrees."""
    from attention_np.interop.transformers import layer_reading
    model = fam.family_model("modernbert", seed=1)
    inputs = fam.model_inputs("modernbert", model)
    read = layer_reading.read_window
    monkeypatch.setattr(layer_reading, "read_window",
                        lambda m, cfg: None if read(m, cfg) is None else read(m, cfg) - 1)
    report = compare_transformers_model(model, **inputs)
    assert [r.ok for r in report.attention] == [True, False], str(report)
    assert report.first_disagreement.name == "layers.1.attn"

@pytest.mark.parametrize("family", ["glm", "helium", "ernie4_5"])
def test_interleaved_rope_with_concatenated_angles_agrees_and_a_changed_frequency_is_caught(
        family):
    """GLM, Helium and ERNIE 4.5 rotate interleaved pairs but their rotary embedding gives the
    angles concatenated (Llama's layout): their apply_rotary_pos_emb interleaves the first
    half (ERNIE 4.5 in float32). Both layouts read: the rotary row and each layer agree, and
    a 1 % change of the frequencies is the rotary row's disagreement."""
    model = tm.build(family)
    inputs = sw.text_inputs(model)
    report = compare_transformers_model(model, **inputs)
    assert report.ok, str(report)
    assert [r.kind for r in report.layers] == ["rotary", "attention", "attention"]
    model.rotary_emb.inv_freq.mul_(1.01)
    report = compare_transformers_model(model, **inputs)
    assert report.first_disagreement.name == "rotary_emb (cos, sin)", str(report)


def test_a_model_without_sdpa_runs_eager_so_splinter_stays_bidirectional():
    """Splinter has no sdpa: its layers lack the ``is_causal`` attribute transformers' sdpa
    reads (absent: causal), so forcing sdpa made its encoder causal (a false MISMATCH 0.9).
    Diffed as the model runs (eager, softmax in float64), it agrees and the change is caught."""
    assert sw.sweep_one("xglm").verdict == "AGREE"      # no sdpa either: its own forward
    row = sw.sweep_one("splinter")
    assert row.verdict == "AGREE", row
    assert "+1e-06 caught at encoder.layer.0.attention.self" in row.reason


def test_a_tower_a_text_input_never_runs_is_not_covered_by_the_models_agree():
    """LLaVA given input ids runs its language model only: the vision tower's layers are
    listed as not run and the report is INCOMPLETE (never AGREE); the sweep diffs the tower's
    attention class one by one and catches the change there too."""
    model = tm.build("llava")
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.verdict == "INCOMPLETE" and not report.ok, str(report)
    assert report.not_run[0] == ("vision_tower.encoder.layers.0.self_attn", "CLIPAttention")
    assert "not run: vision_tower.encoder.layers.0.self_attn (CLIPAttention)" in str(report)
    assert "INCOMPLETE" in report._repr_html_()
    row = sw.sweep_one("llava")
    assert row.verdict == "AGREE", row
    assert "caught at language_model.layers.0.self_attn" in row.reason
    assert "not run by text input ids, 1 layer kind(s) one by one (CLIPAttention); +1e-06 " \
           "caught in each" in row.reason


@pytest.mark.parametrize("family, feature", [
    ("parakeet_encoder", "Transformer-XL relative position attention"),
    ("cosmos3_edge_vision", "packed variable-length sequences (cu_seqlens"),
    ("sam", "decomposed relative position embeddings"),   # its vision encoder, listed first
    ("segformer", "spatial-reduction attention"),
    ("pixtral", "RoPE of type 'axial' (2-D axial RoPE"),
    ("muse_glimmer_assistant", "attention over a context sequence"),
    ("xclip", "query, keys and values passed as three separate inputs"),
    ("mobilebert", "the value from the layer input, query and key from its bottleneck"),
    ("fsmt", "fairseq's attention call"),
    ("pegasus_x", "block-local attention with global tokens"),
    ("wavlm", "a gated relative position bias"),
    ("clvp", "RoPE as CLVP applies it"),
    ("nanochat", "a QK-norm without a learned weight"),
    ("bitnet", "a norm of the concatenated heads before W^O"),              # MISMATCH 2.6 before
    ("kosmos-2", "a LayerNorm of the concatenated heads before W^O"),       # MISMATCH 8.3
    ("diffllama", "differential attention"),                                # MISMATCH 3.2
    ("doge", "a dynamic mask"),                                             # MISMATCH 1e-2
    # before: each refused as "no q, k, v projections" (or "heads not readable")
    ("deepseek_v2", "multi-head latent attention (MLA"),
    ("minicpm3", "multi-head latent attention (MLA"),
    ("rwkv", "RWKV's time-mixing recurrence"),
    ("xlstm", "an mLSTM layer"),
    ("jetmoe", "a mixture of attention heads"),
    ("swiftformer", "efficient additive attention"),
    ("mobilevitv2", "separable linear self-attention"),
    ("patchtsmixer", "gated attention (PatchTSMixer"),
    ("wav2vec2-conformer", "Transformer-XL relative position attention"),
    ("wav2vec2-bert", "relative position scores from a distance embedding"),
    ("cpmant", "CPM-Ant attention"),
    ("sam_vision_model", "decomposed relative position embeddings"),
    ("seggpt", "decomposed relative position embeddings"),
    ("gemma4_audio", "chunked local attention with relative position logits"),
    ("gemma4_vision", "2-D RoPE"),
    ("inkling2_text", "Inkling2 attention"),
    ("zaya", "compressed convolutional attention"),
    ("qwen2_5_vl_vision", "packed variable-length sequences (cu_seqlens"),   # a fused qkv
    ("glm_image_vision", "packed variable-length sequences (cu_seqlens"),
    # before: a crash (a (B, L, C) input unpacked as the layer's (B, H, W, C) grid; Hiera's
    # mask units of more tokens than the input has)
    ("sam2_hiera_det_model", "attention over a (B, H, W, C) grid of patches"),
    ("vitdet", "attention over a (B, H, W, C) grid of patches"),
    ("florence2", "window attention over a (B, H, W, C) grid of patches"),
    ("hiera", "mask-unit attention (Hiera"),
    # before: refused as "score scale is not readable", "no q, k, v projections"
    ("swinv2", "scaled cosine attention (Swin V2, Swin2SR"),
    ("swin2sr", "scaled cosine attention (Swin V2, Swin2SR"),
    ("xlnet", "two-stream relative attention (XLNet"),
    ("funnel", "Funnel relative attention (Funnel Transformer"),
    ("granite_speech", "block-local attention with Shaw relative position scores"),
    ("granite_speech_plus", "block-local attention with Shaw relative position scores"),
    ("glm5_next_text", "Kimi delta attention (KDA"),
    # before: "a layer whose score scale is not readable"
    ("perceiver", "Perceiver attention (LayerNorms of the queries' input"),
    # before: "projections under names the reader does not know"
    ("luke", "entity-aware self-attention (LUKE"),
    # before: "no q, k, v projections"
    ("levit", "LeViT attention (attention biases per head over the absolute 2-D offset"),
    ("deepseek_v4", "DeepSeek-V4 shared key-value attention"),
])
def test_layers_computing_something_else_are_refused_by_that_feature(family, feature):
    """Before: a crash of the diff (the layer's forward missing cu_seqlens, key and value,
    height and width; a tuple into nn.Linear; rope_type 'axial' unknown)."""
    row = sw.sweep_one(family)
    assert row.verdict == "refused" and feature in row.reason, row


def test_moshi_and_kyutai_projections_are_read_through_their_wrapper(monkeypatch):
    """Moshi's and Kyutai's decoders wrap each projection in a MoshiLinear (one nn.Linear for
    every position; before: "no q, k, v projections"): read through it, each agrees and the
    1e-6 change is caught. Their config's sliding_window is not in the model's mask
    (create_causal_mask): with a window of 2 the model still agrees, and reading that window
    as ours would is a MISMATCH. The depth decoder's per-codebook projections are refused by
    that name."""
    from transformers.models.moshi.modeling_moshi import MoshiAttention

    from attention_np.interop.transformers import UnsupportedLayer, layer_reading, layer_spec
    row = sw.sweep_one("moshi")
    assert row.verdict == "AGREE" and "+1e-06 caught at layers.0.self_attn" in row.reason, row
    row = sw.sweep_one("kyutai_speech_to_text")
    assert row.verdict == "AGREE", row
    assert "(KyutaiSpeechToTextAttention); +1e-06 caught in each" in row.reason, row
    model = tm.build("moshi")
    model.config.sliding_window = 2
    assert layer_spec(model.layers[0].self_attn).attention.window is None
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.verdict == "AGREE", str(report)
    monkeypatch.setattr(layer_reading, "read_window", lambda module, cfg: 2)
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.verdict == "MISMATCH", str(report)
    depth = MoshiAttention(model.config, 0, use_flexible_linear=True, use_rope=False)
    with pytest.raises(UnsupportedLayer, match="per-codebook projections"):
        layer_spec(depth)


@pytest.mark.parametrize("family, layer, feature", [
    ("sam2_hiera_det_model", "Sam2MultiScaleAttention", "query pooling (SAM2's and Hiera's"),
    ("hiera", "HieraMaskUnitAttention", "query pooling (SAM2's and Hiera's"),
    ("florence2", "Florence2VisionChannelAttention", "channel attention (DaViT, Florence-2"),
])
def test_grid_layers_after_the_first_are_refused_by_their_own_feature(family, layer, feature):
    """A family's row names its first refusal only: the layers that pool their queries (at a
    stage change) and Florence-2's channel attention (before: "number of heads not readable")
    are each refused by what they compute, and no block around them is."""
    from attention_np.interop.transformers.model_diff import attention_layers
    refused = attention_layers(tm.build(family))[1]
    assert any(f"{layer}: {feature}" in why for _, why in refused), refused
    assert all(why.split(":")[0].endswith("Attention") for _, why in refused), refused


def test_levits_subsampling_layers_are_refused_by_their_own_feature():
    """LeViT's row names its first layer (LevitAttention); the layers between its stages
    (LevitAttentionSubsample, before: "no q, k, v projections") are refused by theirs."""
    from attention_np.interop.transformers.model_diff import attention_layers
    refused = attention_layers(tm.build("levit"))[1]
    kinds = {why.split(":")[0]: why for _, why in refused}
    assert set(kinds) == {"LevitAttention", "LevitAttentionSubsample"}, refused
    assert "subsampled LeViT attention (queries from a strided" in \
        kinds["LevitAttentionSubsample"]


def test_hieras_global_layers_agree_and_catch_a_change():
    """Hiera's global-attention layers (no mask units, no query pooling) are plain attention of
    a (B, L, C) sequence: read, they agree, and the 1e-6 change added to one is caught."""
    from attention_np.interop.transformers.model_diff import attention_layers
    found, refused = attention_layers(tm.build("hiera"))
    assert found and refused, (found, refused)
    assert all(not m.use_mask_unit_attn and m.query_stride == 1 for _, m, _ in found)
    verdict, err, why = sw.diff_layers(found)
    assert verdict == "AGREE" and err < 1e-9, (verdict, err, why)


def test_sams_mask_decoder_is_still_refused_by_its_three_inputs():
    """SAM's vision encoder is now read as far as its decomposed relative positions (its refusal
    comes first); its mask decoder's layers keep theirs."""
    from attention_np.interop.transformers.model_diff import attention_layers
    refused = attention_layers(tm.build("sam"))[1]
    assert any(n.startswith("mask_decoder.") and "three separate inputs" in why
               for n, why in refused), refused


@pytest.mark.parametrize("family", ["glm4v_text", "glm4v_moe_text", "qwen2_5_vl_text"])
def test_multimodal_rope_text_models_agree(family):
    """GLM-4V's text layers turn interleaved pairs with rotate_half_llm (its rotate_half is the
    vision tower's, half): the layout is read from apply_rotary_pos_emb itself. Their
    mrope_section defaults to a large head's; the sweep sizes it for its small one."""
    model = tm.build(family)
    report = compare_transformers_model(model, **sw.text_inputs(model))
    assert report.ok and len(report.attention) == 2, str(report)


@pytest.mark.parametrize("family", ["glm46v", "glmga", "ernie4_5_vl_moe"])
def test_multimodal_rope_in_a_sub_config_is_sized_and_the_text_layers_agree(family):
    """Before: errors (GLM-4.6V's text model is GLM-4V's, built by AutoModel: the sweep looked
    for mrope_section in GLM-4.6V's modeling only and left [8, 12, 12]; ERNIE 4.5 VL's sections
    [h, w, t] need h == w). Now its text layers agree with the change caught (a finite max
    error; AGREE of the text layers, then the vision tower's refusal names its feature)."""
    row = sw.sweep_one(family)
    assert row.verdict == "refused" and "cu_seqlens" in row.reason, row
    assert row.max_error < 1e-12, row
    assert tm.tiny_config(family).text_config.rope_parameters["mrope_section"] in (
        [2, 1, 1], [1, 1, 2])


def test_moonshine_streaming_encoder_agrees_and_its_self_only_rope_decoder_is_refused():
    """Before: an error (the tiny config's grouped key/value heads, which its decoder's forward
    cannot run). Its encoder agrees with the change caught (a finite max error); its decoder's
    one class is self-attention with RoPE and, called with key_value_states, cross-attention
    without: refused by that, not compared as self-attention alone (the sweep diffs one layer
    per class: its cross calls, turned by one spec's RoPE, disagree by about 6)."""
    row = sw.sweep_one("moonshine_streaming")
    assert row.verdict == "refused" and "RoPE in self-attention only" in row.reason, row
    assert row.reason.startswith("decoder.layers.0.self_attn: MoonshineStreamingAttention")
    assert row.max_error < 1e-12, row


@pytest.mark.parametrize("family, why", [
    ("clip", "the model does not run on input ids alone (AttributeError): 1 layer kind(s) one "
             "by one (CLIPAttention)"),                       # it needs pixel_values too
    ("blip_2_qformer", "1 layer kind(s) one by one (Blip2QFormerMultiHeadAttention)"),  # no ids
    ("mvp", "1 layer kind(s) one by one (MvpAttention)"),     # a layer without a config
    ("lightglue", "1 layer kind(s) one by one (LightGlueAttention)"),
    ("videomae", "1 layer kind(s) one by one (VideoMAESelfAttention)"),   # forward: no mask
    ("videoprism_vision_model", "1 layer kind(s) one by one (VideoPrismAttention)"),  # eager:
    # its softmax in float32 (a MISMATCH of 1e-6): diffed with the float64 eager
    ("switch_transformers", "1 layer kind(s) one by one (SwitchTransformersAttention)"),  # but
    # not a T5 bias table (passed as position_bias, which the float64 eager leaves out)
    ("t5gemma", "2 layer kind(s) one by one (T5GemmaSelfAttention, T5GemmaCrossAttention)"),
])
def test_models_the_text_diff_cannot_run_are_diffed_layer_by_layer(family, why):
    """Before: errors (CLIP's forward without pixel_values, a forward without input_ids, a
    layer without ``config``, nn.Module taken for LightGlue's rotary embedding class, a mask
    passed to a forward that takes none, T5Gemma's cross attention read as self-attention)."""
    row = sw.sweep_one(family)
    assert row.verdict == "AGREE" and why in row.reason, row


@pytest.mark.parametrize("family", ["xlm", "flaubert"])
def test_xlms_inline_query_scale_and_keep_mask_agree_and_a_changed_scale_is_caught(family):
    """Before: refused as "score scale is not readable" (XLM's MultiHeadAttention divides q by
    sqrt(head_dim) in its forward; its mask is a (B, S) keep mask, 0 where masked, and its
    softmax is taken in float32)."""
    from attention_np.interop.transformers import compare_transformers_attention
    row = sw.sweep_one(family)
    assert row.verdict == "AGREE" and "+1e-06 caught at attentions.0" in row.reason, row
    model = tm.build(family, 0).double()
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 1, 1]])
    pad = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])      # two keys masked: read as keep
    assert compare_transformers_model(model, input_ids=ids, attention_mask=pad).ok
    layer = model.attentions[0]
    x = np.random.default_rng(0).standard_normal((2, 5, layer.dim))
    assert compare_transformers_attention(layer, x, attention_mask=pad.numpy()).ok
    assert compare_transformers_attention(layer, x).ok                  # no mask: all keys
    layer.q_lin.register_forward_hook(lambda m, a, out: out * 1.01)      # its scale x 1.01
    report = compare_transformers_model(model, input_ids=ids, attention_mask=pad)
    assert report.verdict == "MISMATCH" and report.first_disagreement.name == "attentions.0"
