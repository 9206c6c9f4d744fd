"""RoPE scaling types (variants/rope_scaling.py): each type's frequencies against the property its paper
states and against transformers' ROPE_INIT_FUNCTIONS (as they run, in float32, and evaluated in
float64); the float32 rotation against an oracle of transformers' own code in float64; the
backward (rotation by -phi, times the attention factor) by finite differences; a tiny Llama of each
type diffed layer and generate() replay (dynamic NTK across its recompute length); bad input."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.variants.rope_scaling import ROPE_TYPES
from tests.helpers import max_abs_diff, randn, require

R = np.random.default_rng(1212)
EPS32 = np.finfo(np.float32).eps


def _default(d, theta):
    return theta ** (-np.arange(0, d, 2) / d)                         # w_m = theta^(-2m/d)


# ------------------------------------------------------------- each type's defining property

def test_linear_is_position_interpolation():
    inv, a = an.rope_frequencies(16, theta=100.0, scaling={"rope_type": "linear", "factor": 4.0})
    assert max_abs_diff(inv, _default(16, 100.0) / 4) < 1e-16 and a == 1.0
    # frequency / 4 = positions / 4: position 8 scaled turns as position 2 unscaled
    x = randn(R, 1, 16)
    y = an.apply_rope(x, [8], theta=100.0, scaling={"rope_type": "linear", "factor": 4.0})
    assert max_abs_diff(y, an.apply_rope(x, [2], theta=100.0)) < 1e-15


def test_dynamic_ntk_keeps_the_highest_frequency_and_interpolates_the_lowest():
    d, theta, s, L = 16, 1000.0, 3.0, 32
    sc = {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": L}
    for n in (None, 1, L):                                  # up to L: plain RoPE
        assert max_abs_diff(an.rope_frequencies(d, theta=theta, scaling=sc, seq_len=n)[0],
                            _default(d, theta)) == 0
    w = _default(d, theta)
    for n in (L + 1, 2 * L, 5 * L):
        inv, a = an.rope_frequencies(d, theta=theta, scaling=sc, seq_len=n)
        stretch = s * n / L - (s - 1)                       # the effective PI factor at length n
        assert inv[0] == 1.0 and a == 1.0                   # m = 0 turns as before
        assert abs(inv[-1] / (w[-1] / stretch) - 1) < 1e-13      # the lowest: divided by it
        assert np.all(np.diff(w / inv) > 0)                 # in between: more the lower


def test_yarn_ramp_keeps_fast_frequencies_and_interpolates_slow_ones():
    # d 16, theta 100, L 16: pair index of beta turns over L, d ln(L / 2 pi beta) / (2 ln theta),
    # is -4.4 for beta_fast 32 (floor: 0) and 1.62 for beta_slow 1 (ceil: 2) -> ramp 0, 1/2, 1, ...
    d, theta, s, L = 16, 100.0, 4.0, 16
    assert math.floor(d * math.log(L / (2 * math.pi * 32)) / (2 * math.log(theta))) < 0
    assert math.ceil(d * math.log(L / (2 * math.pi)) / (2 * math.log(theta))) == 2
    inv, a = an.rope_frequencies(d, theta=theta, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": L})
    w = _default(d, theta)
    assert max_abs_diff(inv, np.r_[w[0], w[1] * (1 + 1 / s) / 2, w[2:] / s]) < 1e-16
    assert abs(a - (1 + 0.1 * math.log(4.0))) < 1e-15       # sqrt(1/t) = 0.1 ln s + 1
    # DeepSeek's mscale pair: the ratio of the two; an explicit attention_factor wins
    kw = {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L}
    a2 = an.rope_frequencies(d, theta=theta, scaling={**kw, "mscale": 2.0, "mscale_all_dim": 1.0})[1]
    assert abs(a2 - (1 + 0.2 * math.log(4)) / (1 + 0.1 * math.log(4))) < 1e-15
    assert an.rope_frequencies(d, theta=theta, scaling={**kw, "attention_factor": 0.7})[1] == 0.7


def test_longrope_switches_from_short_to_long_factors_past_the_original_length():
    short, long = [1.0, 1.2, 1.5, 2.0], [1.0, 2.0, 4.0, 8.0]
    sc = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
          "original_max_position_embeddings": 16, "factor": 4.0}
    w = _default(8, 10.0)
    for n, lam in ((None, short), (16, short), (17, long), (1000, long)):
        inv, a = an.rope_frequencies(8, theta=10.0, scaling=sc, seq_len=n)
        assert max_abs_diff(inv, w / np.array(lam)) < 1e-16
        assert abs(a - math.sqrt(1 + math.log(4) / math.log(16))) < 1e-15


def test_llama3_scales_by_wavelength_band():
    d, theta, L = 32, 10000.0, 64
    sc = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": L}
    inv, a = an.rope_frequencies(d, theta=theta, scaling=sc)
    w = _default(d, theta)
    wavelength = 2 * np.pi / w
    short, long = wavelength < L / 4, wavelength > L / 1
    mid = ~short & ~long
    assert short.sum() and long.sum() and mid.sum() and a == 1.0       # all three bands occur
    assert np.array_equal(inv[short], w[short])
    assert max_abs_diff(inv[long], w[long] / 8) < 1e-18
    assert np.all((inv[mid] < w[mid]) & (inv[mid] > w[mid] / 8))


def test_proportional_rotates_the_first_pairs_only_with_the_full_width_exponent():
    d = 16
    inv, a = an.rope_frequencies(d, theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 2.0})
    assert max_abs_diff(inv[:4], _default(d, 100.0)[:4] / 2) < 1e-16 and np.all(inv[4:] == 0)
    x = randn(R, 3, d)
    y = an.apply_rope(x, np.arange(1, 4), theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.5})
    still = np.r_[4:8, 12:16]          # "half" layout: pair m is (m, m + 8); pairs 4..7 stay
    assert np.array_equal(y[:, still], x[:, still]) and max_abs_diff(y, x) > 1e-2


# ------------------------------------------------------- every type against transformers

SCALINGS = {
    "linear": {"factor": 2.5},
    "dynamic": {"factor": 3.0, "original_max_position_embeddings": 128},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 32},
    "yarn-deepseek": {"factor": 4.0, "original_max_position_embeddings": 32, "mscale": 0.8,
                      "mscale_all_dim": 0.6, "beta_fast": 16, "beta_slow": 2, "truncate": False},
    "longrope": {"short_factor": list(1 + np.arange(32) / 10),
                 "long_factor": list(2.0 + np.arange(32)),
                 "original_max_position_embeddings": 32, "factor": 4.0},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
    "proportional": {"partial_rotary_factor": 0.25},
    "proportional-factor": {"partial_rotary_factor": 0.5, "factor": 2.0},   # all divided by it
}


@pytest.mark.parametrize("theta", [10000.0, 500000.0])
@pytest.mark.parametrize("name", SCALINGS)
def test_each_type_matches_transformers_rope_init_functions(name, theta, monkeypatch):
    require("torch")
    tf = require("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    tf.logging.set_verbosity_error()
    t, d = name.split("-")[0], 64
    ours_sc = {"rope_type": t, **SCALINGS[name]}
    theirs_sc = {k: v for k, v in ours_sc.items() if not (t == "dynamic" and k.startswith("orig"))}
    cfg = tf.LlamaConfig(hidden_size=128, num_attention_heads=2, head_dim=d,
                         max_position_embeddings=128,
                         rope_parameters={**theirs_sc, "rope_theta": theta})
    for n in (None, 20, 1000):
        theirs, their_a = ROPE_INIT_FUNCTIONS[t](cfg, "cpu", seq_len=n)
        inv, a = an.rope_frequencies(d, theta=theta, scaling=ours_sc, seq_len=n)
        theirs = theirs.double().numpy()
        # theirs is a float32 computation: a few float32 ulps each, relative
        rel = np.abs(theirs - inv) / np.where(inv == 0, 1, inv)
        assert rel.max() < 8 * EPS32, (n, rel.max())
        assert abs(a - their_a) <= 1e-15 * a
        # the same functions evaluated in float64: ours to float64 rounding
        theirs64, _ = _their_frequencies_in_float64(monkeypatch, cfg, t, n)
        assert max_abs_diff(inv, theirs64) <= 1e-14 * np.abs(theirs64).max(), n
        assert max_abs_diff(inv, _default(d, theta)) > 1e-4 or (t == "dynamic" and n != 1000)


# --------------------------------------------------------------- backward: exact, every type

BACKWARD = [None, {"rope_type": "linear", "factor": 2.0},
            {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
            {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 8},
            {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0],
             "long_factor": [1.0, 3.0, 5.0], "original_max_position_embeddings": 4,
             "factor": 2.0},
            {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
             "high_freq_factor": 2.0, "original_max_position_embeddings": 16},
            {"rope_type": "proportional", "partial_rotary_factor": 0.7}]


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("scaling", BACKWARD, ids=lambda s: "default" if s is None else
                         s["rope_type"])
def test_backward_matches_finite_differences_with_the_attention_factor(scaling, layout):
    x, dy = randn(R, 2, 3, 6), randn(R, 2, 3, 6)
    pos = np.array([[0, 5, 9], [2, 3, 4]])               # max 9: past the dynamic/longrope L
    kw = dict(layout=layout, theta=50.0, scaling=scaling)
    dx = an.apply_rope_backward(dy, pos, **kw)
    num = numerical_gradient(lambda: float(np.sum(an.apply_rope(x, pos, **kw) * dy)), x)
    assert max_abs_diff(dx, num) < 1e-8       # linear in x: FD error is rounding, ~1e-16 / 1e-6
    # x_rot = a R x: the backward of the forward is a^2 x
    a = an.rope_frequencies(6, theta=50.0, scaling=scaling, seq_len=10)[1]
    assert max_abs_diff(an.apply_rope_backward(an.apply_rope(x, pos, **kw), pos, **kw),
                        a * a * x) < 1e-14
    if scaling is not None and scaling["rope_type"] in ("yarn", "longrope"):
        assert a > 1.05


def test_mha_gradients_with_yarn_match_finite_differences():
    E, H = 8, 2
    params = {n: a + 0.1 * randn(R, *a.shape) for n, a in
              an.init_mha_params(E, H, bias=True, rng=R).items()}
    x, dout = randn(R, 5, E), randn(R, 5, E)
    kw = dict(is_causal=True, positions=np.arange(3, 8), num_heads=H, spec=an.AttentionSpec(rope=an.RoPE(
        theta=20.0, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4})))
    dq, dk, dv, grads = an.mha_backward(dout, an.mha_forward(x, x, x, params, **kw)[1])

    def loss():
        return float(np.sum(an.mha_forward(x, x, x, params, **kw)[0] * dout))

    assert max_abs_diff(dq + dk + dv, numerical_gradient(loss, x)) < 1e-8
    for n in ("W_q", "W_k"):
        assert max_abs_diff(grads[n], numerical_gradient(loss, params[n])) < 1e-8


def test_decode_follows_dynamic_ntk_and_cached_keys_keep_their_rotation():
    E, H = 8, 2
    params = an.init_mha_params(E, H, rng=R)
    x = randn(R, 1, 6, E)
    rope = {"scaling": {"rope_type": "dynamic", "factor": 4.0,
                        "original_max_position_embeddings": 3}}
    kv = an.KVCache(6)
    spec = an.AttentionSpec(rope=an.RoPE(**rope))
    outs = [an.mha_decode_step(x[:, t:t + 1], params, kv, spec=spec, num_heads=H) for t in range(6)]
    # step t rotates its query and key with the frequencies of length t + 1: the same as
    # a whole-sequence forward whose keys were each rotated at their own step
    q_all = an.split_heads(x @ params["W_q"], H)                     # (1, h, 6, d)
    k_all = an.split_heads(x @ params["W_k"], H)
    v_all = an.split_heads(x @ params["W_v"], H)
    q_rot = np.concatenate([an.apply_rope(q_all[..., t:t + 1, :], [t], **rope)
                            for t in range(6)], axis=-2)
    k_rot = np.concatenate([an.apply_rope(k_all[..., t:t + 1, :], [t], **rope)
                            for t in range(6)], axis=-2)
    heads, _ = an.sdpa_forward(q_rot, k_rot, v_all, is_causal=True)
    want = an.merge_heads(heads) @ params["W_o"]
    assert max_abs_diff(np.concatenate(outs, axis=1), want) < 1e-14
    # and that differs from rotating every key with the last step's frequencies
    full, _ = an.mha_forward(x, x, x, params, is_causal=True, spec=spec, num_heads=H)
    assert max_abs_diff(full[:, -1], want[:, -1]) > 1e-6


# ---------------------------------------------- tiny Llamas of each type: layer and generate()

@pytest.mark.parametrize("rope_type", ["linear", "dynamic", "yarn", "longrope", "llama3",
                                       "proportional"])
def test_tiny_llama_of_each_type_layer_and_generate_replay_agree(rope_type):
    require("torch")
    tf = require("transformers")
    from attention_np.interop.transformers import compare_transformers_attention, layer_spec
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers.decode_diff import replay_generate
    tf.logging.set_verbosity_error()
    module, inputs = cases.rope_case(rope_type, seed=3)
    report = compare_transformers_attention(module, **inputs, seed=4)
    assert report.ok, str(report)
    by_name = {c.name: c for c in report.checks}
    assert by_name["inv_freq rel"].err < 8 * EPS32 and by_name["attn_factor"].err < 1e-15
    for c in report.checks:
        if c.rule == "float64":
            assert c.err <= 1e-12 * max(1.0, c.size), (c.name, c.err)
    # generate(): a prompt of 5, 6 new tokens -> lengths 5 .. 10, past the switch at 8
    ids = np.random.default_rng(3).integers(1, 61, (2, 5))
    decode = replay_generate(cases.rope_model(rope_type, seed=3, causal_lm=True), ids,
                             max_new_tokens=6)
    assert decode.ok, str(decode)
    assert len(decode.rope_checks) == 2 * 6 and max(c.err for c in decode.checks) < 1e-13
    spec = layer_spec(module)
    first, last = (an.rope_frequencies(spec.head_dim, theta=spec.attention.rope.theta,
                                       scaling=spec.attention.rope.scaling, seq_len=n)[0] for n in (5, 10))
    changed = max_abs_diff(first, last) > 1e-3
    assert changed == (rope_type in ("dynamic", "longrope"))      # the recompute ran


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("scaling,words", [
    ({"rope_type": "su"}, "unknown rope_type 'su': the known ones are ['default', 'dynamic'"),
    ({"factor": 2.0}, "'rope_type' among"),
    ({"rope_type": "yarn", "factor": 2.0}, "missing ['original_max_position_embeddings']"),
    ({"rope_type": "linear", "factor": 2.0, "beta": 1}, "unknown ['beta']"),
    ({"rope_type": "linear", "factor": -2.0}, "factor must be a positive finite number"),
    ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4.5},
     "original_max_position_embeddings must be a positive int"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
      "original_max_position_embeddings": 64}, "high_freq_factor must exceed"),
    ({"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 4,
      "original_max_position_embeddings": 4, "factor": 2.0}, "d // 2 = 4 entries, got 3"),
    ({"rope_type": "longrope", "short_factor": [1.0, 0.0, 1.0, 1.0], "long_factor": [1.0] * 4,
      "original_max_position_embeddings": 4, "factor": 2.0}, "short_factor must be a list"),
])
def test_bad_scaling_names_the_parameter_and_the_known_ones(scaling, words):
    with pytest.raises(ValueError) as info:
        an.apply_rope(np.ones((3, 8)), np.arange(3), scaling=scaling)
    assert words in str(info.value)


@pytest.mark.parametrize("kw,words", [
    (dict(d=7), "d must be an even int"),
    (dict(d=8, theta=0.0), "theta must be a positive finite number, got 0.0"),
    (dict(d=8, seq_len=2.5), "seq_len must be None or an int >= 1"),
    (dict(d=8, seq_len=0), "seq_len must be None or an int >= 1"),
])
def test_rope_frequencies_bad_arguments_name_themselves(kw, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        an.rope_frequencies(**kw)


def test_every_known_type_is_listed_and_a_bad_scaling_leaves_the_kv_cache_unchanged():
    assert sorted(ROPE_TYPES) == ["default", "dynamic", "linear", "llama3", "longrope",
                                  "proportional", "yarn"]
    params = an.init_mha_params(8, 2, rng=R)
    kv = an.KVCache(4)
    with pytest.raises(ValueError, match="unknown rope_type"):      # refused when the spec is made
        an.mha_decode_step(randn(R, 1, 8), params, kv, spec=an.AttentionSpec(
            rope=an.RoPE(scaling={"rope_type": "ntk"})), num_heads=2)
    with pytest.raises(ValueError, match="short_factor must have d // 2 = 2 entries, got 3"):
        an.mha_decode_step(randn(R, 1, 8), params, kv, spec=an.AttentionSpec(rope=an.RoPE(
            scaling={"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 3,
                     "original_max_position_embeddings": 4, "factor": 2.0})), num_heads=2)
    assert kv.length == 0


def test_layer_spec_rejects_an_unknown_rope_type_naming_the_known_ones():
    require("torch")
    require("transformers")
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers import layer_spec
    module = cases.rope_case("yarn")[0]
    assert layer_spec(module).attention.rope.scaling["rope_type"] == "yarn"
    module.config.rope_parameters = {"rope_type": "su", "rope_theta": 10000.0}
    from attention_np.interop.transformers import UnsupportedLayer
    # refused (a TypeError) as a feature of the layer, so a model's other layers are still read
    with pytest.raises(UnsupportedLayer, match=r"rope_type='su'; the known ones are \['default'"):
        layer_spec(module)


def _their_frequencies_in_float64(monkeypatch, config, rope_type: str, seq_len: int):
    """transformers' own ``ROPE_INIT_FUNCTIONS[rope_type]`` evaluated in float64: the same code,
    with the float32 it asks for (``torch.float``, ``torch.float32``, ``Tensor.float()``) read as
    float64 for the call. Returns ``inv_freq (d/2,)`` and the attention factor."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    with monkeypatch.context() as m:
        m.setattr(torch, "float", torch.float64)
        m.setattr(torch, "float32", torch.float64)
        m.setattr(torch.Tensor, "float", torch.Tensor.double)
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    assert inv_freq.dtype == torch.float64
    return inv_freq.numpy(), float(factor)


