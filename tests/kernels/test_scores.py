"""The scores of Eq. (1) (kernels/scores.py): ``q`` scaled before the product, the product scaled
after when ``q * scale`` overflows, and a bias that adds batch dims. Found by mutation testing
(docs/mutation.md); each test names the mutant it kills. The oracle: the definition, or float64
on the same float32 inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import reference
from tests.helpers import max_abs_diff, randn
from tests.oracles import softmax_rows


@pytest.mark.parametrize("q_mag, scale, k_mag", [(2e8, 2e30, 2.5e-39), (3e38, 1.5, 2e-39),
                                                  (1e10, 1e30, 1e-10)])
def test_float32_scores_representable_where_q_times_scale_is_not(rng, q_mag, scale, k_mag):
    """Kills any change to the fallback ``(q @ k.T) * scale`` of the forward and of the
    backward's dk, or to their ``abs(scale) > 1`` conditions (scale 1.5 is in (1, 2]), and a
    dropped ``errstate(over=...)`` (a RuntimeWarning escaping): ``q * scale`` overflows float32
    while the scores (k tiny) are O(1). The oracle: float64 (no overflow) on the same float32
    inputs. The last case is the one first reported: scale 1e30, q ~ 1e10, k ~ 1e-10."""
    q = (q_mag * rng.uniform(-1, 1, (2, 3, 2))).astype(np.float32)
    k = (k_mag * rng.uniform(-1, 1, (2, 4, 2))).astype(np.float32)
    v = (0.1 * rng.standard_normal((2, 4, 5))).astype(np.float32)
    dout = (1e-3 * rng.standard_normal((2, 3, 5))).astype(np.float32)
    q[0, 0, 0] = q_mag                                     # q * scale > float32 max there
    with np.errstate(over="ignore"):
        assert not np.isfinite(q * np.float32(scale)).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v, scale=scale)
        grads = an.sdpa_backward(dout, cache)
    out64, cache64 = reference.sdpa_forward(*(x.astype(np.float64) for x in (q, k, v)), scale=scale)
    grads64 = reference.sdpa_backward(dout.astype(np.float64), cache64)
    saturated = k_mag == 1e-10     # scores ~1e30: one-hot weights; dscores is float32 rounding
    for i, (ours, want) in enumerate(zip((out, *grads), (out64, *grads64), strict=True)):
        assert ours.dtype == np.float32 and np.isfinite(ours).all()
        if saturated and i > 0:    # (~1e-11) times 1e30 in dq, dk: finite is all that is defined
            continue
        # 5 %: k is subnormal, and dq's product dscores @ k is deeper subnormal before it is
        # scaled (~1 % rounding); every mutant above is off by orders of magnitude or not finite.
        assert max_abs_diff(ours, want) <= 5e-2 * np.abs(want).max()


def test_float32_q_k_product_overflows_where_the_scaled_scores_do_not(rng):
    """Kills ``abs(scale) > 1 and ...`` -> ``or``: ``q @ k.T`` overflows float32 (q, k ~ 1e20) but
    ``(q * scale) @ k.T`` with scale 1e-30 does not, so the forward must scale q first."""
    q = (1e20 * rng.uniform(0.5, 1, (3, 2))).astype(np.float32)
    k = (1e20 * rng.uniform(0.5, 1, (4, 2))).astype(np.float32)
    v = rng.standard_normal((4, 2)).astype(np.float32)
    with np.errstate(over="ignore"):
        assert not np.isfinite(q @ k.T).all()
    out, _ = an.sdpa_forward(q, k, v, scale=1e-30)
    out64, _ = reference.sdpa_forward(*(x.astype(np.float64) for x in (q, k, v)), scale=1e-30)
    assert np.isfinite(out).all()
    assert max_abs_diff(out, out64) <= 1e-5 * np.abs(out64).max()


def test_sdpa_bias_that_adds_batch_dims(rng):
    """Kills the deleted growth of the scores to the bias's batch dims: a bias of shape
    (2, L, S) over 2-D q, k, v gives a batch of 2, each the definition with its own bias."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    bias = randn(rng, 2, 3, 5)
    out, weights = an.scaled_dot_product_attention(q, k, v, bias=bias)
    want = softmax_rows(q @ k.T / 2.0 + bias)                     # (2, 3, 5)
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(weights, want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out, want @ v, rtol=1e-12, atol=1e-15)
