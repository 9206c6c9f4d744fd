"""A forward continuing from a filled KV cache, and generate() step by step, diffed whole
(interop/transformers/cache_replay.py, model_diff.py, generate_diff.py): for decoder families of
every kind of position and attention (RoPE with positions, absolute positions, windows, GQA and
MQA, soft-caps, biases, QK-norm, partial and interleaved rotary, sinks), in float64 and float32,
each agrees with left padding and explicit positions, 1e-6 added to one layer's output is caught
at that layer in the cached call, a corrupted cache is caught in its cache row, and each cache
kind that cannot be replayed is refused by its class name. The models are built here from
explicit small configs."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers.family_cases import randomize  # noqa: E402
from attention_np.interop.transformers.generate_diff import compare_transformers_generate  # noqa: E402
from attention_np.interop.transformers.model_diff import compare_transformers_model  # noqa: E402

CHANGE = 1e-6
B, L, NEW = 2, 7, 2                 # prompts of L - NEW tokens, then NEW tokens on the cache
SMALL = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=64)

# family -> (config class, model class, the config's options beyond SMALL, the attention layer
# of the second block); each a kind the reader handles: positions (RoPE of each layout, or
# absolute), windows, key/value heads, soft-caps, biases, QK-norm, sinks
FAMILIES = {
    "llama-gqa": ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 2}),
    "llama-mqa": ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 1}),
    "llama-bias-linear-rope": ("LlamaConfig", "LlamaForCausalLM", {
        "num_key_value_heads": 2, "attention_bias": True,
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}}),
    "mistral-window": ("MistralConfig", "MistralForCausalLM",
                       {"num_key_value_heads": 2, "sliding_window": 3}),
    "qwen2-bias": ("Qwen2Config", "Qwen2ForCausalLM", {"num_key_value_heads": 2}),
    "qwen3-qk-norm": ("Qwen3Config", "Qwen3ForCausalLM", {"num_key_value_heads": 2,
                                                           "head_dim": 8}),
    "gemma2-softcap-window": ("Gemma2Config", "Gemma2ForCausalLM", {
        "num_key_value_heads": 2, "head_dim": 8, "sliding_window": 3,
        "attn_logit_softcapping": 5.0, "final_logit_softcapping": None}),
    "phi-partial-rotary": ("PhiConfig", "PhiForCausalLM", {"partial_rotary_factor": 0.5}),
    "gpt_neox-partial-rotary": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"rotary_pct": 0.5}),
    "cohere-interleaved": ("CohereConfig", "CohereForCausalLM", {"num_key_value_heads": 2}),
    "gpt2-absolute": ("GPT2Config", "GPT2LMHeadModel", {}),
    "bloom-alibi-causal-by-mask": ("BloomConfig", "BloomForCausalLM", {}),
}
GPT2 = {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64, "vocab_size": 99,
        "bos_token_id": 1, "eos_token_id": 2}


def _model(family: str, dtype):
    config, model, extra = FAMILIES[family]
    options = GPT2 if model == "GPT2LMHeadModel" else {**SMALL, **extra}
    cfg = getattr(transformers, config)(**options)
    return randomize(getattr(transformers, model)(cfg), 1).to(dtype).eval()


def _layers(model):
    """The names of the model's attention layers, in order."""
    return [n for n, m in model.named_modules()
            if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx")]


def _batch(padded: bool):
    """ids (B, L), the mask of prompt and new tokens (left padding on row 0 with ``padded``)
    and explicit positions (each row counted from its first real token)."""
    ids = torch.from_numpy(np.random.default_rng(0).integers(4, 99, (B, L)))
    mask = torch.ones((B, L), dtype=torch.long)
    if padded:
        mask[0, :2] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, positions


def _filled_cache(model, ids, mask, positions):
    with torch.no_grad():
        return model(input_ids=ids[:, :-NEW], attention_mask=mask[:, :-NEW],
                     position_ids=positions[:, :-NEW], use_cache=True).past_key_values


def _continue(model, ids, mask, positions, cache=None):
    kw = dict(input_ids=ids[:, -NEW:], attention_mask=mask, position_ids=positions[:, -NEW:])
    if cache is None:
        kw["prompt"] = dict(input_ids=ids[:, :-NEW], attention_mask=mask[:, :-NEW],
                            position_ids=positions[:, :-NEW])
    else:
        kw["past_key_values"] = cache
    return compare_transformers_model(model, **kw)


def _add_change(module):
    def add(mod, args, output):
        return (output[0] + CHANGE,) + tuple(output[1:]) if isinstance(output, tuple) \
            else output + CHANGE
    return module.register_forward_hook(add)


def _only_the_change(row) -> bool:
    bad = [c for c in row.checks if not c.ok]
    return [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol


# the models whose own float64 eager forward is NaN at padded rows (measured; see below)
NAN_OF_THEIR_OWN = {("gemma2-softcap-window", torch.float64, True),
                    ("bloom-alibi-causal-by-mask", torch.float64, True)}
CASES = [(f, d, p) for f in FAMILIES for d in (torch.float64, torch.float32)
         for p in (False, True)]


@pytest.mark.parametrize("family, dtype, padded", CASES,
                         ids=[f"{f}-{str(d)[6:]}-{'padded' if p else 'full'}" for f, d, p in CASES])
def test_a_forward_on_the_models_own_cache_agrees_and_the_change_is_caught_there(family, dtype,
                                                                                 padded):
    """The model's filled cache passed as past_key_values: every new-token row agrees (before
    this, a NumPy broadcasting error); 1e-6 on the second layer's output is that row's only
    disagreement; the model's cache is left as it was."""
    model = _model(family, dtype)
    ids, mask, positions = _batch(padded)
    cache = _filled_cache(model, ids, mask, positions)
    held = [layer.keys.clone() for layer in cache.layers]
    report = _continue(model, ids, mask, positions, cache)
    if any(torch.isnan(layer.values).any() for layer in cache.layers):
        # measured (Gemma 2 and BLOOM in float64, padded): transformers' own eager layers give
        # NaN at the padded prompt rows (every key masked; their softmax is float32, where
        # float64's minimum is -inf), and the cache carries it to the new tokens (0 * NaN):
        # the model's own logits are NaN; a MISMATCH, the cause said
        assert (family, dtype, padded) in NAN_OF_THEIR_OWN
        assert report.verdict == "MISMATCH" and "holds NaN" in str(report), str(report)
        return
    assert report.verdict == "AGREE", str(report)
    assert len(report.attention) == 2 and not report.refused
    assert all(r.checks and max(c.err for c in r.checks) < 1e-12 for r in report.attention)
    assert "as given" in str(report)
    assert [torch.equal(a, layer.keys) for a, layer in zip(held, cache.layers, strict=True)] == \
        [True, True]
    where = _layers(model)[1]
    handle = _add_change(model.get_submodule(where))
    try:
        changed = _continue(model, ids, mask, positions, cache)
    finally:
        handle.remove()
    assert changed.first_disagreement.name == where, str(changed)
    assert _only_the_change(changed.first_disagreement)
    assert all(r.ok for r in changed.layers if r is not changed.first_disagreement)


@pytest.mark.parametrize("family, dtype, padded", CASES,
                         ids=[f"{f}-{str(d)[6:]}-{'padded' if p else 'full'}" for f, d, p in CASES])
def test_a_prompt_then_its_continuation_agree_with_the_cache_recomputed(family, dtype, padded):
    """prompt=: the prompt's calls, each layer's cached keys and values against ours
    recomputed from the prompt, and the new tokens' calls, all rows agree; 1e-6 on the first
    layer's output is caught in both its calls and nowhere else."""
    model = _model(family, dtype)
    ids, mask, positions = _batch(padded)
    report = _continue(model, ids, mask, positions)
    assert report.verdict == "AGREE", str(report)
    names = [r.name for r in report.layers if r.kind != "rotary"]
    first, second = _layers(model)
    assert names == [first, second, f"{first}#1 (cache)", f"{first}#1", f"{second}#1 (cache)",
                     f"{second}#1"]
    assert max(c.err for r in report.layers if r.kind == "cache" for c in r.checks) < 1e-12
    handle = _add_change(model.get_submodule(first))
    try:
        changed = _continue(model, ids, mask, positions)
    finally:
        handle.remove()
    bad = [r for r in changed.layers if not r.ok]
    assert [r.name for r in bad] == [first, f"{first}#1"], str(changed)
    assert all(_only_the_change(r) for r in bad)


@pytest.mark.parametrize("family", ["llama-gqa", "mistral-window", "gpt2-absolute"])
def test_a_cache_corrupted_in_the_prompt_is_its_cache_rows_mismatch(family):
    """The first layer's keys off by 1e-6 while the prompt runs (k_proj, or GPT-2's fused
    c_attn): only that layer's cache row disagrees (the new tokens attend the cache as it is)."""
    model = _model(family, torch.float64)
    ids, mask, positions = _batch(True)
    first = _layers(model)[0]
    proj = model.get_submodule(first + (".c_attn" if "gpt2" in family else ".k_proj"))
    calls = []

    def corrupt(mod, args, output):
        calls.append(1)
        return output + CHANGE if len(calls) == 1 else output    # the prompt's call only
    proj.register_forward_hook(corrupt)
    report = _continue(model, ids, mask, positions)
    # (GPT-2's c_attn gives the queries and values too: the prompt's own row disagrees as well)
    want = ([first] if "gpt2" in family else []) + [f"{first}#1 (cache)"]
    assert [r.name for r in report.layers if not r.ok] == want, str(report)


@pytest.mark.parametrize("family", ["llama-gqa", "mistral-window", "gemma2-softcap-window",
                                    "qwen3-qk-norm", "gpt2-absolute"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_generate_agrees_step_by_step_with_left_padding(family, dtype):
    """Greedy generate() of 3 tokens on a left-padded batch: every layer's 3 calls (the prompt,
    then one token each on the cache), its cached keys and values, all agree; the tokens are
    the model's own; 1e-6 on the second layer is caught at each of its steps."""
    model = _model(family, dtype)
    ids, mask, _ = _batch(True)
    report = compare_transformers_generate(model, ids[:, :5], attention_mask=mask[:, :5],
                                           max_new_tokens=3)
    if family == "gemma2-softcap-window" and dtype == torch.float64:
        # the model's own generate() is NaN on the padded row (see above): other tokens
        assert [r.name for r in report.layers if not r.ok] == ["generated tokens"], str(report)
        return
    assert report.verdict == "AGREE", str(report)
    first, second = _layers(model)
    assert [r.name for r in report.attention] == [first, second, f"{first}#1", f"{second}#1",
                                                  f"{first}#2", f"{second}#2"]
    assert sum(r.kind == "cache" for r in report.layers) == 4
    tokens = next(r for r in report.layers if r.kind == "tokens")
    assert tokens.ok and tokens.checks[0].err == 0
    handle = _add_change(model.get_submodule(second))
    try:
        changed = compare_transformers_generate(model, ids[:, :5], attention_mask=mask[:, :5],
                                                max_new_tokens=3)
    finally:
        handle.remove()
    bad = [r.name for r in changed.layers if not r.ok]
    assert bad == [second, f"{second}#1", f"{second}#2"], str(changed)


def test_generate_reports_tokens_that_differ_from_the_models():
    """The model's own generate() choosing other tokens than its float64 copy (its logits
    negated in float32 only, so the copy is untouched): the tokens row is the MISMATCH."""
    model = _model("llama-gqa", torch.float32)
    ids, mask, _ = _batch(False)
    model.lm_head.register_forward_hook(
        lambda mod, args, out: -out if out.dtype == torch.float32 else out)
    report = compare_transformers_generate(model, ids, attention_mask=mask, max_new_tokens=2)
    assert report.verdict == "MISMATCH" and report.first_disagreement.name == "generated tokens"
    assert all(r.ok for r in report.attention)


# the caches that cannot be replayed, each refused by its class name
def _static(model, ids, mask, positions):
    cache = transformers.StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad():
        model(input_ids=ids[:, :-NEW], attention_mask=mask[:, :-NEW], cache=cache, use_cache=True)
    return cache


def _offloaded(model, ids, mask, positions):
    cache = _filled_cache(model, ids, mask, positions)
    cache.offloading = True                 # (a CPU-only torch cannot build one: no stream)
    return cache


def _encoder_decoder(model, ids, mask, positions):
    self_cache = _filled_cache(model, ids, mask, positions)
    return transformers.EncoderDecoderCache(self_cache, transformers.DynamicCache())


def _legacy(model, ids, mask, positions):
    cache = _filled_cache(model, ids, mask, positions)
    return tuple((layer.keys, layer.values) for layer in cache.layers)


REFUSED = {"StaticCache": (_static, "StaticLayer"), "offloaded": (_offloaded, "offloading"),
           "EncoderDecoderCache": (_encoder_decoder, "EncoderDecoderCache"),
           "tuple": (_legacy, "tuple")}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_cache_that_cannot_be_replayed_is_refused_by_name(kind):
    model = _model("llama-gqa", torch.float64)
    ids, mask, positions = _batch(True)
    make, named = REFUSED[kind]
    report = _continue(model, ids, mask, positions, make(model, ids, mask, positions))
    assert report.verdict == "INCOMPLETE" and not report.layers, str(report)
    (where, why), = report.refused
    assert where == "past_key_values" and named in why and "supported" in why, why


def test_generate_with_a_static_cache_is_refused_by_name():
    model = _model("llama-gqa", torch.float64)
    model.generation_config.cache_implementation = "static"
    ids, mask, _ = _batch(True)
    report = compare_transformers_generate(model, ids[:, :5], attention_mask=mask[:, :5],
                                           max_new_tokens=2)
    assert report.verdict == "INCOMPLETE" and report.refused, str(report)
    assert all("StaticLayer" in why for _, why in report.refused)
    assert not [r for r in report.attention if r.name.endswith("#1")]


def test_bad_arguments_are_named():
    model = _model("llama-gqa", torch.float64)
    ids, mask, positions = _batch(False)
    cache = _filled_cache(model, ids, mask, positions)
    with pytest.raises(ValueError, match="prompt= and a filled cache"):
        compare_transformers_model(model, input_ids=ids[:, -NEW:], past_key_values=cache,
                                   prompt={"input_ids": ids[:, :-NEW]})
    with pytest.raises(TypeError, match="prompt must be a dict"):
        compare_transformers_model(model, input_ids=ids, prompt=ids)
    with pytest.raises(ValueError, match="input_ids must be"):
        compare_transformers_generate(model, ids[0])
    with pytest.raises(ValueError, match="attention_mask must be"):
        compare_transformers_generate(model, ids, attention_mask=mask[:, :3])
    with pytest.raises(TypeError, match="generate"):
        compare_transformers_generate(torch.nn.Linear(2, 2), ids)


ROPE_TYPES = {
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0,
             "original_max_position_embeddings": 8},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8,
               "rope_theta": 10000.0},
}


@pytest.mark.parametrize("rope_type", sorted(ROPE_TYPES))
def test_rope_scalings_continue_past_their_original_length(rope_type):
    """A Llama of max_position_embeddings 8 (``"dynamic"`` recomputes its frequencies past it):
    a 10-token left-padded prompt then 2 tokens on its cache, and 5 tokens of generate() after
    6, agree; the cached keys keep the rotation of their step (the rows compare them so)."""
    cfg = transformers.LlamaConfig(**{**SMALL, "max_position_embeddings": 8},
                                   num_key_value_heads=2, rope_parameters=ROPE_TYPES[rope_type])
    model = randomize(transformers.LlamaForCausalLM(cfg), 1).eval()
    ids = torch.from_numpy(np.random.default_rng(0).integers(4, 99, (B, 12)))
    mask = torch.ones((B, 12), dtype=torch.long)
    mask[0, :3] = 0
    report = compare_transformers_model(model, input_ids=ids[:, 10:], attention_mask=mask,
                                        prompt=dict(input_ids=ids[:, :10],
                                                    attention_mask=mask[:, :10]))
    assert report.verdict == "AGREE" and sum(r.kind == "cache" for r in report.layers) == 2, \
        str(report)
    report = compare_transformers_generate(model, ids[:, :6], attention_mask=mask[:, :6],
                                           max_new_tokens=5)
    assert report.verdict == "AGREE" and len(report.attention) == 10, str(report)
