"""RoPE, masks, biases and windows in multi-head attention and the decode step: mha_forward with
``spec.rope``
against transformers' LlamaAttention (GQA, float64, forward and every gradient), and mha_decode_step
with RoPE, a left-padded batch, a window and a T5-style bias, each equal to mha_forward on the
whole sequence, with no hand loop over positions."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests.helpers import max_abs_diff, mha_params, randn, require

R = np.random.default_rng(1206)
E, H, H_KV = 16, 4, 2


def _params(bias=False):
    if bias:
        return mha_params(R, E, H, num_kv_heads=H_KV, bias_scale=0.1)
    return an.init_mha_params(E, H, num_kv_heads=H_KV, bias=False, rng=R)


def test_mha_rope_equals_llama_attention_forward_and_gradients():
    torch = require("torch")
    llama = require("transformers.models.llama.modeling_llama")
    config = llama.LlamaConfig(hidden_size=E, num_attention_heads=H, num_key_value_heads=H_KV,
                               rope_theta=500.0)
    config._attn_implementation = "sdpa"          # eager runs its softmax in float32
    attn = llama.LlamaAttention(config, layer_idx=0).double()
    B, L = 2, 6
    x = randn(R, B, L, E)
    pos = np.array([np.arange(L), np.arange(3, 3 + L)])        # second sequence at an offset
    cos, sin = an.rope_angles(pos, E // H, theta=500.0)
    emb = tuple(torch.tensor(np.concatenate([c, c], -1)) for c in (cos, sin))
    tx = torch.tensor(x, requires_grad=True)
    causal = torch.tensor(an.causal_mask(L))
    out, _ = attn(tx, position_embeddings=emb, attention_mask=causal)
    dout = randn(R, B, L, E)
    out.backward(torch.tensor(dout))

    params = {f"W_{n}": getattr(attn, f"{n}_proj").weight.detach().numpy().T for n in "qkvo"}
    ours, cache = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True,
                                 spec=an.AttentionSpec(rope=an.RoPE(theta=500.0)), positions=pos)
    dq, dk, dv, grads = an.mha_backward(dout, cache)
    assert max_abs_diff(ours, out.detach().numpy()) < 1e-13
    assert max_abs_diff(dq + dk + dv, tx.grad.numpy()) < 1e-13
    for n in "qkvo":
        assert max_abs_diff(grads[f"W_{n}"], getattr(attn, f"{n}_proj").weight.grad.numpy().T) < 1e-13


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_mha_rope_gradients_match_finite_differences(layout):
    x, params = randn(R, 4, E), _params(bias=True)
    dout = randn(R, 4, E)
    kw = dict(num_heads=H, spec=an.AttentionSpec(rope=an.RoPE(layout=layout, rotary_dim=2)),
              positions=np.array([2, 3, 4, 5]))
    dq, dk, dv, grads = an.mha_backward(dout, an.mha_forward(x, x, x, params, **kw)[1])

    def loss():
        return float(np.sum(an.mha_forward(x, x, x, params, **kw)[0] * dout))

    assert max_abs_diff(dq + dk + dv, numerical_gradient(loss, x)) < 1e-8
    for n in ("W_q", "W_k", "b_q", "b_k"):
        assert max_abs_diff(grads[n], numerical_gradient(loss, params[n])) < 1e-8


def test_rope_makes_self_attention_depend_on_relative_positions_only():
    x, params = randn(R, 5, E), _params()
    kw = dict(num_heads=H, spec=an.AttentionSpec(rope=an.RoPE()))
    a, _ = an.mha_forward(x, x, x, params, positions=np.arange(5), **kw)
    b, _ = an.mha_forward(x, x, x, params, positions=np.arange(100, 105), **kw)
    c, _ = an.mha_forward(x, x, x, params, **kw)
    assert max_abs_diff(a, b) < 1e-12 and max_abs_diff(a, c) == 0
    assert max_abs_diff(a, an.mha_forward(x, x, x, params, num_heads=H)[0]) > 1e-3


def _decode(x, params, chunks, **kw):
    """mha_decode_step over consecutive chunks of x (..., L, E); the outputs concatenated
    (a callable in ``kw`` gives the keyword of the step over positions ``a .. b-1``)."""
    kv = an.KVCache(x.shape[-2])
    outs, t = [], 0
    for n in chunks:
        step_kw = {name: f(t, t + n) if callable(f) else f for name, f in kw.items()}
        outs.append(an.mha_decode_step(x[..., t:t + n, :], params, kv, num_heads=H, **step_kw))
        t += n
    return np.concatenate(outs, axis=-2)


def test_decode_with_rope_equals_the_whole_sequence():
    x, params = randn(R, 2, 7, E), _params(bias=True)
    spec = an.AttentionSpec(rope=an.RoPE(layout="interleaved"))
    want, _ = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True, spec=spec)
    got = _decode(x, params, [3, 1, 1, 2], spec=spec)
    assert max_abs_diff(got, want) < 1e-13


def test_left_padded_batch_decodes_without_a_hand_loop():
    # sequence 1 has 2 padding positions on the left; its positions count from its first token
    B, L = 2, 7
    x, params = randn(R, B, L, E), _params(bias=True)
    real = np.arange(L) >= np.array([0, 2])[:, None]                      # (B, L)
    pos = np.maximum(np.cumsum(real, axis=1) - 1, 0)                      # transformers' rule
    full_mask = real[:, None, None, :] & an.causal_mask(L)                # (B, 1, L, L)
    spec = an.AttentionSpec(rope=an.RoPE())
    want, _ = an.mha_forward(x, x, x, params, full_mask, num_heads=H, spec=spec, positions=pos)
    got = _decode(x, params, [4, 1, 1, 1], spec=spec,
                  positions=lambda a, b: pos[:, a:b],
                  mask=lambda a, b: real[:, None, None, :b])
    keep = real[..., None]                                 # padded query rows are not compared
    assert max_abs_diff(np.where(keep, got, 0), np.where(keep, want, 0)) < 1e-13


def test_decode_with_a_window_and_a_t5_bias_equals_the_whole_sequence():
    L = 8
    x, params = randn(R, 2, L, E), _params()
    table = randn(R, 6, H)
    buckets = an.t5_relative_buckets(an.relative_positions(L), bidirectional=False,
                                     num_buckets=6, max_distance=10)
    bias = an.relative_position_bias(table, buckets)                       # (H, L, L)
    spec = an.AttentionSpec(window=(2, 0))
    want, _ = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True, spec=spec, bias=bias)

    def step_bias(a, b):                   # the new queries' rows, bottom-right relative positions
        rel = an.relative_positions(b - a, b, align="bottom_right")
        return an.relative_position_bias(table, an.t5_relative_buckets(
            rel, bidirectional=False, num_buckets=6, max_distance=10))

    got = _decode(x, params, [3, 1, 2, 1, 1], spec=spec, bias=step_bias)
    assert max_abs_diff(got, want) < 1e-13


@pytest.mark.parametrize("kw,exc,words", [
    (dict(mask=np.ones((3, 3, 1, 2), bool)), ValueError, "mask"),
    (dict(mask=np.ones((1, 2))), TypeError, "mask"),
    (dict(bias=np.ones((1, 5))), ValueError, "bias"),
    (dict(spec=dict(window=(1,))), ValueError, "window"),
    (dict(spec=dict(rope={"base": 1.0})), ValueError, "rope"),
    (dict(spec=dict(rope={}), positions=np.arange(3)), ValueError, "positions"),
])
def test_decode_bad_arguments_leave_the_cache_unchanged(kw, exc, words):
    params = _params()
    kv = an.KVCache(4)
    an.mha_decode_step(randn(R, 2, 1, E), params, kv, num_heads=H)
    with pytest.raises(exc) as info:         # a bad spec field is refused when the spec is made
        if "spec" in kw:
            kw = {**kw, "spec": an.AttentionSpec(**kw["spec"])}
        an.mha_decode_step(randn(R, 2, 1, E), params, kv, num_heads=H, **kw)
    assert words in str(info.value)
    assert kv.length == 1


def test_mha_forward_bad_rope_names_itself():
    x, params = randn(R, 3, E), _params()
    with pytest.raises(ValueError, match="rope"):
        an.AttentionSpec(rope="half")
    with pytest.raises(ValueError, match="positions"):
        an.mha_forward(x, x, x, params, spec=an.AttentionSpec(rope=an.RoPE()),
                       positions=np.arange(4), num_heads=H)


def test_decode_with_qk_norm_softcap_rope_and_gqa_equals_the_whole_sequence():
    x, params = randn(R, 2, 6, E), _params(bias=True)
    params["q_norm"], params["k_norm"] = 1 + 0.1 * randn(R, E // H), 1 + 0.1 * randn(R, E // H)
    spec = an.AttentionSpec(rope=an.RoPE(), softcap=1.5, qk_norm_eps=1e-5)   # QK-norm: params has it
    want, _ = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True, spec=spec)
    got = _decode(x, params, [2, 1, 3], spec=spec)
    assert max_abs_diff(got, want) < 1e-13
    plain = {k: v for k, v in params.items() if k not in ("q_norm", "k_norm")}
    assert max_abs_diff(want, an.mha_forward(x, x, x, plain, num_heads=H, is_causal=True,
                                             spec=an.AttentionSpec(rope=an.RoPE()))[0]) > 1e-3
