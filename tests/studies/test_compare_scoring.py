"""The additive vs dot-product experiment: its gradients, its task, its bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.studies import compare_scoring as cs


@pytest.mark.parametrize("scoring", cs.SCORINGS)
def test_parameter_gradients_match_finite_differences(scoring, rng):
    params = cs.init_scoring_params(scoring, 5, 4, rng)
    rotation, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    x_q, x_k, v, target = cs.retrieval_batch(rng, rotation, 3, 4, 2, 0.5)

    def forward(p):
        return cs.scoring_forward(scoring, p, x_q, x_k, v)

    def backward(dout, cache):
        return (cs.scoring_backward(scoring, dout, cache),)

    result = an.gradcheck(forward, backward, (params,))
    assert result.ok, str(result)


@pytest.mark.parametrize("scoring", cs.SCORINGS)
def test_every_scoring_cache_has_its_weights(scoring, rng):
    params = cs.init_scoring_params(scoring, 5, 4, rng)
    rotation, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    x_q, x_k, v, _ = cs.retrieval_batch(rng, rotation, 3, 4, 2, 0.5)
    out, cache = cs.scoring_forward(scoring, params, x_q, x_k, v)
    assert cache.weights.shape == (3, 1, 4)
    np.testing.assert_allclose(cache.weights @ v, out, rtol=1e-12)


def test_retrieval_query_is_the_rotated_target_key_when_noise_is_zero(rng):
    rotation, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    x_q, x_k, v, target = cs.retrieval_batch(rng, rotation, 10, 5, 3, noise=0.0)
    assert x_q.shape == (10, 1, 6) and x_k.shape == (10, 5, 6) and v.shape == (10, 5, 3)
    unrotated = x_q[:, 0] @ rotation                         # R is orthogonal: R.T undoes it
    np.testing.assert_allclose(unrotated, x_k[np.arange(10), target], atol=1e-12)


def test_steps_to_threshold_uses_a_running_mean():
    curve = np.r_[np.full(10, 5.0), 0.0, np.full(10, 5.0), np.zeros(30)]
    # the single 0 at step 10 does not count; the running mean of 4 drops below 1 at step 24
    assert cs.steps_to_threshold(curve, 1.0, window=4) == 24
    assert cs.steps_to_threshold(np.full(8, 5.0), 1.0, window=4) == 8


@pytest.fixture(scope="module")
def small_run():
    return cs.train_retrieval([16], steps=150, n_eval=256, seed=3)


def test_scaled_and_unscaled_start_from_the_same_weights(small_run):
    # The comparison needs both models to start from the same weights: same seed, same arrays.
    scaled = cs.init_scoring_params("scaled", 16, 16, np.random.default_rng(5))
    unscaled = cs.init_scoring_params("unscaled", 16, 16, np.random.default_rng(5))
    assert scaled.keys() == unscaled.keys() == {"W_q", "W_k"}
    for name in scaled:
        np.testing.assert_array_equal(scaled[name], unscaled[name])
    # and so (the scale does not change the argmax) the same accuracy before training
    assert small_run["accuracy_init_scaled"][0] == small_run["accuracy_init_unscaled"][0]


def test_scaled_dot_product_learns_the_retrieval_task(small_run):
    assert small_run["accuracy_init_scaled"][0] < 0.3        # chance is 1/8
    assert small_run["accuracy_scaled"][0] > 0.8
    curve = small_run["curve_scaled"][0]
    assert curve[-20:].mean() < 0.5 * curve[:20].mean()


def test_result_has_one_entry_per_d_k_and_scoring_in_range(small_run):
    assert small_run["d_k"].tolist() == [16.0]
    for s in cs.SCORINGS:
        assert small_run[f"curve_{s}"].shape == (1, 150)
        assert np.all(small_run[f"curve_{s}"] >= 0)                      # a squared error
        for key in ("accuracy", "accuracy_init"):
            acc = small_run[f"{key}_{s}"]
            assert acc.shape == (1,) and np.all((acc >= 0) & (acc <= 1))
            assert np.all(acc * 256 == np.round(acc * 256))             # a count of n_eval=256
        steps = small_run[f"steps_to_threshold_{s}"]
        assert steps.shape == (1,) and np.all((steps >= 19) & (steps <= 150))   # 20-step window
        assert np.all(steps == np.round(steps))
        assert small_run[f"loss_{s}"].shape == (1,) and np.all(small_run[f"loss_{s}"] >= 0)
        assert small_run[f"grad_init_{s}"].shape == (1,) and np.all(small_run[f"grad_init_{s}"] > 0)


def test_same_seed_gives_the_same_run():
    a = cs.train_retrieval([4], scorings=["additive"], steps=5, n_eval=16, seed=1)
    b = cs.train_retrieval([4], scorings=["additive"], steps=5, n_eval=16, seed=1)
    np.testing.assert_array_equal(a["curve_additive"], b["curve_additive"])


def test_bad_arguments_raise_value_error_naming_them():
    with pytest.raises(ValueError, match="scorings"):
        cs.train_retrieval([4], scorings=["cosine"])
    with pytest.raises(ValueError, match="d_ks"):
        cs.train_retrieval([])
    with pytest.raises(ValueError, match="d_ks"):
        cs.train_retrieval([2.5])                       # refused, not silently cut to 2
    with pytest.raises(ValueError, match="steps"):
        cs.train_retrieval([4], steps=0)
    with pytest.raises(ValueError, match="scoring must be one of"):
        cs.init_scoring_params("cosine", 4, 4, 0)
