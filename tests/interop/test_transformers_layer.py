"""attention_np.interop.transformers: every family's attention layer diffed in one call
(float64, random weights and upstream gradients), the model's own masks, and the traps."""

from __future__ import annotations

import copy
import re
import sys

import numpy as np
import pytest

from attention_np.interop.transformers import family_cases as cases
from attention_np.interop.transformers import layer_diff as itf
from attention_np.interop.transformers.layer_diff import build_mask
from attention_np.interop.transformers.layer_reading import params_from_transformers, sliding_window
from tests.helpers import require

torch = require("torch")
require("transformers")

TIGHT = 1e-12            # float64 rounding, relative to max(1, max|reference|)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    import transformers
    transformers.logging.set_verbosity_error()


def _assert_tight(report):
    assert report.ok, str(report)
    for c in report.checks:          # the float32 rule: inv_freq against transformers' buffer
        assert c.rule == "float32" or c.err <= TIGHT * max(1.0, c.size), (c.name, c.err, c.size)


# what each family's report must contain: a gradient for every parameter the layer has
ALL_BIASES = {"dW_q", "db_q", "dW_k", "db_k", "dW_v", "db_v", "dW_o", "db_o"}
EXPECTED = {
    "bert": {"dW_q", "db_q", "dW_k", "db_k", "dW_v", "db_v"},           # no W^O in BertSelfAttention
    "llama": {"dW_q", "dW_k", "dW_v", "dW_o"},                           # no biases
    "mistral": {"dW_q", "dW_k", "dW_v", "dW_o"},
    "qwen2": {"dW_q", "db_q", "dW_k", "db_k", "dW_v", "db_v", "dW_o"},  # q/k/v biases, o none
    "t5": {"dW_q", "dW_k", "dW_v", "dW_o", "dbias_table"},             # no biases; the table
    "t5-decoder": {"dW_q", "dW_k", "dW_v", "dW_o", "dbias_table"},
    "t5-cross": {"dW_q", "dW_k", "dW_v", "dW_o"},                        # no table in cross
    "qwen3": ALL_BIASES | {"dq_norm", "dk_norm"},                        # the QK-norm weights
    "gemma2": {"dW_q", "dW_k", "dW_v", "dW_o"},
    "gemma2-global": {"dW_q", "dW_k", "dW_v", "dW_o"},
    "gemma3": {"dW_q", "dW_k", "dW_v", "dW_o", "dq_norm", "dk_norm"},
    "gemma3-global": {"dW_q", "dW_k", "dW_v", "dW_o", "dq_norm", "dk_norm"},
    "gpt_oss": ALL_BIASES | {"dsinks"},                                  # one sink logit per head
    "gpt_oss-global": ALL_BIASES | {"dsinks"},
}
ALL = ALL_BIASES
# the models whose layers rotate q and k (RoPE): their reports also check inv_freq and attn_factor
ROTARY = {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gpt_oss"}


@pytest.mark.parametrize("family", cases.FAMILIES)
def test_every_family_forward_and_every_gradient_agree_to_float64_rounding(family):
    module, inputs = cases.case(family, seed=1)
    report = itf.compare_transformers_attention(module, **inputs, seed=2)
    _assert_tight(report)
    names = {c.name for c in report.checks}
    cross = family.endswith("-cross")
    inputs_grads = {"out", "dhidden_states"} | ({"dkey_value"} if cross else set())
    rope = {"inv_freq rel", "attn_factor"} if cases.MODELS.get(family, family) in ROTARY else set()
    assert names == inputs_grads | EXPECTED.get(family, ALL) | rope
    assert not report.notes                      # no fully masked row, no float32 softmax


def test_params_read_gqa_free_head_dim_and_gpt2_packed_conv1d():
    llama, _ = cases.case("llama")
    params, spec = params_from_transformers(llama)
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim) == (4, 2, 12)
    assert params["W_q"].shape == (32, 48) and params["W_k"].shape == (32, 24)
    assert params["W_o"].shape == (48, 32)
    np.testing.assert_array_equal(params["W_k"], llama.k_proj.weight.detach().numpy().T)
    gpt2, _ = cases.case("gpt2")
    params, spec = params_from_transformers(gpt2)
    packed = gpt2.c_attn.weight.detach().numpy()                   # (E, 3E), x @ W + b
    np.testing.assert_array_equal(np.concatenate([params[n] for n in ("W_q", "W_k", "W_v")], 1),
                                  packed)
    assert spec.is_causal and spec.scale == 8 ** -0.5            # head_dim 32 / 4


