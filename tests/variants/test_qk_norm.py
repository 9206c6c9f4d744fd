"""QK-norm (variants/qk_norm.py): RMSNorm per query and key head in mha_forward, against transformers'
Qwen3Attention (GQA, RoPE, float64, forward and every gradient incl. the norm weights) and by
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.variants.qk_norm import (
    rms_norm_all_heads_backward,
    rms_norm_all_heads_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from tests.helpers import max_abs_diff, randn, require

R = np.random.default_rng(1270)
E, H, H_KV, D = 16, 4, 2, 4


def test_rms_norm_backward_matches_finite_differences():
    x, w, dy = randn(R, 3, 5), randn(R, 5), randn(R, 3, 5)
    dx, dw = rms_norm_backward(dy, rms_norm_forward(x, w, 1e-3)[1])
    for a, g in ((x, dx), (w, dw)):
        num = numerical_gradient(lambda: float(np.sum(rms_norm_forward(x, w, 1e-3)[0] * dy)), a)
        assert max_abs_diff(g, num) < 1e-9


def _params():
    p = an.init_mha_params(E, H, num_kv_heads=H_KV, bias=False, rng=R)
    p["q_norm"], p["k_norm"] = 1 + 0.1 * randn(R, D), 1 + 0.1 * randn(R, D)
    return p


def test_qk_norm_equals_qwen3_attention_in_float64():
    torch = require("torch")
    qwen3 = require("transformers.models.qwen3.modeling_qwen3")
    config = qwen3.Qwen3Config(hidden_size=E, num_attention_heads=H, num_key_value_heads=H_KV,
                               head_dim=D, rms_norm_eps=1e-6, rope_theta=10000.0)
    config._attn_implementation = "sdpa"
    attn = qwen3.Qwen3Attention(config, layer_idx=0).double()
    params = _params()
    with torch.no_grad():
        for n in "qkvo":
            getattr(attn, f"{n}_proj").weight.copy_(torch.tensor(params[f"W_{n}"].T))
        attn.q_norm.weight.copy_(torch.tensor(params["q_norm"]))
        attn.k_norm.weight.copy_(torch.tensor(params["k_norm"]))
    # Qwen3RMSNorm normalises in float32 even in a float64 model; to diff the wiring at float64
    # rounding, its forward is replaced by the same formula in the input's dtype
    for norm in (attn.q_norm, attn.k_norm):
        norm.forward = (lambda m: lambda x: m.weight * x * torch.rsqrt(
            x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))(norm)
    B, L = 2, 5
    x = randn(R, B, L, E)
    cos, sin = an.rope_angles(np.arange(L), D, theta=10000.0)
    emb = tuple(torch.tensor(np.concatenate([c, c], -1))[None] for c in (cos, sin))
    tx = torch.tensor(x, requires_grad=True)
    out, _ = attn(tx, position_embeddings=emb, attention_mask=torch.tensor(an.causal_mask(L)))
    dout = randn(R, B, L, E)
    out.backward(torch.tensor(dout))
    ours, cache = an.mha_forward(x, x, x, params, num_heads=H, is_causal=True,   # QK-norm: params
                                 spec=an.AttentionSpec(rope=an.RoPE(theta=10000.0), qk_norm_eps=1e-6))
    dq, dk, dv, grads = an.mha_backward(dout, cache)
    assert max_abs_diff(ours, out.detach().numpy()) < 1e-13
    assert max_abs_diff(dq + dk + dv, tx.grad.numpy()) < 1e-13
    for n in "qkvo":
        assert max_abs_diff(grads[f"W_{n}"], getattr(attn, f"{n}_proj").weight.grad.numpy().T) < 1e-13
    assert max_abs_diff(grads["q_norm"], attn.q_norm.weight.grad.numpy()) < 1e-13
    assert max_abs_diff(grads["k_norm"], attn.k_norm.weight.grad.numpy()) < 1e-13


def test_mha_qk_norm_gradients_match_finite_differences():
    params, x, dout = _params(), randn(R, 3, E), randn(R, 3, E)
    kw = dict(num_heads=H, spec=an.AttentionSpec(qk_norm_eps=1e-3))
    grads = an.mha_backward(dout, an.mha_forward(x, x, x, params, **kw)[1])[3]
    for n in ("q_norm", "k_norm", "W_q"):
        num = numerical_gradient(lambda: float(np.sum(an.mha_forward(x, x, x, params, **kw)[0] * dout)),
                                 params[n])
        assert max_abs_diff(grads[n], num) < 1e-8
    # the weights in params switch QK-norm on (0.2)
    plain = {n: w for n, w in params.items() if n not in ("q_norm", "k_norm")}
    assert "q_norm" not in an.mha_backward(dout, an.mha_forward(x, x, x, plain, num_heads=H)[1])[3]


def test_qk_norm_without_weights_names_them():
    p = an.init_mha_params(E, H, rng=0)
    x = randn(R, 3, E)
    p["q_norm"], p["k_norm"] = np.ones(3), np.ones(D)
    with pytest.raises(ValueError, match="q_norm"):
        an.mha_forward(x, x, x, p, num_heads=H)
    del p["k_norm"]
    with pytest.raises(ValueError, match=r"\['q_norm'\] but not both"):
        an.mha_forward(x, x, x, p, num_heads=H)


def test_init_mha_params_makes_the_norm_weights_as_ones_of_d_k():
    p = an.init_mha_params(E, H, rng=0, d_k=5, d_v=D, qk_norm=True, dtype=np.float32)
    assert p["q_norm"].shape == p["k_norm"].shape == (5,)
    assert p["q_norm"].dtype == p["k_norm"].dtype == np.float32
    assert (p["q_norm"] == 1).all() and (p["k_norm"] == 1).all()
    assert "q_norm" not in an.init_mha_params(E, H, rng=0)


# QK-norm over all heads (OLMo 2): one RMSNorm over a position's h*d_k query features (h_kv*d_k
# key features), before the split into heads; AttentionSpec(qk_norm_scope="all")

def _all_heads_params(dtype=np.float64):
    p = an.init_mha_params(E, H, num_kv_heads=H_KV, bias=False, rng=R, dtype=dtype)
    p["q_norm"] = (1 + 0.3 * randn(R, H * D)).astype(dtype)
    p["k_norm"] = (1 + 0.3 * randn(R, H_KV * D)).astype(dtype)
    return p


def test_rms_norm_all_heads_backward_matches_finite_differences():
    x, w, dy = randn(R, 2, 3, 5, 4), randn(R, 12), randn(R, 2, 3, 5, 4)     # (B, h, L, d)
    dx, dw = rms_norm_all_heads_backward(dy, rms_norm_all_heads_forward(x, w, 1e-3)[1])
    for a, g in ((x, dx), (w, dw)):
        num = numerical_gradient(
            lambda: float(np.sum(rms_norm_all_heads_forward(x, w, 1e-3)[0] * dy)), a)
        assert max_abs_diff(g, num) < 1e-8          # a sum of 120 terms: its rounding / eps
    # one head's output depends on the other heads' features (a per-head norm's would not)
    y = rms_norm_all_heads_forward(x, w, 1e-3)[0]
    x2 = x.copy()
    x2[:, 1] *= 3.0
    assert max_abs_diff(rms_norm_all_heads_forward(x2, w, 1e-3)[0][:, 0], y[:, 0]) > 1e-3


def test_rms_norm_all_heads_equals_the_norm_of_the_projection_before_the_split():
    torch = require("torch")
    x, w = randn(R, 2, 3, 5, 4), randn(R, 12)
    proj = torch.tensor(np.swapaxes(x, 1, 2).reshape(2, 5, 12))            # (B, L, h*d)
    want = proj * torch.rsqrt(proj.pow(2).mean(-1, keepdim=True) + 1e-5) * torch.tensor(w)
    want = want.reshape(2, 5, 3, 4).transpose(1, 2).numpy()                 # split into heads
    assert max_abs_diff(rms_norm_all_heads_forward(x, w, 1e-5)[0], want) < 1e-14


def test_qk_norm_over_all_heads_equals_olmo2_attention_in_float64():
    """Forward and every gradient (the norm weights included) against torch autograd through
    transformers' Olmo2Attention (GQA, RoPE, a causal mask), its norms run in float64."""
    torch = require("torch")
    olmo2 = require("transformers.models.olmo2.modeling_olmo2")
    config = olmo2.Olmo2Config(hidden_size=E, num_attention_heads=H, num_key_value_heads=H_KV,
                               head_dim=D, rms_norm_eps=1e-6, attention_bias=False)
    config._attn_implementation = "sdpa"
    attn = olmo2.Olmo2Attention(config, layer_idx=0).double()
    params = _all_heads_params()
    with torch.no_grad():
        for n in "qkvo":
            getattr(attn, f"{n}_proj").weight.copy_(torch.tensor(params[f"W_{n}"].T))
        attn.q_norm.weight.copy_(torch.tensor(params["q_norm"]))
        attn.k_norm.weight.copy_(torch.tensor(params["k_norm"]))
    for norm in (attn.q_norm, attn.k_norm):      # Olmo2RMSNorm computes in float32
        norm.forward = (lambda m: lambda x: m.weight * x * torch.rsqrt(
            x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))(norm)
    B, L = 2, 5
    x = randn(R, B, L, E)
    cos, sin = an.rope_angles(np.arange(L), D, theta=10000.0)
    emb = tuple(torch.tensor(np.concatenate([c, c], -1))[None] for c in (cos, sin))
    tx = torch.tensor(x, requires_grad=True)
    out, _ = attn(tx, position_embeddings=emb, attention_mask=torch.tensor(
        np.where(an.causal_mask(L), 0.0, -np.inf)))
    dout = randn(R, B, L, E)
    out.backward(torch.tensor(dout))
    spec = an.AttentionSpec(rope=an.RoPE(theta=10000.0), qk_norm_eps=1e-6, qk_norm_scope="all")
    ours, cache = an.mha_forward(x, x, x, params, spec=spec, num_heads=H, is_causal=True)
    dq, dk, dv, grads = an.mha_backward(dout, cache)
    assert max_abs_diff(ours, out.detach().numpy()) < 1e-13
    assert max_abs_diff(dq + dk + dv, tx.grad.numpy()) < 1e-13
    for n in "qkvo":
        assert max_abs_diff(grads[f"W_{n}"], getattr(attn, f"{n}_proj").weight.grad.numpy().T) < 1e-13
    assert max_abs_diff(grads["q_norm"], attn.q_norm.weight.grad.numpy()) < 1e-13
    assert max_abs_diff(grads["k_norm"], attn.k_norm.weight.grad.numpy()) < 1e-13
    # the per-head norm is another function: the same weights per head differ from OLMo 2's
    per_head = dict(params, q_norm=params["q_norm"].reshape(H, D),
                    k_norm=params["k_norm"].reshape(H_KV, D))
    other = an.mha_forward(x, x, x, per_head, spec=spec.replace(qk_norm_scope="head"), num_heads=H,
                           is_causal=True)[0]
    assert max_abs_diff(other, ours) > 1e-3


