"""The variant sweep (interop/transformers/variant_sweep.py): each attention option a family's
config class declares, set to the values of its kind; each variant's layer, model and cached
model diffed with a 1e-6 change caught, or refused by the feature's name; its table in
docs/transformers_variants.md and its counts in the README held to a fresh run; the generator
measured on the configs it builds; a variant corrupted on the torch side after it was read is a
named disagreement."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers import sweep as sw  # noqa: E402
from attention_np.interop.transformers import tiny_models as tm  # noqa: E402
from attention_np.interop.transformers import variant_sweep as vs  # noqa: E402
from attention_np.interop.transformers.model_diff import compare_transformers_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "transformers_variants.md"

VARIANTS = pytest.mark.skipif(
    os.environ.get("ATTENTION_NP_VARIANTS") != "1",
    reason="the variant sweep builds a tiny model of each option value of each family of "
           "variant_sweep.FAMILIES (CI runs it after the default run, which leaves it out, "
           "docs/transformers_variants.md): "
           "ATTENTION_NP_VARIANTS=1 python -m pytest -m variants tests/interop/test_transformers_variants.py")

# a refusal of a variant names its option's feature: one of these words, by kind
FEATURE_WORDS = {
    "rope type": r"RoPE|rope|rotary", "partial rotary": r"RoPE|rope|rotary|rotat",
    "window": r"window|sliding|local|layer type", "key/value heads": r"key|value|head|group",
    "head width": r"head|width", "bias": r"bias", "soft-cap": r"cap", "QK-norm": r"norm",
    "scale": r"scale|scaling|multiplier|clip|alibi|ALiBi|upcast",
}


@pytest.fixture(scope="module")
def rows():
    """One variant sweep for every test here (each variant built once)."""
    return vs.variant_sweep()


def _get(cfg, name):
    top, _, key = name.partition(".")
    value = getattr(cfg, top)
    value = value.to_dict() if hasattr(value, "to_dict") else value
    return value[key] if key else value


@pytest.mark.parametrize("family", ["llama", "gemma2", "falcon", "gpt2", "mpt", "phi", "qwen2"])
def test_each_declared_option_is_set_in_the_config_built(family):
    """Each variant's options are in the config built from it, as set (measured on the built
    config, not on the change asked for); every kind the config declares gets a variant."""
    variants = vs.variants(family)
    assert variants
    for v in variants:
        cfg = vs.variant_config(v)
        for name, value in v.changes.items():
            if name == "rope_parameters" and isinstance(value, dict):
                got = cfg.rope_parameters
                assert {k: got[k] for k in value if k in got} == \
                    {k: x for k, x in value.items() if k in got}, (v.label, got)
                assert got.get("rope_type") == value.get("rope_type", got.get("rope_type"))
            else:
                assert _get(cfg, name) == value, (v.label, name, _get(cfg, name))
    declared = {vs.kind_of(n) for n in vs.declared(tm.tiny_config(family))}
    assert {v.kind for v in variants} <= declared


def test_the_generator_gives_every_kind_to_the_families_declaring_it():
    """Over :data:`~attention_np.interop.transformers.variant_sweep.FAMILIES`: every option
    kind of :data:`~attention_np.interop.transformers.variant_sweep.KINDS` is generated for
    some family; a family declaring RoPE parameters gets every RoPE type of transformers'
    ``ROPE_INIT_FUNCTIONS``; each kind's values are the kind's (MQA and MHA for key/value
    heads, a window shorter than the sweep's tokens, a head wider than hidden / heads)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    allv = vs.all_variants()
    assert {v.kind for v in allv} == set(vs.KINDS)
    for family in ("llama", "qwen2", "gemma2", "phi3"):
        types = {v.changes["rope_parameters"].get("rope_type") for v in allv
                 if v.family == family and v.kind == "rope type"}
        assert types == set(ROPE_INIT_FUNCTIONS), (family, types)
        kv = {v.changes["num_key_value_heads"] for v in allv
              if v.family == family and "num_key_value_heads" in v.changes}
        assert kv == {1, 4}, (family, kv)                   # MQA and MHA (the base: 2, GQA)
    wide = [vs.variant_config(v) for v in allv if v.family == "llama" and v.kind == "head width"]
    assert [c.head_dim for c in wide] == [16] and wide[0].hidden_size // 4 == 8
    windows = [v for v in allv if v.family == "mistral" and v.kind == "window"]
    assert [vs.variant_config(v).sliding_window for v in windows] == [vs.WINDOW] and vs.WINDOW < sw.L
    assert {v.label for v in allv if v.family == "gemma2" and v.kind == "soft-cap"} >= {
        "attn_logit_softcapping=2.0", "attn_logit_softcapping=None"}
    # a family that declares no attention option gets no variant (BLOOM: heads only)
    assert vs.variants("bloom") == []


def test_a_yarn_variants_parameters_come_from_transformers_own_lists():
    """YaRN's optional parameters each get a variant of their own (mscale with mscale_all_dim);
    its required ones (factor, original_max_position_embeddings) are in every YaRN variant."""
    yarn = [v.changes["rope_parameters"] for v in vs.variants("llama")
            if v.kind == "rope type" and v.changes["rope_parameters"]["rope_type"] == "yarn"]
    assert all({"factor", "original_max_position_embeddings"} <= set(p) for p in yarn)
    extra = {frozenset(p) - {"factor", "original_max_position_embeddings", "rope_type",
                             "rope_theta"} for p in yarn}
    assert {frozenset({"mscale", "mscale_all_dim"}), frozenset({"attention_factor"}),
            frozenset({"beta_fast"}), frozenset({"beta_slow"}), frozenset({"truncate"}),
            frozenset()} == extra


def _variant(family, label):
    return next(v for v in vs.variants(family) if v.label == label)


# a variant, the row whose disagreement it must be, and the torch side changed after the diff
# read the model (a forward pre-hook on the model): the option's own value, 1 % off
CORRUPT = [
    ("llama", "rope_parameters: rope_type=yarn, factor=4.0, original_max_position_embeddings=4, "
              "mscale=0.7, mscale_all_dim=0.5", "rotary_emb (cos, sin)",
     lambda m: setattr(m.rotary_emb, "attention_scaling", m.rotary_emb.attention_scaling * 1.01)),
    ("llama", "rope_parameters: rope_type=llama3, factor=4.0, original_max_position_embeddings=4, "
              "low_freq_factor=1.0, high_freq_factor=2.0", "rotary_emb (cos, sin)",
     lambda m: m.rotary_emb.inv_freq.mul_(1.01)),
    ("phi3", "rope_parameters: rope_type=longrope, original_max_position_embeddings=4, "
             "short_factor=[4 values], long_factor=[4 values]",
     "rotary_emb (cos, sin)",
     lambda m: setattr(m.rotary_emb, "attention_scaling", m.rotary_emb.attention_scaling * 1.01)),
    ("mistral", "sliding_window=3", "layers.0.self_attn",
     lambda m: setattr(m.config, "sliding_window", 2)),
    ("gemma2", "attn_logit_softcapping=2.0", "layers.0.self_attn",
     lambda m: setattr(m.layers[0].self_attn, "attn_logit_softcapping", 2.02)),
    ("gemma2", "query_pre_attn_scalar=16", "layers.0.self_attn",
     lambda m: setattr(m.layers[0].self_attn, "scaling", m.layers[0].self_attn.scaling * 1.01)),
    ("llama", "attention_bias=True", "layers.0.self_attn",
     lambda m: setattr(m.layers[0].self_attn.q_proj.bias, "data",      # a new tensor (k's
                       m.layers[0].self_attn.q_proj.bias + 1e-2)),          # softmax-invariant)
    ("llama", "num_key_value_heads=1", "layers.0.self_attn",
     lambda m: m.layers[0].self_attn.v_proj.weight.mul_(1.01)),
    ("granite", "attention_multiplier=0.5", "layers.0.self_attn",
     lambda m: setattr(m.layers[0].self_attn, "scaling", 0.505)),
]


@pytest.mark.parametrize("family, label, row, corrupt", CORRUPT,
                         ids=[f"{f}-{lab.split(':')[0]}-{i}" for i, (f, lab, _, _) in enumerate(CORRUPT)])
def test_a_variant_changed_after_it_was_read_is_that_rows_mismatch(family, label, row, corrupt):
    """The variant agrees as built; its option's value changed on the torch side once the model
    runs (after the diff read it) is the named row's MISMATCH, never an AGREE."""
    model = vs.build_variant(_variant(family, label))
    inputs = sw.text_inputs(model)
    assert compare_transformers_model(model, **inputs).ok
    def hook(module, args, kwargs):       # on the diff's float64 copy, once it runs
        with torch.no_grad():
            corrupt(module)
    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    report = compare_transformers_model(model, **inputs)
    handle.remove()
    assert report.verdict == "MISMATCH"
    assert report.first_disagreement.name == row, str(report)


@pytest.mark.variants
@VARIANTS
def test_every_variant_agrees_with_the_change_caught_or_is_refused_by_its_feature(rows):
    """No false verdict; an AGREE's change is caught in each diff run; a refusal names a
    feature of its option's kind, or is the refusal the family's own config gets (MPT's layer
    alone: its ALiBi comes from the model), word for word: a refusal for another feature would
    be a refusal naming the wrong feature."""
    assert [(r.family, r.label) for r in rows] == [(v.family, v.label) for v in vs.all_variants()]
    assert not [r for r in rows if r.false_verdict], [
        (r.family, r.label, r.verdicts, r.reason) for r in rows if r.false_verdict]
    for r in rows:
        if r.verdict == "AGREE":
            assert r.layer == "AGREE" and r.model in ("AGREE", "-"), r
            assert "+1e-06 caught" in r.reasons.get("model", "+1e-06 caught"), r
        elif r.verdict == "refused" and not re.search(FEATURE_WORDS[r.kind], r.short_reason):
            base = vs.sweep_variant(vs.Variant(r.family, r.kind, "its own config", {}))
            assert base.verdicts == r.verdicts and base.short_reason == r.short_reason, (r, base)
    assert sum(r.verdict == "AGREE" for r in rows) > len(rows) // 2


@pytest.mark.variants
@VARIANTS
def test_the_docs_table_is_this_variant_sweep(rows):
    table = vs.read_table(DOC.read_text())
    assert [t[:5] for t in table] == [(r.family, r.label, *r.verdicts) for r in rows]
    for t, r in zip(table, rows, strict=True):
        if r.verdict == "refused":
            assert t[5] == vs._cell(r.short_reason).replace("\\|", "|"), (t, r.short_reason)
    assert f"**{vs.counts_line(rows)}.**" in DOC.read_text()


def test_the_readme_counts_are_the_docs_table():
    text = DOC.read_text()
    line = re.search(r"\*\*(\d+ variants of .*?)\.\*\*", text)[1]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert line in readme, line
    table = vs.read_table(text)
    assert line.startswith(f"{len(table)} variants of {len({t[0] for t in table})} families")
    assert "(transformers_variants.md)" in (ROOT / "docs" / "transformers_sweep.md").read_text()
