"""The refusals and notes of the transformers diffs that no other test reads: the one-layer diff
(interop/transformers/layer_diff.py), the whole-model diff (model_diff.py), the kernel diff
(kernel_diff.py), the generate() replay (decode_diff.py) and ``diff --model`` (cli/
diff_transformers.py). Each names the argument or the layer and what is expected, before any
work; each note says what the verdict leaves out."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
require("transformers")

from attention_np.interop.transformers import compare_attention_kernels  # noqa: E402
from attention_np.interop.transformers import compare_transformers_attention as compare  # noqa: E402
from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import family_cases as cases  # noqa: E402
from attention_np.interop.transformers.decode_diff import replay_generate  # noqa: E402
from attention_np.interop.transformers.layer_reading import UnsupportedLayer  # noqa: E402
from attention_np.interop.transformers.model_diff import (  # noqa: E402
    attention_layers,
    compare_transformers_model,
)


@pytest.fixture(autouse=True)
def _quiet():
    import transformers
    transformers.logging.set_verbosity_error()


def test_the_layer_diff_names_what_is_not_a_layer_and_a_hidden_state_without_a_batch():
    with pytest.raises(TypeError, match=r"module must be an attention layer \(a torch.nn.Module\), "
                                        r"got ndarray"):
        compare(np.zeros(3), np.zeros((1, 2, 3)))
    module, inputs = cases.case("llama")
    x = inputs["hidden_states"]
    with pytest.raises(ValueError, match=re.escape(f"hidden_states must be (B, L, d_model), got shape "
                                                   f"{x[0].shape}")):
        compare(module, x[0])


@pytest.mark.parametrize("family, why", [("bert", "BertSelfAttention takes none"),
                                         ("llama", "LlamaAttention takes none"),
                                         ("t5", "T5Attention has one")])
def test_a_position_bias_is_refused_by_a_layer_that_takes_none_or_has_its_own_table(family, why):
    module, inputs = cases.case(family)
    with pytest.raises(ValueError, match="position_bias is for a T5 layer without its own bias "
                                         f"table; {why}$"):
        compare(module, inputs["hidden_states"], position_bias=np.zeros((1, 4, 6, 6)))


def test_a_position_bias_of_the_wrong_shape_names_the_shape_the_t5_layer_needs():
    module, inputs = cases.case("t5-cross")          # a T5 layer without a bias table of its own
    x, kv = inputs["hidden_states"], inputs["key_value_states"]
    S = kv.shape[1]
    with pytest.raises(ValueError, match=re.escape(f"position_bias must be (B or 1, h, L, S) = (2, 4, "
                                                   f"6, {S}), got (1, 3, 6, {S})")):
        compare(module, x, key_value_states=kv, position_bias=np.zeros((1, 3, 6, S)))


def test_hidden_states_not_on_the_grid_of_a_relative_position_table_are_refused_with_the_grid():
    model = fam.family_model("data2vec-vision")
    (_, module, spec), *_ = attention_layers(model)[0]
    H, W, cls = spec.relative_bias.height, spec.relative_bias.width, spec.relative_bias.cls
    d_model = 32
    with pytest.raises(ValueError, match=re.escape(
            f"hidden_states must be (B, {H * W + cls}, d_model): {type(module).__name__} has a "
            f"relative position bias table for a {H}x{W} grid of patches and a class token, got "
            f"shape (2, 3, {d_model})")):
        compare(module, np.zeros((2, 3, d_model)))


def test_an_alibi_layer_is_sent_to_the_whole_model_diff():
    from attention_np.interop.transformers.sweep import build
    model = build("bloom")
    (_, module, _), *_ = attention_layers(model)[0]
    with pytest.raises(UnsupportedLayer, match="BloomAttention: its ALiBi bias \\(or residual\\) comes "
                                               "from the model's forward, not the layer: diff the "
                                               "whole model with compare_transformers_model"):
        compare(module, np.zeros((1, 2, 32)))


def test_eager_says_its_float32_casts_ran_in_float64():
    module, inputs = cases.case("llama")
    report = compare(module, **{**inputs, "attn_implementation": "eager"})
    assert report.ok, str(report)
    assert report.notes[-1] == ("eager: the float32 casts of the family's eager attention "
                                "(softmax(..., dtype=torch.float32)) ran in float64, so the verdict "
                                "is the one of sdpa and of compare_transformers_model")


def test_a_prompt_beside_a_filled_cache_is_refused():
    model = fam.family_model("llama")
    inputs = fam.model_inputs("llama", model)
    with torch.no_grad():
        cache = model(input_ids=inputs["input_ids"][:, :4], use_cache=True).past_key_values
    with pytest.raises(ValueError, match=r"got prompt= and a filled cache \(cache=\): pass one, the "
                                         r"prompt \(the float64 copy fills its own cache from it\) "
                                         r"or its cache"):
        compare_transformers_model(model, prompt={"input_ids": inputs["input_ids"][:, :4]},
                                   input_ids=inputs["input_ids"][:, 4:], past_key_values=cache)


@pytest.mark.parametrize("family, why", [
    ("albert", "AlbertModel.forward takes no cache: a prompt has nothing to fill"),
    ("bert", "BertModel returned no cache for the prompt (use_cache=True): nothing to continue "
             "from")])
def test_a_prompt_a_model_cannot_continue_from_is_its_forward_refused(family, why):
    model = fam.family_model(family)
    ids = fam.model_inputs(family, model)["input_ids"]
    report = compare_transformers_model(model, prompt={"input_ids": ids[:, :4]},
                                        input_ids=ids[:, 4:])
    assert report.refused == [("forward", why)] and not report.layers, str(report)
    assert report.verdict == "INCOMPLETE"


def test_a_model_whose_layers_do_not_call_the_attention_interface_gets_a_note():
    model = fam.family_model("falcon")
    report = compare_attention_kernels(model, **fam.model_inputs("falcon", model))
    assert report.layers == [] and report.notes == ["no layer called the attention interface"]


@pytest.mark.parametrize("bad", [-1, 0, True])
def test_replay_generate_refuses_a_count_of_new_tokens_that_is_not_a_positive_int(bad):
    model = cases.tiny_model("gpt2", causal_lm=True)
    with pytest.raises(ValueError, match=f"max_new_tokens must be a positive int, got {bad}$"):
        replay_generate(model, np.array([[3, 5, 7, 9]]), max_new_tokens=bad)


def test_diff_model_refuses_a_checkpoint_it_makes_no_inputs_for_and_cached_without_a_decoder(
        tmp_path, capsys):
    from attention_np.cli import main
    model = fam.family_model("whisper")
    model.save_pretrained(tmp_path / "whisper")
    assert main(["diff", "--model", str(tmp_path / "whisper")]) == 2
    err = capsys.readouterr().err
    assert (f"error: --model '{tmp_path / 'whisper'}': WhisperModel takes 'input_features'; only "
            "token ids and pixels are made up here (call compare_transformers_model with your "
            "own inputs)") in err
    for family, why in (("vit", "ViTModel is not a decoder continuing from a cache (no input ids)"),
                        ("t5", "T5Model is not a decoder continuing from a cache (an encoder-decoder "
                               "(its cache: EncoderDecoderCache))")):
        assert main(["diff", "--model", family, "--cached"]) == 2
        assert capsys.readouterr().err == f"error: --cached: {why}\n"
