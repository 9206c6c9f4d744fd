"""attention_np.studies.trained_scaling: footnote 4's quantities measured on given q and k."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np.studies.trained_scaling import attention_statistics


def test_unit_variance_noise_meets_footnote4():
    """With iid N(0, 1) components the assumption holds: both variance ratios are 1 within
    sampling error, and the entropy equals the random baseline's (the same distribution)."""
    rng = np.random.default_rng(0)
    B, h, L, d_k = 64, 3, 16, 32
    q, k = rng.standard_normal((2, B, h, L, d_k))
    s = attention_statistics(q, k, rng=1)
    assert np.all(np.abs(s["var_ratio"] - 1) < 0.1), s["var_ratio"]
    assert np.all(np.abs(s["independent_ratio"] - 1) < 0.1), s["independent_ratio"]
    assert np.all(np.abs(s["mean_ratio"]) < 0.1)
    np.testing.assert_allclose(s["max_entropy"], np.log(L))
    assert np.all(np.abs(s["entropy"] - s["random_entropy"]) < 0.05)
    assert np.all(s["entropy"] < s["max_entropy"])


def test_scaled_and_aligned_keys_are_seen():
    """Keys equal to 3 × their own query: Var(q·k) is at least 9 d_k; the matched pairs (q_i·3q_i, large)
    make it exceed what independent components give, and the softmax is far sharper than random."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((32, 2, 8, 16))
    k = 3 * q                                                   # k_j = 3 q_j: each query matches its own key
    s = attention_statistics(q, k)
    assert np.all(s["var_ratio"] > 9 * 0.8)
    assert np.all(s["var_ratio"] > s["independent_ratio"])      # the diagonal pairs are correlated
    assert np.all(s["entropy"] < 0.5 * s["random_entropy"])


def test_mask_restricts_pairs_and_rows():
    """Only allowed pairs count: the uniform entropy is the mean log of allowed keys per row, and a
    row with no allowed key is left out."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 2, 1, 4, 8))
    mask = np.array([[True, True, False, False],
                     [True, True, True, False],
                     [False] * 4,                               # a query with nothing to attend to
                     [True] * 4])                               # (L, S)
    s = attention_statistics(q, k, mask)
    np.testing.assert_allclose(s["max_entropy"], (np.log(2) + np.log(3) + np.log(4)) / 3)
    # Var/d_k over the allowed pairs only, computed directly
    dots = (q @ np.swapaxes(k, -1, -2))[:, 0][:, mask]          # (B, allowed pairs)
    np.testing.assert_allclose(s["var_ratio"], dots.var() / 8)


def test_refuses_mismatched_shapes():
    expected = r"q must be \(B, h, L, d_k\).*got q \(2, 1, 4, 8\) and k \(2, 1, 4, 6\)"
    with pytest.raises(ValueError, match=expected):
        attention_statistics(np.zeros((2, 1, 4, 8)), np.zeros((2, 1, 4, 6)))