@pytest.mark.float32
@pytest.mark.parametrize("rope_type", ["linear", "dynamic", "yarn", "longrope", "llama3",
                                       "proportional"])
def test_float32_rotation_against_transformers_own_rotary_embedding(rope_type, monkeypatch):
    """Ours and transformers' rotary embedding in float32, each held to the float32 rule against an
    oracle that is transformers' own: its RoPE init function in float64, its rotation
    (``apply_rotary_pos_emb``) on float64 tensors; none of attention_np's code."""
    torch = require("torch")
    require("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from attention_np.interop.tolerance import check_float32
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers import layer_spec
    from attention_np.interop.transformers.rotary import rotary_embedding
    module = cases.rope_case(rope_type)[0]
    spec = layer_spec(module)
    q = randn(R, 2, 4, 10, spec.head_dim, dtype=np.float32)       # (B, h, L, d)
    pos = np.arange(10)[None] + np.array([[0], [3]])             # up to 12: past the switch at 8
    cos, sin = rotary_embedding(module)(torch.zeros(1), torch.from_numpy(pos))   # float32
    theirs = apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(q), cos, sin)[0]
    kw = dict(theta=spec.attention.rope.theta, scaling=spec.attention.rope.scaling)
    ours = an.apply_rope(q, pos[:, None], **kw)
    assert ours.dtype == np.float32
    # the oracle: the rotary embedding's steps in float64 (dynamic and longrope pick their
    # frequencies by the batch's largest position + 1, as its dynamic_rope_update does)
    inv_freq, factor = _their_frequencies_in_float64(monkeypatch, module.config, rope_type,
                                                     int(pos.max()) + 1)
    angles = pos[..., None] * inv_freq                                       # (B, L, d/2)
    emb = torch.from_numpy(np.concatenate([angles, angles], axis=-1))        # "half" layout
    q64 = torch.from_numpy(q.astype(np.float64))
    oracle = apply_rotary_pos_emb(q64, q64, emb.cos() * factor, emb.sin() * factor)[0].numpy()
    assert check_float32("rope", ours, oracle, peer=theirs.numpy()).ok
    assert check_float32("theirs", theirs.numpy(), oracle, peer=ours).ok
    # and our float64 rotation is that oracle to float64 rounding
    assert max_abs_diff(an.apply_rope(q.astype(np.float64), pos[:, None], **kw), oracle) < 1e-13


