"""Families the sweep newly builds whose verdicts were false (interop/transformers/
layer_reading.py): each whole model agrees at float64 rounding with 1e-6 added to one layer's
output caught at that layer, and our reading of the family's feature changed is a named
MISMATCH. The models are built here from explicit small configs (the sweep's tiny configs
change with its builder)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers import layer_reading, reading_heads  # noqa: E402
from attention_np.interop.transformers.family_cases import randomize  # noqa: E402
from attention_np.interop.transformers.model_diff import (  # noqa: E402
    attention_layers,
    compare_transformers_model,
)

CHANGE = 1e-6
B, L = 2, 7


def _ids(vocab: int, low: int = 4) -> dict:
    ids = np.random.default_rng(0).integers(low, vocab, (B, L))
    return {"input_ids": torch.from_numpy(ids),
            "attention_mask": torch.ones((B, L), dtype=torch.long)}


def _agrees_and_catches(model, inputs, where: str | None = None) -> float:
    """The whole model diffed twice: as it is (every row agrees; the largest attention error
    returned) and with :data:`CHANGE` added to the output of the attention layer ``where``
    (default: the first read): that layer's only failing check is its output, off by the
    change, and every other row still agrees."""
    found = attention_layers(model)[0]
    assert found, "no attention layer read"
    report = compare_transformers_model(model, **inputs)
    assert report.ok and not report.refused, str(report)
    err = max(c.err for r in report.attention for c in r.checks)
    where = where or found[0][0]

    def add(module, args, output):
        return (output[0] + CHANGE,) + tuple(output[1:]) if isinstance(output, tuple) \
            else output + CHANGE
    handle = model.get_submodule(where).register_forward_hook(add)
    try:
        changed = compare_transformers_model(model, **inputs)
    finally:
        handle.remove()
    assert changed.verdict == "MISMATCH" and changed.first_disagreement.name == where, \
        str(changed)
    bad = [c for c in changed.first_disagreement.checks if not c.ok]
    assert [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol
    assert all(r.ok for r in changed.layers if r.name.split("#")[0] != where), str(changed)
    return err


# ESM scales its queries by 1/sqrt(head_dim) in its forward and passes scaling=1.0 to the
# attention function; it takes position_embeddings always but rotates only with
# position_embedding_type "rotary" (ESM-2), in float32 (the float64 copy rotates in float64).

def _esm(position_embedding_type: str):
    cfg = transformers.EsmConfig(
        vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, pad_token_id=1, mask_token_id=32, max_position_embeddings=64,
        position_embedding_type=position_embedding_type, token_dropout=False)
    return randomize(transformers.EsmModel(cfg), 1)


@pytest.mark.parametrize("kind", ["absolute", "rotary"])
def test_esm_reads_the_query_scaled_in_its_forward_and_rotates_only_when_rotary(kind):
    model = _esm(kind)
    layers, refused = attention_layers(model)
    assert len(layers) == 2 and not refused
    spec = layers[0][2]
    assert spec.scale == 8 ** -0.5 and "W_o" not in layer_reading.params_from_transformers(
        layers[0][1])[0]
    assert (spec.attention.rope is not None) == (kind == "rotary")
    assert _agrees_and_catches(model, _ids(33)) < 1e-12


def test_esm_read_without_its_query_scale_is_the_first_layers_mismatch(monkeypatch):
    model = _esm("rotary")
    monkeypatch.setattr(reading_heads, "query_prescale", lambda module: 1.0)
    report = compare_transformers_model(model, **_ids(33))
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "encoder.layer.0.attention.self", str(report)


def test_esm_with_a_changed_rotary_frequency_is_the_rotary_rows_mismatch():
    model = _esm("rotary")
    model.rotary_embeddings.inv_freq.mul_(1.01)
    report = compare_transformers_model(model, **_ids(33))
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "rotary_embeddings (cos, sin)", str(report)


# MiMo-V2-Flash multiplies its projected values by config.attention_value_scale (linear: read
# into W_v, b_v); its sliding layers have twice the key/value heads, sinks and a window, its
# value heads a width of their own, RoPE on a third of each head, a theta per layer type.

def _mimo():
    cfg = transformers.MiMoV2FlashConfig(
        vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, v_head_dim=12,
        sliding_window=3, layer_types=["full_attention", "sliding_attention"],
        mlp_layer_types=["dense", "dense"], moe_intermediate_size=16, n_routed_experts=2,
        num_experts_per_tok=1)
    return randomize(transformers.MiMoV2FlashModel(cfg), 1)


def test_mimo_v2_flash_reads_its_value_scale_and_agrees_with_sinks_and_a_window():
    model = _mimo()
    layers, refused = attention_layers(model)
    assert not refused
    assert [(s.attention.window, s.sinks, s.num_kv_heads, s.rotated_width) for *_, s in layers] == \
        [(None, False, 2, 2), ((2, 0), True, 4, 2)]
    module = layers[0][1]
    assert layer_reading.value_scale(module) == 0.707
    w_v = module.v_proj.weight.detach().double().numpy().T
    assert np.allclose(layer_reading.params_from_transformers(module)[0]["W_v"], 0.707 * w_v)
    assert _agrees_and_catches(model, _ids(99)) < 1e-12
    assert _agrees_and_catches(model, _ids(99), "layers.1.self_attn") < 1e-12


def test_mimo_v2_flash_read_without_its_value_scale_is_the_first_layers_mismatch(monkeypatch):
    model = _mimo()
    monkeypatch.setattr(layer_reading, "value_scale", lambda module: 1.0)
    report = compare_transformers_model(model, **_ids(99))
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == "layers.0.self_attn", str(report)


# Families whose attention computes what attention_np cannot: each refused by that feature
# (built on the meta device: the refusal reads the layer's structure and source, no weights).
SMALL = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=8)
REFUSED = [
    ("HunYuanDenseV1", {}, "QK-norm after RoPE"),
    ("HunYuanMoEV1", {}, "QK-norm after RoPE"),
    ("EmbeddingGemma2Text", {}, "a norm of the values (v_norm"),
    ("Gemma4UnifiedText", {}, "a norm of the values (v_norm"),
    ("InklingText", {}, "Inkling attention (keys and values through short causal convolutions"),
    ("Laguna", {}, "softplus(g_proj(x))"),
    ("Step3p7Text", {}, "a gated attention output (the concatenated heads times sigmoid(gate)"),
    ("Lfm3", {"layer_types": ["full_attention", "full_attention"], "pad_token_id": 0},
     "a gated attention output (each head times sigmoid(g_proj(x))"),
    ("KimiLinear", {"pad_token_id": 0}, "a gated delta-rule layer"),
    ("BailingHybrid", {"pad_token_id": 0}, "a gated delta-rule layer"),
    ("TimesFm2_5", {"num_key_value_heads": 4}, "a learned scale per query feature (scaling: a parameter"),
    ("Gemma4UnifiedText", {"num_hidden_layers": 3, "num_kv_shared_layers": 1, "layer_types": [
        "sliding_attention", "full_attention", "full_attention"]},
     "keys and values shared across layers"),
]


@pytest.mark.parametrize("name, extra, feature", REFUSED)
def test_layers_computing_something_else_are_refused_by_that_feature(name, extra, feature):
    cfg = getattr(transformers, f"{name}Config")(**{**SMALL, **extra})
    with torch.device("meta"):
        model = getattr(transformers, f"{name}Model")(cfg)
    found, refused = attention_layers(model)
    assert not found and refused
    assert any(feature in why for _, why in refused), refused
    if "shared" in feature:            # the last layer reuses the keys and values of another
        where, why = refused[-1]
        assert where == "layers.2.self_attn" and feature in why
        with pytest.raises(layer_reading.UnsupportedLayer, match="keys and values shared"):
            layer_reading.layer_spec(model.get_submodule(where))


def test_hunyuans_order_matters_norm_after_rope_is_not_norm_then_rope():
    """Why HunYuan is refused: RMSNorm(RoPE(q)) with a learned weight is not RoPE(RMSNorm(q))
    (the rotation mixes features m and m + d/2, whose weights differ)."""
    from attention_np.interop.transformers.rotary import rope_cos_sin
    cfg = transformers.HunYuanDenseV1Config(**SMALL)
    layer = randomize(transformers.HunYuanDenseV1Model(cfg), 1).layers[0].self_attn
    cos, sin = (torch.from_numpy(a) for a in rope_cos_sin(np.arange(5)[None], 8, 10000.0))
    q = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 4, 5, 8))).float()
    mod = __import__(type(layer).__module__, fromlist=["apply_rotary_pos_emb"])
    with torch.no_grad():
        after = layer.query_layernorm(mod.apply_rotary_pos_emb(q, q, cos.float(), sin.float())[0])
        before = mod.apply_rotary_pos_emb(layer.query_layernorm(q), q, cos.float(),
                                          sin.float())[0]
    assert (after - before).abs().max() > 1e-2


def test_a_rotary_function_of_another_signature_is_left_as_it_is():
    """Gemma 4's apply_rotary_pos_emb(x, cos, sin) (one tensor): the float64 probe of the
    two-tensor signature leaves it alone instead of crashing the diff."""
    from attention_np.interop.transformers.replay import float64_rope_function
    cfg = transformers.Gemma4UnifiedTextConfig(**SMALL)
    layer = transformers.Gemma4UnifiedTextModel(cfg).layers[0].self_attn
    with float64_rope_function(layer) as replaced:
        assert replaced is False


def test_dinov3_2d_rope_on_the_patches_alone_is_refused_by_that_name():
    """DINOv3 rotates the patch tokens by angles of their (row, column) coordinates and leaves
    the class and register tokens as they are: refused by that, not a crash in the diff."""
    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    cfg = transformers.DINOv3ViTConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                       num_attention_heads=4, image_size=32, patch_size=8,
                                       num_register_tokens=2)
    model = randomize(transformers.DINOv3ViTModel(cfg), 1)
    found, refused = attention_layers(model)
    assert not found and len(refused) == 2
    assert all("2-D RoPE of the patches' continuous (row, column) coordinates" in why
               for _, why in refused)
    with pytest.raises(layer_reading.UnsupportedLayer, match="class and register tokens not "
                                                             "rotated"):
        compare_transformers_attention(model.get_submodule(refused[0][0]),
                                       np.zeros((1, 19, 32)))


def test_llama4_vision_attention_taking_complex_freqs_is_refused_by_that_name():
    cfg = transformers.Llama4VisionConfig(
        hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        image_size=32, patch_size=8, vision_output_dim=32, projector_input_dim=32,
        projector_output_dim=32)
    with torch.device("meta"):
        model = transformers.Llama4VisionModel(cfg)
    found, refused = attention_layers(model)
    assert not found and len(refused) == 2
    assert all("2-D RoPE as complex frequencies (Llama 4's vision tower: freqs_ci" in why
               for _, why in refused)


# Zamba 2's shared attention block takes position_embeddings and rotates only with
# config.use_mem_rope (off by default); its low-rank adapters per call site are refused.

def _zamba2(**flags):
    cfg = transformers.Zamba2Config(
        vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, attention_head_dim=8, mamba_d_state=8,
        mamba_headdim=8, n_mamba_heads=8, layers_block_type=["mamba", "hybrid", "mamba"],
        adapter_rank=4, max_position_embeddings=64, **flags)
    return randomize(transformers.Zamba2Model(cfg), 1)


@pytest.mark.parametrize("rope", [False, True])
def test_zamba2_rotates_only_with_use_mem_rope_and_agrees_with_a_change_caught(rope):
    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    model = _zamba2(use_mem_rope=rope)
    found, refused = attention_layers(model)
    assert [n for n, *_ in found] == ["layers.1.shared_transformer.self_attn"]
    assert all("state-space layer" in why for _, why in refused)
    module, spec = found[0][1], found[0][2]
    assert (spec.attention.rope is not None) == rope and spec.scale == 0.5   # (head_dim / 2) ** -0.5
    x = np.random.default_rng(0).standard_normal((B, L, 64))
    report = compare_transformers_attention(module, x, seed=3)
    assert report.ok, str(report)
    assert max(c.err for c in report.checks if c.rule == "float64") < 1e-12
    handle = module.register_forward_hook(lambda m, a, out: (out[0] + CHANGE,) + out[1:])
    try:
        changed = compare_transformers_attention(module, x, seed=3)
    finally:
        handle.remove()
    bad = [c for c in changed.checks if not c.ok]
    assert [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol


def test_zamba2_adapters_per_call_site_are_refused_by_name():
    found, refused = attention_layers(_zamba2(use_shared_attention_adapter=True))
    assert not found
    assert any("low-rank adapters added to the shared q, k, v projections" in why
               for _, why in refused)


def test_a_layer_returning_its_output_alone_is_diffed_not_indexed():
    """Phi-4 multimodal's audio attention returns the output tensor, not a tuple: the layer
    diff took [0] of it (the first sequence) and crashed on the gradient's shape."""
    from transformers.models.phi4_multimodal import modeling_phi4_multimodal as phi4

    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    cfg = transformers.Phi4MultimodalAudioConfig(hidden_size=32, num_attention_heads=4,
                                                 intermediate_size=37)
    layer = randomize(phi4.Phi4MultimodalAudioAttention(cfg), 1)
    x = np.random.default_rng(0).standard_normal((B, L, 32))
    report = compare_transformers_attention(layer, x, seed=3)
    assert report.ok and max(c.err for c in report.checks) < 1e-12, str(report)
    handle = layer.register_forward_hook(lambda m, a, out: out + CHANGE)
    try:
        changed = compare_transformers_attention(layer, x, seed=3)
    finally:
        handle.remove()
    bad = [c for c in changed.checks if not c.ok]
    assert [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol


# Dia: its cross attention takes the encoder output as cross_attention_states, its layers take
# position_embeddings positionally (the model diff replaced neither, a crash before).

def _dia():
    enc = transformers.DiaEncoderConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=4,
                                        head_dim=8, vocab_size=99)
    dec = transformers.DiaDecoderConfig(
        hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, cross_num_attention_heads=4, cross_head_dim=8,
        cross_num_key_value_heads=2, cross_hidden_size=32, vocab_size=99, num_channels=2)
    cfg = transformers.DiaConfig(encoder_config=enc, decoder_config=dec, delay_pattern=[0, 1])
    return randomize(transformers.DiaModel(cfg), 1)


def test_dia_cross_attention_agrees_alone_and_in_the_whole_model_with_a_change_caught():
    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    model = _dia()
    found, refused = attention_layers(model)
    assert not refused
    cross = [n for n, _, s in found if s.cross]
    assert cross == ["decoder.layers.0.cross_attention", "decoder.layers.1.cross_attention"]
    rng = np.random.default_rng(0)
    report = compare_transformers_attention(
        model.get_submodule(cross[0]), rng.standard_normal((B, 5, 32)),
        key_value_states=rng.standard_normal((B, L, 32)), seed=3)
    assert report.ok and "dkey_value" in [c.name for c in report.checks], str(report)
    inputs = {"input_ids": _ids(99)["input_ids"],
              "decoder_input_ids": torch.from_numpy(rng.integers(3, 99, (B, 5, 2)))}
    assert _agrees_and_catches(model, inputs, cross[0]) < 1e-12
    assert _agrees_and_catches(model, inputs, "decoder.layers.1.self_attention") < 1e-12