def test_gpt2_cross_attention_reads_q_attn_and_the_packed_key_value_conv1d():
    cross, inputs = cases.case("gpt2-cross")
    params, spec = params_from_transformers(cross)
    assert not spec.is_causal and "key_value_states" in inputs
    np.testing.assert_array_equal(params["W_q"], cross.q_attn.weight.detach().numpy())
    packed = cross.c_attn.weight.detach().numpy()                  # (E, 2E): [k | v]
    assert packed.shape == (32, 64)
    np.testing.assert_array_equal(np.concatenate([params["W_k"], params["W_v"]], 1), packed)
    np.testing.assert_array_equal(np.concatenate([params["b_k"], params["b_v"]]),
                                  cross.c_attn.bias.detach().numpy())
    with pytest.raises(ValueError, match=r"is_cross_attention=True\) needs key_value_states"):
        itf.compare_transformers_attention(cross, inputs["hidden_states"])


def test_the_original_module_is_left_untouched():
    module, inputs = cases.case("qwen2")
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    itf.compare_transformers_attention(module, **inputs)
    for n, p in module.named_parameters():
        assert p.dtype == torch.float32 and p.grad is None
        assert torch.equal(p, before[n])
    assert module.config._attn_implementation == "sdpa"


def _masks_the_model_builds(model, layer, input_ids, attention_mask):
    """The 4-D mask the full model hands its attention layer (eager: float, finfo.min)."""
    seen = {}

    def hook(mod, args, kwargs):
        seen["mask"] = kwargs["attention_mask"]

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    with torch.no_grad():
        model(input_ids=torch.tensor(input_ids), attention_mask=torch.tensor(attention_mask))
    handle.remove()
    m = seen["mask"]
    return m.numpy() if m.dtype == torch.bool else (m == 0).numpy()


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama", "mistral", "qwen2", "qwen3",
                                    "gemma2", "gemma2-global", "gemma3", "gemma3-global",
                                    "gpt_oss", "gpt_oss-global"])
def test_build_mask_is_the_mask_the_model_builds_padding_causal_and_window(family):
    model = cases.tiny_model(cases.MODELS.get(family, family), attn_implementation="eager")
    if not family.startswith("gpt_oss"):           # gpt-oss's experts (grouped_mm) take no float64
        model = model.double()
    layer = cases.attention_layer(family, model)
    B, L = 2, 6
    ids = np.arange(1, 1 + B * L).reshape(B, L) % 50 + 1
    pad = np.ones((B, L), dtype=np.int64)
    pad[1, -2:] = 0                                   # right padding: no row fully masked
    theirs = _masks_the_model_builds(model, layer, ids, pad)
    ours = build_mask(itf.layer_spec(layer), B, L, L, pad)
    np.testing.assert_array_equal(np.broadcast_to(theirs, ours.shape), ours)
    if itf.layer_spec(layer).attention.window is not None:   # the window removes keys causal keeps
        causal = np.tril(np.ones((L, L), dtype=bool))
        assert (ours[0, 0] != causal).any() and not (ours[0, 0] & ~causal).any()