@pytest.mark.parametrize("rope_parameters,factor", [
    ({"rope_type": "longrope", "short_factor": [1.0] * 6, "long_factor": [1.0, 2, 3, 4, 5, 6],
      "original_max_position_embeddings": 8}, 4.0),                   # Phi-3: no factor given
    ({"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 8}, 4.0),
])
def test_layer_spec_fills_in_the_factor_transformers_derives_from_the_config(rope_parameters,
                                                                             factor):
    torch = require("torch")
    tf = require("transformers")
    from attention_np.interop.transformers import compare_transformers_attention, layer_spec
    from attention_np.interop.transformers import family_cases as cases
    tf.logging.set_verbosity_error()
    cfg = tf.LlamaConfig(**{**cases.DECODER, "max_position_embeddings": 32},
                         rope_parameters={**rope_parameters, "rope_theta": 10000.0},
                         attn_implementation="sdpa")
    torch.manual_seed(5)                                  # the model's own random init
    module = cases.attention_layer("llama", tf.LlamaModel(cfg).eval())
    assert layer_spec(module).attention.rope.scaling["factor"] == factor        # 32 / 8
    report = compare_transformers_attention(module, **cases.case("llama")[1])
    assert report.ok, str(report)
    assert {c.name: c for c in report.checks}["attn_factor"].size > 1.05   # a factor 4 scale


@pytest.mark.parametrize("truncate", [None, True, False, "absent"])
def test_layer_spec_reads_yarn_truncate_none_as_transformers_does_not_truncating(truncate):
    """transformers: ``truncate = rope_parameters.get("truncate", True)``, then ``if truncate:``
    floor/ceil, so an explicit None does not truncate; absent does."""
    require("torch")
    tf = require("transformers")
    from attention_np.interop.transformers import compare_transformers_attention, layer_spec
    from attention_np.interop.transformers import family_cases as cases
    tf.logging.set_verbosity_error()
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "rope_theta": 100.0, **({} if truncate == "absent" else {"truncate": truncate})}
    cfg = tf.LlamaConfig(**{**cases.DECODER, "max_position_embeddings": 64},
                         rope_parameters=rope, attn_implementation="sdpa")
    module = cases.attention_layer("llama", tf.LlamaModel(cfg).eval())
    spec = layer_spec(module)
    assert spec.attention.rope.scaling.get("truncate", True) is (truncate in (True, "absent"))
    # with theta 100 and L 16 the two differ (else this test could not fail)
    d = spec.head_dim
    both = [an.rope_frequencies(d, theta=100.0, scaling={**spec.attention.rope.scaling, "truncate": t})[0]
            for t in (True, False)]
    assert max_abs_diff(*both) > 1e-3
    report = compare_transformers_attention(module, **cases.case("llama")[1])
    assert report.ok, str(report)          # inv_freq within 8 float32 ulps of the model's


def test_layer_spec_refuses_a_partial_rotary_factor_outside_proportional():
    require("torch")
    require("transformers")
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers import layer_spec
    module = cases.rope_case("linear")[0]
    module.config.rope_parameters = {**module.config.rope_parameters, "partial_rotary_factor": 0.5}
    with pytest.raises(ValueError, match="partial_rotary_factor=0.5: this layer rotates the whole"):
        layer_spec(module)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_rope_frequencies_default_base_is_ten_thousand():
    """Kills the default ``theta=10000.0`` -> ``10001.0``: RoFormer's (and §3.5's)
    ``w_m = 10000^(-2m/d)``."""
    inv_freq, factor = an.rope_frequencies(8)
    np.testing.assert_allclose(inv_freq, [1.0, 10000.0 ** -0.25, 10000.0 ** -0.5, 10000.0 ** -0.75],
                               rtol=1e-15)
    assert factor == 1.0


def test_proportional_rotates_floor_of_half_the_rotated_width():
    """Kills ``// 2`` -> ``/ 2`` in proportional's rotated pairs: with
    ``partial_rotary_factor * d = 3`` (odd), ``floor(3 / 2) = 1`` pair turns (transformers'
    ``int(p * head_dim // 2)``), not 2."""
    inv_freq, _ = an.rope_frequencies(8, theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.375})
    np.testing.assert_array_equal(inv_freq, [1.0, 0.0, 0.0, 0.0])