@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_mha_qk_norm_over_all_heads_gradients_match_finite_differences(kind):
    params, x, dout = _all_heads_params(), randn(R, 2, 3, E), randn(R, 2, 3, E)
    if kind == "layer":
        params["q_norm_bias"], params["k_norm_bias"] = randn(R, H * D), randn(R, H_KV * D)
    spec = an.AttentionSpec(qk_norm=kind, qk_norm_eps=1e-3, qk_norm_scope="all")
    grads = an.mha_backward(dout, an.mha_forward(x, x, x, params, spec=spec, num_heads=H)[1])[3]
    names = ("q_norm", "k_norm", "W_q", "W_k") + (("q_norm_bias", "k_norm_bias") if kind == "layer" else ())
    for n in names:
        num = numerical_gradient(
            lambda: float(np.sum(an.mha_forward(x, x, x, params, spec=spec, num_heads=H)[0] * dout)),
            params[n])
        assert max_abs_diff(grads[n], num) < 1e-8, n


def test_qk_norm_over_all_heads_in_the_decode_step_and_cross_decoding():
    """The decode step, one token at a time, equals the full causal forward; cross-attention
    decoding normalises the cached keys over all heads too (against mha_forward)."""
    params, x = _all_heads_params(), randn(R, 2, 5, E)
    spec = an.AttentionSpec(qk_norm_scope="all")
    full = an.mha_forward(x, x, x, params, spec=spec, num_heads=H, is_causal=True)[0]
    cache = an.KVCache(5)
    steps = [an.mha_decode_step(x[:, t:t + 1], params, cache, spec=spec, num_heads=H) for t in range(5)]
    assert max_abs_diff(np.concatenate(steps, axis=1), full) < 1e-13
    memory = randn(R, 2, 7, E)
    cross = an.AttentionSpec(qk_norm_scope="all")
    kv = an.cross_kv_cache(memory, params, spec=cross, num_heads=H)
    step = an.mha_cross_decode_step(x[:, :2], params, kv, spec=cross, num_heads=H)
    assert max_abs_diff(step, an.mha_forward(x[:, :2], memory, memory, params, spec=cross,
                                             num_heads=H)[0]) < 1e-13
    with pytest.raises(ValueError, match="another k_norm"):      # a cache of the per-head norm
        an.mha_cross_decode_step(x[:, :2], dict(params, k_norm=params["k_norm"].reshape(H_KV, D),
                                                q_norm=params["q_norm"].reshape(H, D)),
                                 kv, spec=cross.replace(qk_norm_scope="head"), num_heads=H)