def test_qwen3_and_gemma_read_their_qk_norm_soft_cap_scale_window_and_rope_theta():
    """What the recent layers add is read, and each changes the output (else a diff that
    agrees would not show it was read)."""
    from attention_np.compose.mha import mha_forward
    from attention_np.variants.spec import AttentionSpec, RoPE
    specs = {f: itf.layer_spec(cases.case(f)[0]) for f in
             ("qwen3", "gemma2", "gemma2-global", "gemma3", "gemma3-global")}
    has_norm = {f: "q_norm" in params_from_transformers(cases.case(f)[0])[0] for f in specs}
    assert has_norm["qwen3"] and specs["qwen3"].attention.qk_norm_eps == 1e-6
    assert specs["qwen3"].attention.softcap is None
    assert specs["gemma2"].attention.softcap == cases.SOFTCAP and not has_norm["gemma2"]
    for f in ("gemma2", "gemma3"):                       # query_pre_attn_scalar, not head_dim
        assert specs[f].scale == cases.PRE_ATTN ** -0.5 != 12 ** -0.5
        assert specs[f].attention.window == (cases.WINDOW - 1, 0)          # W counts the query
        assert sliding_window(specs[f]) == cases.WINDOW
        assert specs[f + "-global"].attention.window is None
    # Gemma 3: RoPE theta per layer type (rope_local_base_freq for the sliding layers)
    assert (specs["gemma3"].attention.rope.theta, specs["gemma3-global"].attention.rope.theta) == \
        (1e4, 1e6)
    gemma3, _ = cases.case("gemma3")
    params, _ = params_from_transformers(gemma3)     # Gemma3RMSNorm multiplies by (1 + w)
    np.testing.assert_array_equal(params["q_norm"], 1 + gemma3.q_norm.weight.detach().double().numpy())
    # the soft-cap of the case bends the scores: without it the output moves
    gemma2, inputs = cases.case("gemma2")
    params, spec = params_from_transformers(gemma2)
    x = inputs["hidden_states"]
    plain_spec = AttentionSpec(rope=RoPE(theta=spec.attention.rope.theta, layout="half"))  # GQA: W_k's
    kw = dict(num_heads=4, scale=spec.scale, is_causal=True)
    capped, _ = mha_forward(x, x, x, params, spec=plain_spec.replace(softcap=spec.attention.softcap),
                            **kw)
    plain, _ = mha_forward(x, x, x, params, spec=plain_spec, **kw)
    assert np.abs(capped - plain).max() > 1e-2


def test_gemma2_and_gpt_oss_with_sdpa_run_what_the_model_diff_runs_and_say_so():
    """sdpa refuses Gemma 2's soft-cap and drops gpt-oss's sinks: asked for sdpa, the layer diff
    runs what compare_transformers_model runs (the float64 eager, eager), agrees, and says so;
    the module itself keeps its implementation."""
    module, inputs = cases.case("gemma2")
    inputs["attn_implementation"] = "sdpa"
    report = itf.compare_transformers_attention(module, **inputs)
    _assert_tight(report)
    assert "(attention_np_eager_float64)" in report.module
    assert any("soft-cap (2): transformers' sdpa refuses it" in n for n in report.notes)
    module, inputs = cases.case("gpt_oss")
    inputs["attn_implementation"] = "sdpa"
    report = itf.compare_transformers_attention(module, **inputs)
    _assert_tight(report)
    assert "(eager)" in report.module
    assert any("sinks: transformers' 'sdpa' drops them" in n for n in report.notes)
    assert module.config._attn_implementation == "eager"        # the module is not changed


def test_eager_float64_attention_is_gemma2_eager_attention_but_for_the_softmax_dtype():
    """The Gemma 2 reference: transformers' own eager function on float32 inputs (where its
    float32 softmax is the input's dtype) gives the same numbers; on float64 inputs only the
    float32 softmax separates them."""
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    from attention_np.interop.transformers.recent import eager_float64_attention
    module, _ = cases.case("gemma2")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, generator=g) * 2 for s in ((2, 4, 5, 12), (2, 2, 5, 12),
                                                           (2, 2, 5, 12)))
    mask = torch.zeros(2, 1, 5, 5).masked_fill(torch.rand(2, 1, 5, 5, generator=g) < 0.3, -1e9)
    kw = dict(scaling=0.25, softcap=cases.SOFTCAP)
    for dtype, tol in ((torch.float32, 0.0), (torch.float64, 1e-5)):   # float32: the same ops
        args = [t.to(dtype) for t in (q, k, v, mask)]
        theirs, w_theirs = eager_attention_forward(module, *args, **kw)
        ours, w_ours = eager_float64_attention(module, *args, **kw)
        assert theirs.shape == ours.shape == (2, 5, 4, 12) and ours.dtype == dtype
        err = (theirs - ours).abs().max().item()
        assert err <= tol
        if dtype == torch.float64:              # theirs float32-accurate: not float64 rounding
            assert err > 1e-12
    plain, _ = eager_float64_attention(module, *args, scaling=0.25)
    assert (plain - ours).abs().max().item() > 1e-2    # the soft-cap acts on these scores


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_the_float64_norm_of_the_copy_is_the_layers_own_norm_on_float32_inputs(family):
    """The copy's q_norm/k_norm are replaced (transformers' cast to float32): the replacement
    must be the layer's formula, w (Qwen3) or 1 + w (Gemma 3), else both sides of the diff could
    agree on a wrong norm."""
    from attention_np.interop.transformers.recent import norm_in_input_dtype
    module, _ = cases.case(family)
    spec = itf.layer_spec(module)
    x = torch.randn((2, 4, 6, 12), generator=torch.Generator().manual_seed(0))   # float32
    for norm in (module.q_norm, module.k_norm):
        with torch.no_grad():
            theirs = norm(x)
            offset = {"qwen3": 0.0, "gemma3": 1.0}[family]
            ours = norm_in_input_dtype(norm, "rms", offset, spec.attention.qk_norm_eps)(x)
        assert ours.dtype == torch.float32
        assert (theirs - ours).abs().max().item() <= 1e-6 * theirs.abs().max().item()


