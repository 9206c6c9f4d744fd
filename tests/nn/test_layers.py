"""Each layer of attention_np.nn: its backward against central differences (float64) and its
forward and backward against PyTorch (float64, random upstream gradients)."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np import gradcheck
from attention_np.nn import (
    cross_entropy_backward,
    cross_entropy_forward,
    embedding_backward,
    embedding_forward,
    ffn_backward,
    ffn_forward,
    init_ffn_params,
    layernorm_backward,
    layernorm_forward,
    sinusoidal_encoding,
)
from tests.helpers import max_abs_diff, randn, require


def _t(torch, a, grad=True):
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


# ---- layer norm ---------------------------------------------------------------------------

def test_layernorm_backward_matches_finite_differences(rng):
    x, gamma, beta = randn(rng, 2, 3, 5), randn(rng, 5), randn(rng, 5)
    result = gradcheck(lambda x, g, b: layernorm_forward(x, g, b),
                       lambda dy, c: layernorm_backward(dy, c), (x, gamma, beta))
    assert result.ok, str(result)


def test_layernorm_output_has_zero_mean_unit_variance_before_affine(rng):
    x = 3 + 5 * randn(rng, 4, 7)
    y, _ = layernorm_forward(x, np.ones(7), np.zeros(7), eps=0.0)
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-14)
    np.testing.assert_allclose(y.var(-1), 1, atol=1e-13)


def test_layernorm_matches_torch_values_and_grads(rng):
    torch = require("torch")
    x, gamma, beta, dy = randn(rng, 2, 4, 6), randn(rng, 6), randn(rng, 6), randn(rng, 2, 4, 6)
    y, cache = layernorm_forward(x, gamma, beta, eps=1e-5)
    dx, dgamma, dbeta = layernorm_backward(dy, cache)
    tx, tg, tb = _t(torch, x), _t(torch, gamma), _t(torch, beta)
    ty = torch.nn.functional.layer_norm(tx, (6,), tg, tb, eps=1e-5)
    ty.backward(torch.tensor(dy))
    assert max_abs_diff(y, ty.detach()) < 1e-13
    for ours, theirs in ((dx, tx), (dgamma, tg), (dbeta, tb)):
        assert max_abs_diff(ours, theirs.grad) < 1e-12


def test_layernorm_rejects_gamma_of_wrong_width(rng):
    with pytest.raises(ValueError, match=r"gamma has shape \(4,\) but x of shape \(2, 5\) needs"):
        layernorm_forward(randn(rng, 2, 5), np.ones(4), np.zeros(4))


# ---- feed-forward network, Eq. (2) -------------------------------------------------------

@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_backward_matches_finite_differences(rng, activation):
    x = randn(rng, 2, 3, 4)
    params = init_ffn_params(4, 6, rng=1)
    params = {k: v + 0.1 * randn(rng, *v.shape) for k, v in params.items()}  # non-zero biases
    result = gradcheck(lambda x, p: ffn_forward(x, p, activation=activation),
                       lambda dy, c: ffn_backward(dy, c), (x, params))
    assert result.ok, str(result)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_matches_torch_values_and_grads(rng, activation):
    torch = require("torch")
    F = torch.nn.functional
    x, dy = randn(rng, 3, 5, 4), randn(rng, 3, 5, 4)
    p = {k: v + 0.1 * randn(rng, *v.shape) for k, v in init_ffn_params(4, 8, rng=2).items()}
    y, cache = ffn_forward(x, p, activation=activation)
    dx, grads = ffn_backward(dy, cache)
    tx, tp = _t(torch, x), {k: _t(torch, v) for k, v in p.items()}
    act = F.relu if activation == "relu" else F.gelu       # F.gelu: exact erf form by default
    ty = act(tx @ tp["W_1"] + tp["b_1"]) @ tp["W_2"] + tp["b_2"]
    ty.backward(torch.tensor(dy))
    assert max_abs_diff(y, ty.detach()) < 1e-13
    assert max_abs_diff(dx, tx.grad) < 1e-12
    for k in p:
        assert max_abs_diff(grads[k], tp[k].grad) < 1e-12, k


def test_ffn_rejects_unknown_activation(rng):
    with pytest.raises(ValueError, match="activation must be one of"):
        ffn_forward(randn(rng, 2, 4), init_ffn_params(4, 6, rng=0), activation="tanh")


# ---- embedding, §3.4 -----------------------------------------------------------------------

def test_embedding_backward_accumulates_repeated_tokens(rng):
    W = randn(rng, 5, 3)
    tokens = np.array([[1, 1, 4], [1, 0, 4]])           # token 1 three times, token 4 twice
    dx = randn(rng, 2, 3, 3)
    x, cache = embedding_forward(tokens, W, scale=2.0)
    np.testing.assert_array_equal(x[0, 0], 2.0 * W[1])
    dW = embedding_backward(dx, cache)
    np.testing.assert_allclose(dW[1], 2.0 * (dx[0, 0] + dx[0, 1] + dx[1, 0]), rtol=1e-14)
    np.testing.assert_array_equal(dW[[2, 3]], 0)


def test_embedding_backward_matches_finite_differences(rng):
    tokens = np.array([[0, 2, 2, 3]])
    result = gradcheck(lambda W: embedding_forward(tokens, W, scale=1.5),
                       lambda dx, c: (embedding_backward(dx, c),), (randn(rng, 4, 3),))
    assert result.ok, str(result)


def test_embedding_matches_torch_values_and_grads(rng):
    torch = require("torch")
    W, tokens = randn(rng, 6, 4), rng.integers(0, 6, size=(3, 5))
    dx = randn(rng, 3, 5, 4)
    x, cache = embedding_forward(tokens, W, scale=2.0)
    tW = _t(torch, W)
    tx = torch.nn.functional.embedding(torch.tensor(tokens), tW) * 2.0
    tx.backward(torch.tensor(dx))
    assert max_abs_diff(x, tx.detach()) == 0
    assert max_abs_diff(embedding_backward(dx, cache), tW.grad) < 1e-14


def test_embedding_backward_adds_in_the_order_of_np_add_at(rng):
    """The bincount sums are np.add.at's in float64 (same order, same numbers); in float32 they
    add in float64 and round once, so they are at least as close to the float64 sums."""
    tokens = rng.integers(0, 7, size=(40, 10))              # every id repeated many times
    dx = randn(rng, 40, 10, 8)
    expected = np.zeros((7, 8))
    np.add.at(expected, tokens.reshape(-1), dx.reshape(-1, 8))
    np.testing.assert_array_equal(embedding_backward(dx, embedding_forward(tokens, randn(rng, 7, 8))[1]),
                                  expected)
    dx32, W32 = dx.astype(np.float32), randn(rng, 7, 8).astype(np.float32)
    dW32 = embedding_backward(dx32, embedding_forward(tokens, W32, scale=3.0)[1])
    at32 = np.zeros((7, 8), np.float32)
    np.add.at(at32, tokens.reshape(-1), dx32.reshape(-1, 8))
    at32 *= np.float32(3.0)
    sums = np.zeros((7, 8))                                  # the float64 sums of the float32 dx
    np.add.at(sums, tokens.reshape(-1), dx32.reshape(-1, 8).astype(np.float64))
    assert dW32.dtype == np.float32
    np.testing.assert_array_equal(dW32, sums.astype(np.float32) * np.float32(3.0))
    assert np.abs(dW32 - 3.0 * sums).max() <= np.abs(at32 - 3.0 * sums).max()


def test_embedding_rejects_out_of_range_token(rng):
    with pytest.raises(ValueError, match=r"tokens must be in \[0, 5\)"):
        embedding_forward(np.array([[0, 5]]), randn(rng, 5, 3))


# ---- positional encoding, §3.5 -----------------------------------------------------------

def test_sinusoidal_encoding_follows_the_formula_of_section_3_5():
    pe = sinusoidal_encoding(50, 16)
    pos, i = 37, 5                                       # column 2i = 10 and 2i + 1 = 11
    assert pe[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / 16)), abs=1e-15)
    assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / 16)), abs=1e-15)


def test_sinusoidal_encoding_of_an_offset_is_a_linear_map_of_the_encoding():
    # §3.5: "PE_{pos+k} can be represented as a linear function of PE_pos"
    pe = sinusoidal_encoding(40, 8)
    k = 3
    M, *_ = np.linalg.lstsq(pe[:-k], pe[k:], rcond=None)
    np.testing.assert_allclose(pe[:-k] @ M, pe[k:], atol=1e-10)


def test_sinusoidal_encoding_rejects_odd_width():
    with pytest.raises(ValueError, match="d_model must be even"):
        sinusoidal_encoding(4, 5)


# ---- cross-entropy -------------------------------------------------------------------------

def test_cross_entropy_matches_torch_value_and_grad(rng):
    torch = require("torch")
    logits, targets = 3 * randn(rng, 4, 5, 7), rng.integers(0, 7, size=(4, 5))
    loss, cache = cross_entropy_forward(logits, targets)
    dlogits = cross_entropy_backward(0.7, cache)
    tl = _t(torch, logits)
    tloss = torch.nn.functional.cross_entropy(tl.reshape(-1, 7), torch.tensor(targets).reshape(-1))
    (0.7 * tloss).backward()
    assert abs(loss - tloss.item()) < 1e-13
    assert max_abs_diff(dlogits, tl.grad) < 1e-15


def test_cross_entropy_is_stable_for_huge_logits():
    loss, _ = cross_entropy_forward(np.array([[1e4, 0.0, -1e4]]), np.array([1]))
    assert loss == pytest.approx(1e4)
