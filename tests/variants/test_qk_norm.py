"""QK-norm (variants/qk_norm.py): RMSNorm per query and key head in mha_forward, against transformers'
Qwen3Attention (GQA, RoPE, float64, forward and every gradient incl. the norm weights) and by
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.variants.qk_norm import rms_norm_backward, rms_norm_forward
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