def test_gpt_oss_reads_sinks_and_the_half_angle_rope():
    module, _ = cases.case("gpt_oss")
    params, spec = params_from_transformers(module)
    np.testing.assert_array_equal(params["sinks"], module.sinks.detach().double().numpy())
    assert params["sinks"].shape == (4,) and spec.sinks
    assert spec.attention.window == (cases.WINDOW - 1, 0)
    assert itf.layer_spec(cases.case("gpt_oss-global")[0]).attention.window is None


def test_unsupported_module_names_the_supported_layers():
    with pytest.raises(TypeError, match="Linear is not an attention layer attention_np "
                                        "can read: no q, k, v projections"):
        itf.compare_transformers_attention(torch.nn.Linear(8, 8), np.zeros((1, 2, 8)))
    # torch's MultiheadAttention is read (batch first); time first is refused by that name
    with pytest.raises(TypeError, match=r"MultiheadAttention: time-first inputs \(L, B, E\)"):
        itf.compare_transformers_attention(torch.nn.MultiheadAttention(8, 2), np.zeros((1, 2, 8)))
    gpt2 = cases.tiny_model("gpt2")
    with pytest.raises(ValueError, match=r"key_value_states \(cross-attention\) needs a layer "
                                         r"whose forward takes key_value_states.*GPT2Attention"):
        itf.compare_transformers_attention(gpt2.h[0].attn, np.zeros((1, 2, 32)),
                                           key_value_states=np.zeros((1, 3, 32)))
    with pytest.raises(ValueError, match=r"attention_mask must be \(B, S\) = \(1, 2\)"):
        itf.compare_transformers_attention(gpt2.h[0].attn, np.zeros((1, 2, 32)),
                                           attention_mask=np.ones((1, 3)))
    llama, _ = cases.case("llama")
    with pytest.raises(ValueError, match=r"position_ids must be \(B, L\) = \(1, 2\) integers"):
        itf.compare_transformers_attention(llama, np.zeros((1, 2, 32)), position_ids=np.arange(3))
    bart, _ = cases.case("bart-cross")
    with pytest.raises(ValueError, match=r"key_value_states must be \(B, S, d_model\) with B = 1"):
        itf.compare_transformers_attention(bart, np.zeros((1, 2, 32)),
                                           key_value_states=np.zeros((2, 3, 32)))
    with pytest.raises(ValueError, match=r"attn_implementation must be one of \('sdpa', 'eager', "
                                         r"'attention_np_eager_float64', None\).*flex_attention"
                                         r".*got 'nonsense'"):
        itf.compare_transformers_attention(gpt2.h[0].attn, np.zeros((1, 2, 32)),
                                           attn_implementation="nonsense")
    # a d_model that is not the layer's: named before torch's matmul fails
    with pytest.raises(ValueError, match=r"hidden_states must be \(B, L, d_model\) with "
                                         r"d_model = 32 \(the layer's\), got shape \(1, 2, 16\)"):
        itf.compare_transformers_attention(gpt2.h[0].attn, np.zeros((1, 2, 16)))
    with pytest.raises(ValueError, match=r"key_value_states .* d_model = 32 \(the layer's\), "
                                         r"got shape \(1, 3, 16\)"):
        itf.compare_transformers_attention(bart, np.zeros((1, 2, 32)),
                                           key_value_states=np.zeros((1, 3, 16)))


def test_a_bidirectional_gemma_is_refused_not_diffed_with_a_causal_mask():
    import transformers
    for Config, Model in ((transformers.Gemma3TextConfig, transformers.Gemma3TextModel),
                          (transformers.Gemma2Config, transformers.Gemma2Model)):
        cfg = Config(vocab_size=8, hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                     use_bidirectional_attention=True)
        layer = Model(cfg).layers[0].self_attn
        assert layer.is_causal is False                  # transformers builds no causal mask
        with pytest.raises(ValueError, match=f"{type(layer).__name__} is bidirectional"):
            itf.compare_transformers_attention(layer, np.zeros((1, 2, 16)))