def test_rope_frequencies_of_the_smallest_width():
    """Kills ``d < 2`` -> ``d <= 2`` in the width check: ``d = 2`` is one pair of features, one
    frequency ``w_0 = theta^0 = 1``."""
    inv_freq, factor = an.rope_frequencies(2)
    np.testing.assert_array_equal(inv_freq, [1.0])
    assert factor == 1.0


@pytest.mark.parametrize("factor, want", [(0.5, 1.0), (1.0, 1.0), (1.5, 0.1 * np.log(1.5) + 1),
                                         (4.0, 0.1 * np.log(4.0) + 1)])
def test_yarn_attention_factor_default_is_eq_22(factor, want):
    """Kills a changed ``1.0`` or ``factor <= 1`` in YaRN's default attention factor: YaRN's
    ``sqrt(1/t) = 0.1 ln(s) + 1`` (Peng et al. 2023, Eq. 22), and 1 for a factor ``s <= 1`` (no
    interpolation)."""
    _, a = an.rope_frequencies(8, scaling={"rope_type": "yarn", "factor": factor,
                                           "original_max_position_embeddings": 64})
    assert a == pytest.approx(want, rel=1e-15)


def test_yarn_default_betas_are_the_papers():
    """Kills the default ``beta_fast: 32.0`` -> ``33.0`` (and ``beta_slow``): YaRN's alpha = 1, beta =
    32 (Peng et al. 2023, §3.2), which transformers also defaults to; unrounded
    (``truncate=False``) so that any change of either bound moves the ramp."""
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
            "truncate": False}
    got, _ = an.rope_frequencies(32, scaling=base)
    want, _ = an.rope_frequencies(32, scaling={**base, "beta_fast": 32.0, "beta_slow": 1.0})
    np.testing.assert_array_equal(got, want)
    other, _ = an.rope_frequencies(32, scaling={**base, "beta_fast": 33.0, "beta_slow": 1.0})
    assert not np.array_equal(other, want)                  # the test can see a change of beta


