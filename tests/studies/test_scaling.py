"""The footnote-4 study: measured moments against the analytic ones, saturation, gradients."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np.studies import scaling

D_KS = [1, 4, 16, 64, 256, 1024]


@pytest.fixture(scope="module")
def moments():
    return scaling.dot_product_moments(D_KS, n_samples=20_000, rng=1)


def test_dot_product_variance_matches_d_k_within_five_standard_errors(moments):
    d_k = moments["d_k"]
    rel_err = np.abs(moments["var"] / d_k - 1)
    assert np.all(rel_err < 5 * moments["var_rel_se"]), rel_err


def test_dot_product_mean_is_zero_within_five_standard_errors(moments):
    se = np.sqrt(moments["d_k"] / 20_000)   # std of q·k is sqrt(d_k)
    assert np.all(np.abs(moments["mean"]) < 5 * se)


def test_relative_standard_error_formula_matches_repeated_measurements():
    # The spread of 200 independent variance estimates is the standard error the docstring derives.
    rng = np.random.default_rng(0)
    d_k, n = 4, 500
    estimates = [scaling.dot_product_moments([d_k], n_samples=n, rng=rng)["var"][0] / d_k
                 for _ in range(200)]
    predicted = scaling.dot_product_moments([d_k], n_samples=n, rng=0)["var_rel_se"][0]
    assert np.std(estimates) == pytest.approx(predicted, rel=0.25)


@pytest.fixture(scope="module")
def saturation():
    return scaling.softmax_saturation(D_KS, n_keys=16, n_queries=2_000, rng=2)


def test_scaled_rows_divide_the_scores_by_sqrt_d_k():
    # At d_k = 4 the scale is 1/2 (a wrong 1/d_k would be 1/4; at d_k = 1 both are 1).
    n, S, d_k = 50, 8, 4
    res = scaling.softmax_saturation([d_k], n_keys=S, n_queries=n, rng=9)
    rng = np.random.default_rng(9)                        # the same draws, made here
    q = rng.standard_normal((n, 1, d_k))
    k = rng.standard_normal((n, S, d_k))
    for how, scale in (("scaled", 0.5), ("unscaled", 1.0)):
        scores = (q @ np.swapaxes(k, -1, -2))[:, 0] * scale          # (n, S)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        assert res[f"max_weight_{how}"][0] == pytest.approx(w.max(-1).mean(), rel=1e-12)
        assert res[f"entropy_{how}"][0] == pytest.approx(-(w * np.log(w)).sum(-1).mean(),
                                                          rel=1e-12)


def test_scale_is_irrelevant_when_d_k_is_one(saturation):
    assert saturation["max_weight_scaled"][0] == saturation["max_weight_unscaled"][0]
    assert saturation["entropy_scaled"][0] == saturation["entropy_unscaled"][0]


def test_unscaled_softmax_saturates_as_d_k_grows(saturation):
    assert np.all(np.diff(saturation["max_weight_unscaled"]) > 0)
    assert np.all(np.diff(saturation["entropy_unscaled"]) < 0)
    assert saturation["max_weight_unscaled"][-1] > 0.9
    assert saturation["entropy_unscaled"][-1] < 0.1 * saturation["max_entropy"]


def test_scaled_softmax_keeps_its_shape_as_d_k_grows(saturation):
    # scores ~ N(0, |q|^2 / d_k) -> N(0, 1): the row statistics settle, they do not drift to one-hot.
    assert np.ptp(saturation["max_weight_scaled"]) < 0.06
    assert np.ptp(saturation["entropy_scaled"]) < 0.1
    assert np.all(saturation["entropy_scaled"] > 0.9 * saturation["max_entropy"] - 0.3)


def test_entropy_is_between_zero_and_log_s(saturation):
    for how in ("scaled", "unscaled"):
        h = saturation[f"entropy_{how}"]
        assert np.all((h >= 0) & (h <= saturation["max_entropy"] + 1e-12))


@pytest.fixture(scope="module")
def gradients():
    return scaling.softmax_gradients(D_KS, n_keys=16, d_v=16, n_queries=2_000, rng=3)


def test_gradient_ratios_are_one_when_d_k_is_one(gradients):
    # (that the scaled run uses 1/sqrt(d_k) is checked at d_k = 32 by the independent VJP test)
    for g in ("dscores", "dq"):
        for stat in ("rms", "median"):
            assert gradients[f"{g}_ratio_{stat}"][0] == 1.0


def test_typical_score_gradient_vanishes_without_scaling(gradients):
    median = gradients["dscores_median_unscaled"]
    assert np.all(np.diff(median[1:]) < 0)
    assert median[-1] < 1e-4 * median[0]     # measured 3.8e-5 / 0.98: a drop of 2.6e4


def test_scaled_score_gradient_does_not_shrink_with_d_k(gradients):
    for stat in ("rms", "median"):
        g = gradients[f"dscores_{stat}_scaled"]
        assert g.min() > 0.8 * g[0]


def test_score_gradients_match_an_independent_softmax_vjp():
    # The same numbers from a direct computation of the gradient w.r.t. the scores.
    d_k, n, S, d_v = 32, 50, 8, 4
    res = scaling.softmax_gradients([d_k], n_keys=S, d_v=d_v, n_queries=n, rng=7)
    rng = np.random.default_rng(7)
    q = rng.standard_normal((n, 1, d_k))
    k = rng.standard_normal((n, S, d_k))
    v = rng.standard_normal((n, S, d_v))
    dout = rng.standard_normal((n, 1, d_v))
    for how, scale in (("scaled", 1 / np.sqrt(d_k)), ("unscaled", 1.0)):
        scores = (q @ np.swapaxes(k, -1, -2)) * scale
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        dw = dout @ np.swapaxes(v, -1, -2)
        jac = w[..., :, None] * (np.eye(S) - w[..., None, :])     # (n, 1, S, S), small on purpose
        dscores = np.einsum("nli,nlij->nlj", dw, jac)
        norms = np.linalg.norm(dscores[:, 0], axis=-1)
        assert res[f"dscores_median_{how}"][0] == pytest.approx(np.median(norms), rel=1e-10)
        dq = (dscores @ k) * scale
        assert res[f"dq_rms_{how}"][0] == pytest.approx(
            np.sqrt(np.mean(np.linalg.norm(dq[:, 0], axis=-1) ** 2)), rel=1e-10)


def test_same_seed_gives_the_same_numbers():
    a = scaling.softmax_saturation([8, 64], n_queries=100, rng=5)
    b = scaling.softmax_saturation([8, 64], n_queries=100, rng=5)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize("bad", [[0, 4], [2.5], [], [[4]]])
def test_bad_d_ks_raise_value_error_naming_them(bad):
    with pytest.raises(ValueError, match="d_ks"):
        scaling.dot_product_moments(bad)


def test_bad_sample_count_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="n_queries"):
        scaling.softmax_saturation([4], n_queries=0)


def test_format_table_names_a_missing_column(moments):
    assert "var_scaled" in scaling.format_table(moments, ["d_k", "var_scaled"])
    with pytest.raises(ValueError, match="nope"):
        scaling.format_table(moments, ["d_k", "nope"])