def test_missing_transformers_names_the_extra(monkeypatch):
    module, inputs = cases.case("bert")
    monkeypatch.setitem(sys.modules, "transformers", None)          # import fails
    with pytest.raises(ImportError, match=r'needs transformers \(the \[transformers\] extra\)'):
        itf.compare_transformers_attention(module, **inputs)


# ---------------------------------------------------------------- generate() replayed

@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2",
                                    "gemma3", "gpt_oss"])
def test_generate_replayed_step_by_step_on_the_kv_cache(family):
    from attention_np.interop.transformers.decode_diff import replay_generate
    model = cases.tiny_model(family, seed=3, causal_lm=True)
    prompts = np.array([[3, 5, 7, 9], [2, 4, 6, 8]])
    report = replay_generate(model, prompts, max_new_tokens=4)     # 8 > WINDOW: the window acts
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == ["step 0 (T=4)"] + [f"step {i} (T=1)"
                                                                  for i in (1, 2, 3)]
    for c in report.checks:
        assert c.err <= TIGHT * max(1.0, c.size)
    assert report.tokens.shape == (2, 8)
    np.testing.assert_array_equal(report.tokens[:, :4], prompts)
    assert next(model.parameters()).dtype == torch.float32        # the model is left as it was


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "gemma2", "gemma3", "gpt_oss"])
def test_left_padded_generate_replayed_with_the_padding_mask_and_shifted_positions(family):
    from attention_np.interop.transformers.decode_diff import replay_generate
    model = cases.tiny_model(family, seed=5, causal_lm=True)
    prompts = np.array([[3, 5, 7, 9, 11], [0, 0, 0, 6, 8]])
    pad = np.array([[1, 1, 1, 1, 1], [0, 0, 0, 1, 1]])                   # left padding
    report = replay_generate(model, prompts, attention_mask=pad, max_new_tokens=3)
    assert report.ok, str(report)
    assert any("3 padded prompt position(s) left out" in n for n in report.notes)