def test_qk_norm_scope_and_weight_shapes_are_checked_by_name():
    params, x = _all_heads_params(), randn(R, 3, E)
    with pytest.raises(ValueError, match=r"qk_norm_scope must be one of \('head', 'all'\)"):
        an.AttentionSpec(qk_norm_scope="heads")
    with pytest.raises(ValueError, match=r"qk_norm_scope='all'"):     # (h*d_k,) under "head"
        an.mha_forward(x, x, x, params, num_heads=H)
    per_head = dict(params, q_norm=np.ones(D), k_norm=np.ones(D))
    with pytest.raises(ValueError, match=r"params\['q_norm'\] has shape \(4,\), expected \(16,\)"):
        an.mha_forward(x, x, x, per_head, spec=an.AttentionSpec(qk_norm_scope="all"), num_heads=H)
    # a kernel on heads already split cannot normalise over all heads: refused by name
    q = randn(R, 1, H, 3, D)
    with pytest.raises(ValueError, match="spec.qk_norm_scope belongs to multi-head attention"):
        an.sdpa_forward(q, q, q, spec=an.AttentionSpec(qk_norm_scope="all"))
    # Flax's normalize_qk normalises each head: the (h*d_k,) weights are refused by name
    from attention_np.interop.flax import params_to_flax
    with pytest.raises(ValueError, match="over all heads at once"):
        params_to_flax(dict(params, W_k=params["W_q"], W_v=params["W_q"]), H)