def test_proportional_default_factor_is_one():
    """Kills proportional's default ``"factor": 1.0`` -> ``2.0``: without a factor the turning
    frequencies are RoFormer's own, ``w_m = theta^(-2m/d)``."""
    inv_freq, _ = an.rope_frequencies(8, theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.5})
    np.testing.assert_allclose(inv_freq, [1.0, 100.0 ** -0.25, 0.0, 0.0], rtol=1e-15)


def test_rope_frequencies_bad_theta_message_names_no_rope_type():
    """Kills ``rope_type is None`` -> ``is not None``: a bad ``theta`` is not a parameter of a
    rope_type, a bad ``factor`` is."""
    with pytest.raises(ValueError, match=r"^theta must be a positive finite number, got -1\.0$"):
        an.rope_frequencies(8, theta=-1.0)
    with pytest.raises(ValueError, match=r"^rope_type 'linear': factor must be a positive"):
        an.rope_frequencies(8, scaling={"rope_type": "linear", "factor": -1.0})


def test_llama3_refuses_equal_frequency_factors():
    """Kills ``>`` -> ``>=`` in llama3's check of its frequency factors: with
    ``high_freq_factor == low_freq_factor`` the blend weight
    ``(L / lambda - low) / (high - low)`` divides by zero."""
    with pytest.raises(ValueError, match="high_freq_factor must exceed low_freq_factor"):
        an.rope_frequencies(8, scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0,
                                        "high_freq_factor": 2.0,
                                        "original_max_position_embeddings": 64})


