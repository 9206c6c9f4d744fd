"""Rotary position embeddings (variants/rope.py): the property RoPE exists for, its backward by finite
differences, and both layouts against transformers' own implementations (Llama, GPT-J)."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests.helpers import assert_float32_within_framework, max_abs_diff, randn, require

R = np.random.default_rng(12)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_scores_depend_on_relative_position_only(layout):
    q, k = randn(R, 1, 16), randn(R, 1, 16)
    # q at position i, k at position j: the dot product is a function of i - j alone
    s = [(an.apply_rope(q, [i], layout=layout) @ an.apply_rope(k, [j], layout=layout).T).item()
         for i, j in [(3, 1), (10, 8), (102, 100)]]
    assert np.ptp(s) < 1e-12
    assert abs(s[0] - (an.apply_rope(q, [3], layout=layout) @ an.apply_rope(k, [2], layout=layout).T
                       ).item()) > 1e-3          # and it does depend on i - j


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_keeps_norms_and_position_zero_is_identity(layout):
    x = randn(R, 2, 5, 8)
    y = an.apply_rope(x, np.arange(5), layout=layout)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-14)
    assert np.array_equal(y[:, 0], x[:, 0])
    assert max_abs_diff(y[:, 1:], x[:, 1:]) > 1e-2


def test_half_layout_is_interleaved_with_features_permuted():
    x = randn(R, 4, 8)
    perm = np.r_[0:8:2, 1:8:2]                       # (x0, x2, x4, x6, x1, x3, x5, x7)
    y_half = an.apply_rope(x[:, perm], np.arange(4), layout="half")
    y_int = an.apply_rope(x, np.arange(4), layout="interleaved")
    assert max_abs_diff(y_half, y_int[:, perm]) < 1e-15


def test_partial_rotary_dim_leaves_the_rest_unchanged_and_offsets_decode():
    x = randn(R, 3, 6, 10)
    y = an.apply_rope(x, np.arange(6), rotary_dim=4)
    assert np.array_equal(y[..., 4:], x[..., 4:])
    assert max_abs_diff(y[..., :4], an.apply_rope(x[..., :4], np.arange(6))) == 0
    # decoding one position at a time with an offset gives the rows of the full sequence
    step = an.apply_rope(x[:, 4:5], [4], rotary_dim=4)
    assert max_abs_diff(step, y[:, 4:5]) == 0


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_backward_matches_finite_differences(layout, rotary_dim):
    x = randn(R, 2, 3, 6)
    pos = np.array([[0, 5, 9], [2, 3, 4]])           # per-sequence positions (B, L)
    dy = randn(R, 2, 3, 6)
    kw = dict(layout=layout, rotary_dim=rotary_dim, theta=100.0)
    dx = an.apply_rope_backward(dy, pos, **kw)
    num = numerical_gradient(lambda: float(np.sum(an.apply_rope(x, pos, **kw) * dy)), x)
    assert max_abs_diff(dx, num) < 1e-9
    # the backward undoes the forward (a rotation is orthogonal)
    assert max_abs_diff(an.apply_rope_backward(an.apply_rope(x, pos, **kw), pos, **kw), x) < 1e-15


def test_llama_rotate_half_forward_and_backward_float64():
    torch = require("torch")
    llama = require("transformers.models.llama.modeling_llama")
    B, h, L, d = 2, 3, 5, 8
    q, k = randn(R, B, h, L, d), randn(R, B, h, L, d)
    pos = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])   # second sequence at an offset
    cos, sin = an.rope_angles(pos, d, theta=500.0)          # (B, L, d/2)
    tcos, tsin = (torch.tensor(np.concatenate([c, c], -1)) for c in (cos, sin))
    tq, tk = torch.tensor(q, requires_grad=True), torch.tensor(k, requires_grad=True)
    rq, rk = llama.apply_rotary_pos_emb(tq, tk, tcos, tsin)
    dq, dk = randn(R, B, h, L, d), randn(R, B, h, L, d)
    (rq * torch.tensor(dq) + rk * torch.tensor(dk)).sum().backward()
    p = pos[:, None]                                         # heads axis
    assert max_abs_diff(an.apply_rope(q, p, theta=500.0), rq.detach().numpy()) < 1e-15
    assert max_abs_diff(an.apply_rope(k, p, theta=500.0), rk.detach().numpy()) < 1e-15
    assert max_abs_diff(an.apply_rope_backward(dq, p, theta=500.0), tq.grad.numpy()) < 1e-15
    assert max_abs_diff(an.apply_rope_backward(dk, p, theta=500.0), tk.grad.numpy()) < 1e-15


def test_llama_rotary_embedding_angles_are_float32_rounded():
    torch = require("torch")
    llama = require("transformers.models.llama.modeling_llama")
    config = llama.LlamaConfig(hidden_size=32, num_attention_heads=2, rope_theta=10000.0)
    pos = np.arange(64)[None]
    tcos, tsin = llama.LlamaRotaryEmbedding(config)(torch.zeros(1, dtype=torch.float64),
                                                    torch.tensor(pos))
    cos, sin = an.rope_angles(pos, 16)
    # transformers computes the angles in float32 even for a float64 model: the error grows
    # with the position (phi up to 63 rad), so this is the float32 rule, not float64 rounding
    for ours, theirs in ((cos, tcos), (sin, tsin)):
        err = max_abs_diff(np.concatenate([ours, ours], -1), theirs.numpy())
        assert 1e-9 < err < 64 * np.finfo(np.float32).eps


def test_gptj_interleaved_layout():
    torch = require("torch")
    gptj = require("transformers.models.gptj.modeling_gptj")
    B, L, h, d = 2, 4, 3, 8
    x = randn(R, B, L, h, d)                                 # GPT-J keeps heads after positions
    pos = np.arange(L)
    cos, sin = an.rope_angles(np.broadcast_to(pos, (B, L)), d)
    theirs = gptj.apply_rotary_pos_emb(torch.tensor(x), torch.tensor(sin), torch.tensor(cos))
    ours = an.apply_rope(np.swapaxes(x, 1, 2), pos, layout="interleaved")
    assert max_abs_diff(np.swapaxes(ours, 1, 2), theirs.numpy()) < 1e-15


@pytest.mark.float32
def test_float32_against_llama():
    torch = require("torch")
    llama = require("transformers.models.llama.modeling_llama")
    q = randn(R, 2, 6, 16, dtype=np.float32)
    pos = np.arange(6)
    cos, sin = an.rope_angles(pos, 16, dtype=np.float32)
    tc, ts = (torch.tensor(np.concatenate([c, c], -1)) for c in (cos, sin))
    theirs, _ = llama.apply_rotary_pos_emb(torch.tensor(q)[None], torch.tensor(q)[None], tc, ts,
                                           unsqueeze_dim=0)
    ours = an.apply_rope(q, pos)
    # the oracle by definition (RoFormer, half layout): pair feature i with i + d/2 and turn it by
    # pos * theta^(-2i/d), theta = 10000
    x1, x2 = np.split(q.astype(np.float64), 2, axis=-1)
    phi = pos[:, None] * 10000.0 ** (-np.arange(8) / 8)
    oracle = np.concatenate([x1 * np.cos(phi) - x2 * np.sin(phi), x2 * np.cos(phi) + x1 * np.sin(phi)], -1)
    assert_float32_within_framework(ours, theirs[0].numpy(), oracle, name="rope", framework="llama")


@pytest.mark.parametrize("call,exc,words", [
    (lambda: an.apply_rope(np.ones((3, 5)), np.arange(3)), ValueError, "rotary_dim"),
    (lambda: an.apply_rope(np.ones((3, 8)), np.arange(3), rotary_dim=10), ValueError, "rotary_dim"),
    (lambda: an.apply_rope(np.ones((3, 8)), np.arange(4)), ValueError, "positions"),
    (lambda: an.apply_rope(np.ones((3, 8)), np.arange(3.0)), TypeError, "positions"),
    (lambda: an.apply_rope(np.ones((2, 3, 3, 8)), np.ones((2, 3), int)), ValueError, "positions[:, None]"),
    (lambda: an.apply_rope(np.ones((3, 8)), np.arange(3), layout="neox"), ValueError, "layout"),
    (lambda: an.apply_rope(np.ones((3, 8)), np.arange(3), theta=-1.0), ValueError, "theta"),
    (lambda: an.apply_rope(np.ones((3, 8), int), np.arange(3)), TypeError, "x"),
    (lambda: an.rope_angles(np.arange(3), 7), ValueError, "d"),
])
def test_bad_arguments_name_themselves(call, exc, words):
    with pytest.raises(exc, match=None) as info:
        call()
    assert words in str(info.value)
