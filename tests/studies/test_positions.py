"""attention_np.studies.positions (notebook 06): each measurement against an independent computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attention_np.nn import ModelConfig, init_model, model_forward, sinusoidal_encoding
from attention_np.studies import positions


def test_wavelengths_follow_the_paper_formula():
    d_model = 16
    i = np.arange(d_model // 2)
    np.testing.assert_allclose(positions.sinusoid_wavelengths(d_model),
                               2 * np.pi * 10000.0 ** (2 * i / d_model), rtol=1e-14)
    # a geometric progression from 2π to just under 10000·2π
    w = positions.sinusoid_wavelengths(d_model)
    assert w[0] == pytest.approx(2 * np.pi) and w[-1] < 2e4 * np.pi
    np.testing.assert_allclose(w[1:] / w[:-1], 10000.0 ** (2 / d_model), rtol=1e-12)


def test_measured_wavelengths_recover_a_known_period():
    """A table of sines of known periods, not built from the PE formula."""
    periods = np.array([7.3, 31.0, 250.0])
    pos = np.arange(5000)[:, None]
    table = np.zeros((5000, 6))
    table[:, 0::2] = np.sin(2 * np.pi * pos / periods)
    np.testing.assert_allclose(positions.measured_wavelengths(table, [0, 1, 2]), periods, rtol=1e-4)
    # one rising crossing only (the one at position 0): no period to measure
    assert np.isnan(positions.measured_wavelengths(table[:200], [2]))[0]


def test_measured_wavelengths_of_the_pe_table():
    pe = sinusoidal_encoding(5000, 64)
    pairs = np.array([0, 5, 10, 20])
    np.testing.assert_allclose(positions.measured_wavelengths(pe, pairs),
                               positions.sinusoid_wavelengths(64)[pairs], rtol=1e-5)


@pytest.mark.parametrize("k", [0, 1, 3, 50, -7])
def test_shift_matrix_moves_pe_by_k_for_every_position(k):
    d_model, L = 32, 300
    pe = sinusoidal_encoding(L, d_model)
    m = positions.shift_matrix(k, d_model)
    src = np.arange(max(0, -k), min(L, L - k))                  # pos with pos + k in the table
    np.testing.assert_allclose(pe[src] @ m, pe[src + k], atol=1e-12)
    np.testing.assert_allclose(m @ m.T, np.eye(d_model), atol=1e-14)


def test_shift_matrices_compose():
    m3, m4, m7 = (positions.shift_matrix(k, 8) for k in (3, 4, 7))
    np.testing.assert_allclose(m3 @ m4, m7, atol=1e-14)
    np.testing.assert_allclose(positions.shift_matrix(0, 8), np.eye(8), atol=0)


def test_dot_by_distance_against_a_loop():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((7, 4))
    mean, deviation = positions.dot_by_distance(table)
    for d in range(7):
        pairs = [table[i] @ table[j] for i in range(7) for j in range(7) if abs(i - j) == d]
        assert mean[d] == pytest.approx(np.mean(pairs))
    assert deviation > 0.5                       # a random table is no function of |i - j|


def test_pe_dot_product_is_a_function_of_distance():
    d_model = 64
    mean, deviation = positions.dot_by_distance(sinusoidal_encoding(150, d_model))
    assert deviation < 1e-11
    assert mean[0] == pytest.approx(d_model / 2)
    np.testing.assert_allclose(mean, positions.dot_closed_form(np.arange(150), d_model), atol=1e-11)


def _brute_force_best(length, vocab_size):
    """Best accuracy of any function of (own token, token counts), by enumerating every sequence."""
    seqs = np.array(list(itertools.product(range(vocab_size), repeat=length)))
    targets = seqs[:, ::-1]
    right = {}
    for s, t in zip(seqs, targets, strict=True):
        counts = tuple(np.bincount(s, minlength=vocab_size))
        for a, b in zip(s, t, strict=True):
            right.setdefault((a, counts), np.zeros(vocab_size))[b] += 1
    return seqs, targets, sum(r.max() for r in right.values()) / seqs.size


@pytest.mark.parametrize("length,vocab_size", [(4, 3), (5, 3), (6, 2), (3, 4), (1, 2), (2, 3)])
def test_position_blind_bound_equals_brute_force(length, vocab_size):
    seqs, targets, best = _brute_force_best(length, vocab_size)
    assert positions.position_blind_accuracy(length, vocab_size) == pytest.approx(best, abs=1e-12)
    # the predictor reaches it, and so does every guess position_blind_guesses calls best
    pred = positions.position_blind_predict(seqs, vocab_size)
    assert (pred == targets).mean() == pytest.approx(best, abs=1e-12)
    guesses = positions.position_blind_guesses(seqs, vocab_size)          # (N, L, V)
    last = vocab_size - 1 - guesses[..., ::-1].argmax(-1)                # ties: the highest token
    assert (last == targets).mean() == pytest.approx(best, abs=1e-12)


def test_position_blind_bound_of_the_lesson_task_is_above_chance():
    bound = positions.position_blind_accuracy(10, 10)
    assert 0.1 < bound < 0.5


def test_position_blind_inputs_are_checked():
    with pytest.raises(ValueError, match="tokens must"):
        positions.position_blind_predict(np.array([[0, 5]]), 3)
    with pytest.raises(ValueError, match="tokens must"):
        positions.position_blind_guesses(np.array([0, 1]), 3)
    with pytest.raises(ValueError, match="length"):
        positions.position_blind_accuracy(0, 10)
    with pytest.raises(ValueError, match="multisets"):
        positions.position_blind_accuracy(16, 14)
    with pytest.raises(ValueError, match="d_model"):
        positions.shift_matrix(1, 7)
    with pytest.raises(TypeError, match="k must be"):
        positions.shift_matrix(1.5, 8)
    with pytest.raises(ValueError, match="pairs"):
        positions.measured_wavelengths(np.zeros((10, 4)), [2])


def test_encoder_without_pe_is_permutation_equivariant_and_with_pe_is_not():
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 10, size=(4, 8))
    perm = rng.permutation(8)
    for positional, equivariant in ((False, True), (True, False)):
        cfg = ModelConfig(max_len=8, d_model=16, num_heads=2, d_ff=32, positional=positional)
        params = init_model(cfg, rng=0)
        logits, _ = model_forward(params, tokens, cfg)
        logits_perm, _ = model_forward(params, tokens[:, perm], cfg)
        diff = np.abs(logits_perm - logits[:, perm]).max()
        assert (diff < 1e-12) == equivariant, (positional, diff)


def test_positional_switch_adds_the_pe_or_nothing():
    """The model's logits against the pipeline written out: embed · sqrt(d_model) (+ PE), one layer."""
    from attention_np.nn.encoder import encoder_layer_forward, sub

    assert ModelConfig().positional is True
    tokens = np.array([[1, 2, 3, 4, 5, 6], [6, 6, 0, 1, 1, 2]])
    for positional in (True, False):
        cfg = ModelConfig(max_len=6, d_model=8, num_heads=2, d_ff=16, num_layers=1,
                          positional=positional)
        params = init_model(cfg, rng=0)
        x = params["embed"][tokens] * np.sqrt(cfg.d_model)
        if positional:
            x = x + sinusoidal_encoding(6, cfg.d_model)
        h, _ = encoder_layer_forward(x, sub(params, "layers.0"), num_heads=2)
        expected = h @ params["W_out"] + params["b_out"]
        logits, _ = model_forward(params, tokens, cfg)
        np.testing.assert_allclose(logits, expected, rtol=1e-12, atol=1e-12)


def test_with_and_without_positions_differ_only_in_the_switch():
    """Same seed, same initial params; only ModelConfig.positional differs (0 steps: no training)."""
    cfg = ModelConfig(max_len=4, vocab_size=3, d_model=8, num_heads=2, d_ff=16, num_layers=1)
    runs = positions.train_with_and_without_positions((5,), config=cfg, steps=0)
    a, b = runs[True][5], runs[False][5]
    assert a.config.positional is True and b.config.positional is False
    assert {**vars(a.config), "positional": None} == {**vars(b.config), "positional": None}
    assert a.params.keys() == b.params.keys()
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