def test_dynamic_at_the_original_length_one_is_the_default():
    """Kills ``v < 1`` -> ``v <= 1`` in the check of a positive int:
    ``original_max_position_embeddings`` is a positive int, 1 included; dynamic NTK at
    ``n = L`` keeps ``theta' = theta``."""
    inv_freq, _ = an.rope_frequencies(8, scaling={"rope_type": "dynamic", "factor": 2.0,
                                                  "original_max_position_embeddings": 1})
    np.testing.assert_allclose(inv_freq, 10000.0 ** (-np.arange(4) / 4), rtol=1e-14)


def test_yarn_ramp_clipped_at_d_minus_one_from_a_nonzero_start():
    """Kills ``min(hi, d - 1)`` -> ``d - 2``, and ``m - lo`` or ``hi - lo`` -> ``+``: d = 8, theta =
    10, L = 471 put YaRN's pair indices at ``m(32) = 8 ln(471 / 64pi) / (2 ln 10) = 1.48`` and
    ``m(1) = 7.50``: lo = 1, hi = ceil(7.50) = 8 clipped to d - 1 = 7, so the ramp
    ``(m - 1) / 6`` is 0, 0, 1/6, 1/3 over m = 0..3."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": 471})
    w = 10.0 ** (-np.arange(4) / 4)
    g = np.array([0.0, 0.0, 1 / 6, 1 / 3])
    np.testing.assert_allclose(inv_freq, (1 - g) * w + g * w / s, rtol=1e-14)


def test_yarn_deepseek_mscale_may_be_negative_and_needs_both():
    """Kills ``positive=`` dropped from the check of DeepSeek's scales (``mscale`` and
    ``mscale_all_dim`` may be 0 or negative) and ``and`` -> ``or`` where both are needed: only
    both give DeepSeek's ``mscale(s, mscale) / mscale(s, mscale_all_dim)``, with
    ``mscale(s, a) = 0.1 a ln s + 1``; one alone leaves Eq. 22's ``0.1 ln s + 1``."""
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    _, a = an.rope_frequencies(8, scaling={**base, "mscale": -1.0, "mscale_all_dim": 1.0})
    ln = np.log(4.0)
    assert a == pytest.approx((1 - 0.1 * ln) / (1 + 0.1 * ln), rel=1e-15)
    for one in ({"mscale": 0.707}, {"mscale_all_dim": 0.707}):
        _, a = an.rope_frequencies(8, scaling={**base, **one})
        assert a == pytest.approx(0.1 * ln + 1, rel=1e-15)