def test_replay_refuses_a_model_it_cannot_replay():
    from attention_np.interop.transformers.decode_diff import replay_generate
    with pytest.raises(TypeError, match="GPT2LMHeadModel.*got BertModel"):
        replay_generate(cases.tiny_model("bert"), np.array([[1, 2]]))
    gpt2 = cases.tiny_model("gpt2", causal_lm=True)
    with pytest.raises(ValueError, match="input_ids must be"):
        replay_generate(gpt2, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of input_ids \(1, 2\)"):
        replay_generate(gpt2, np.array([[1, 2]]), attention_mask=np.ones((1, 3)))


# ---------------------------------------------------------------- the traps (docs/frameworks.md)

def test_eager_softmax_is_float32_in_a_float64_model_and_the_layer_diff_runs_it_in_float64():
    """transformers' eager takes the softmax in float32 even in a .double() model (the trap,
    demonstrated); the layer diff asked for eager runs those casts in float64: the verdict of
    sdpa, the note says so."""
    from attention_np.interop.transformers.family_traps import eager_float32_softmax
    demo = eager_float32_softmax(seed=4)
    assert demo.explained, "\n".join(demo.lines)
    module, inputs = cases.case("llama", seed=4)
    eager = itf.compare_transformers_attention(module, **inputs, attn_implementation="eager")
    sdpa = itf.compare_transformers_attention(module, **inputs, attn_implementation="sdpa")
    _assert_tight(eager)
    _assert_tight(sdpa)
    assert any("float32 casts of the family's eager attention" in n for n in eager.notes)
    assert not sdpa.notes


def test_gpt2_reorder_and_upcast_attn_under_eager_runs_sdpa_and_says_so():
    """GPT-2's _upcast_and_reordered_attn (eager only) computes the scores in float32, and on the
    float64 mask of a float64 copy raises transformers' RuntimeError: asked for eager, the
    layer diff runs sdpa (float64, what the whole-model diff runs) and says so."""
    import transformers
    cfg = transformers.GPT2Config(vocab_size=8, n_embd=16, n_layer=1, n_head=2, n_positions=8,
                                  reorder_and_upcast_attn=True)
    layer = transformers.GPT2Model(cfg).h[0].attn
    x = np.random.default_rng(0).standard_normal((1, 3, 16))
    eager = itf.compare_transformers_attention(layer, x, attn_implementation="eager")
    _assert_tight(eager)
    assert "(sdpa)" in eager.module and any("reorder_and_upcast_attn=True" in n for n in eager.notes)
    twin = copy.deepcopy(layer).double()
    twin.config._attn_implementation = "eager"
    mask = torch.zeros(1, 1, 3, 3, dtype=torch.float64)         # what a float64 model passes
    with pytest.raises(RuntimeError, match="Error with upcasting"):
        twin(torch.from_numpy(x), attention_mask=mask)
    _assert_tight(itf.compare_transformers_attention(layer, x))   # sdpa: float64 throughout


def test_position_ids_of_shape_1_L_are_shared_by_the_batch_as_in_transformers():
    module, inputs = cases.case("llama")
    B, L = inputs["hidden_states"].shape[:2]
    shared = itf.compare_transformers_attention(
        module, **{**inputs, "position_ids": np.arange(L)[None] + 3})
    _assert_tight(shared)
    explicit = itf.compare_transformers_attention(
        module, **{**inputs, "position_ids": np.broadcast_to(np.arange(L) + 3, (B, L))})
    assert [c.err for c in shared.checks] == [c.err for c in explicit.checks]
    default = itf.compare_transformers_attention(module, **{**inputs, "position_ids": None})
    assert [c.err for c in default.checks] != [c.err for c in shared.checks]   # 3 was used


def test_position_ids_given_to_a_layer_without_rope_are_noted_as_unused():
    module, inputs = cases.case("gpt2")
    report = itf.compare_transformers_attention(module, **inputs,
                                                position_ids=np.arange(6)[None] + 7)
    assert report.ok and any("position_ids not used: GPT2Attention" in n for n in report.notes)
    module, inputs = cases.case("llama")
    report = itf.compare_transformers_attention(module, **inputs)
    assert not any("position_ids not used" in n for n in report.notes)


def test_the_model_frequencies_get_a_writable_positions_array(monkeypatch):
    """torch.from_numpy warns on a read-only array (position_ids default to a broadcast view)."""
    from attention_np.interop.transformers import rotary
    seen = []
    from_numpy = torch.from_numpy
    monkeypatch.setattr(torch, "from_numpy", lambda a: seen.append(a.flags.writeable) or
                        from_numpy(a))
    module, _ = cases.case("llama")
    positions = np.broadcast_to(np.arange(5), (1, 5))                  # read-only, contiguous
    rotary.model_frequencies(module, positions, torch)
    assert seen and all(seen)


def test_rope_cos_sin_of_a_float64_llama_are_float32_accurate():
    from attention_np.interop.transformers.family_traps import rope_float32
    demo = rope_float32()
    assert demo.explained, "\n".join(demo.lines)


def test_min_filled_mask_gives_mean_v_on_a_fully_masked_row_and_from_torch_sdpa_blocks_it():
    from attention_np.interop import torch as itorch
    from attention_np.interop.transformers.family_traps import min_filled_mask
    demo = min_filled_mask()
    assert demo.explained, "\n".join(demo.lines)
    for dtype in (np.float32, np.float64):
        fill = np.where(np.eye(3, dtype=bool), 0.0, np.finfo(dtype).min).astype(dtype)
        kw = itorch.from_torch_sdpa(torch.from_numpy(fill))
        np.testing.assert_array_equal(kw["mask"], np.eye(3, dtype=bool))
        assert not kw["bias"].any()
    # a large finite bias that is not a fill value stays a bias
    kw = itorch.from_torch_sdpa(torch.full((2, 2), -1e9, dtype=torch.float64))
    assert kw["mask"] is None and (kw["bias"] == -1e9).all()


def test_qk_norm_of_qwen3_and_gemma3_is_float32_in_a_float64_model():
    from attention_np.interop.transformers.family_traps import qk_norm_float32
    demo = qk_norm_float32(seed=3)
    assert demo.explained, "\n".join(demo.lines)


def test_gemma2_soft_cap_sdpa_refuses_flex_has_no_cpu_backward_eager_is_float32():
    from attention_np.interop.transformers.family_traps import softcap_backends
    demo = softcap_backends(seed=3)
    assert demo.explained, "\n".join(demo.lines)
    assert len(demo.lines) == 5                       # sdpa, flex, eager, float64 eager, Gemma 3


def test_sdpa_drops_gpt_oss_sinks_without_an_error_eager_applies_them():
    from attention_np.interop.transformers.family_traps import sdpa_drops_sinks
    demo = sdpa_drops_sinks(seed=3)
    assert demo.explained, "\n".join(demo.lines)
    assert len(demo.lines) == 2


def test_compare_leaves_fully_masked_rows_of_left_padding_out_and_lists_them():
    module, inputs = cases.case("gpt2")
    inputs["attention_mask"] = np.array([[1] * 6, [0, 0, 1, 1, 1, 1]])   # left padding
    report = itf.compare_transformers_attention(module, **inputs)
    assert report.ok, str(report)                    # rows 0, 1 of batch 1: mean(V) vs 0, left out
    assert report.excluded_rows == [(1, 0), (1, 1)]
    assert any("2 query row(s) (batch, position) have every key masked and are left out" in n
               for n in report.notes)


# ---------------------------------------------------------------- python -m attention_np diff

def test_diff_framework_transformers_prints_a_row_per_family_and_exits_zero(monkeypatch, capsys):
    from attention_np.cli import diff_transformers, main
    from attention_np.interop.transformers import family_traps as known
    monkeypatch.setattr(cases, "FAMILIES", ("bart-cross", "qwen2"))      # a fast subset
    monkeypatch.setattr(diff_transformers, "DECODERS", ("llama", "gpt_oss"))
    monkeypatch.setattr(diff_transformers, "ENCODER_DECODERS", ("t5",))
    monkeypatch.setattr(diff_transformers, "ROPE_TYPES", ("dynamic",))
    monkeypatch.setattr(diff_transformers, "MODELS", ("cohere", "deberta-v2"))
    monkeypatch.setattr(known, "DEMOS", (known.min_filled_mask,))
    assert main(["diff", "--framework", "transformers"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^bart-cross +BartAttention +layer .* ok$", out, re.M)
    # the worst gradient is a gradient (d...), not the inv_freq check that RoPE layers add
    assert re.search(r"^qwen2 +Qwen2Attention +layer +\S+ +\S+ +d\w+ .* ok$", out, re.M)
    assert re.search(r"^llama +LlamaAttention +decode .* 4 steps .* ok$", out, re.M)
    assert re.search(r"^llama +LlamaAttention +leftpad .* 4 steps .* ok$", out, re.M)
    assert re.search(r"^gpt_oss +GptOssAttention +decode .* 4 steps .* ok$", out, re.M)
    assert re.search(r"^gpt_oss +GptOssAttention +leftpad .* 4 steps .* ok$", out, re.M)
    assert re.search(r"^t5 +T5Attention +decode .* 4 self \+ 4 cross .* ok$", out, re.M)
    assert re.search(r"^t5 +T5Attention +padsrc .* 4 self \+ 4 cross .* ok$", out, re.M)
    assert re.search(r"^rope:dynamic +LlamaAttention +layer .* ok$", out, re.M)
    assert re.search(r"^rope:dynamic +LlamaAttention +decode .* 7 steps .* ok$", out, re.M)
    assert re.search(r"^cohere +CohereAttention +model .* d\w+ \(2 l\.\) .* ok$", out, re.M)
    assert re.search(r"^deberta-v2 +DisentangledSelfAttention +model .* refused$", out, re.M)
    assert "deberta-v2: DisentangledSelfAttention: disentangled relative attention" in out
    assert ("11/12 diffs (family, mode) agree, 0 mismatches, 1 refused, 1/1 traps "
            "demonstrated") in out


def test_diff_framework_transformers_fails_with_the_install_hint_when_missing(monkeypatch,
                                                                             capsys):
    from attention_np.cli import diff_transformers, main
    monkeypatch.setattr(diff_transformers, "_missing",
                        lambda m: "No module named 'transformers'" if m == "transformers" else None)
    assert main(["diff", "--framework", "transformers"]) == 1
    err = capsys.readouterr().err
    assert ("needs transformers, which is not installed (pip install torch==2.13.0 --index-url "
            'https://download.pytorch.org/whl/cpu && pip install "transformers>=5.15"') in err


def test_diff_framework_transformers_refuses_float32_rather_than_running_float64(capsys):
    from attention_np.cli import main
    assert main(["diff", "--framework", "transformers", "--dtype", "float32"]) == 2
    assert "diffs in float64 only" in capsys.readouterr().err