def test_yarn_ramp_of_equal_bounds_is_a_step():
    """Kills ``or 0.001`` -> ``1.001`` in YaRN's ramp: with ``beta_fast = beta_slow`` unrounded, lo =
    hi = ``8 ln(15 / 2pi) / (2 ln 10) = 1.51``: the frequencies below are kept, those above
    divided by s (transformers nudges ``hi`` by 0.001 alike)."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": 15,
        "beta_fast": 1.0, "beta_slow": 1.0, "truncate": False})
    w = 10.0 ** (-np.arange(4) / 4)
    np.testing.assert_allclose(inv_freq, w / [1, 1, s, s], rtol=1e-14)


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_longrope_attention_factor_is_one_without_extension(factor):
    """Kills ``1.0 if s <= 1`` -> ``2.0``: LongRoPE's ``sqrt(1 + ln s / ln L)`` is 1 at s = 1, and 1
    for a factor below."""
    _, a = an.rope_frequencies(8, scaling={
        "rope_type": "longrope", "factor": factor, "original_max_position_embeddings": 64,
        "short_factor": [1.0] * 4, "long_factor": [2.0] * 4})
    assert a == 1.0


def test_llama3_three_bands_by_hand():
    """Kills a ``/`` -> ``*`` in llama3's bands (``w / s``, ``L / low_freq_factor``): d = 8, theta =
    10 give wavelengths ``2pi 10^(m/4)`` = 6.3, 11.2, 19.9, 35.3; with L = 64 the bands are
    below L / 8 = 8 (kept), above L / 2 = 32 (divided by s), and blended in between with
    ``a = (L / lambda - 2) / (8 - 2)``."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "llama3", "factor": s, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
        "original_max_position_embeddings": 64})
    w = 10.0 ** (-np.arange(4) / 4)
    a = (64 * w / (2 * np.pi) - 2) / 6
    want = [w[0], (1 - a[1]) * w[1] / s + a[1] * w[1], (1 - a[2]) * w[2] / s + a[2] * w[2], w[3] / s]
    np.testing.assert_allclose(inv_freq, want, rtol=1e-14)


@pytest.mark.parametrize("bad", [["1.0"] * 4, ["a"] * 4, [True] * 4])
def test_longrope_factors_must_be_numbers(bad):
    """A bug found reading a survivor (``dtype=float`` dropped from the list check survived): the list
    check converted with ``np.asarray(v, dtype=float)``, which took ``["1.0", ...]`` and bools
    as numbers and gave NumPy's "could not convert string to float" for ``["a", ...]``; now
    each is a ValueError naming the parameter."""
    with pytest.raises(ValueError, match="short_factor must be a list of positive numbers"):
        an.rope_frequencies(8, scaling={"rope_type": "longrope", "factor": 2.0,
                                        "original_max_position_embeddings": 64,
                                        "short_factor": bad, "long_factor": [1.0] * 4})
