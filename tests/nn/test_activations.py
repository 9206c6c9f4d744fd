"""erf and GELU: NumPy has no erf, so ours is a table plus a Taylor series; measure its error everywhere."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_np import gradcheck
from attention_np.nn import erf, gelu_backward, gelu_forward, relu_backward, relu_forward
from tests.helpers import assert_float32_within_framework, max_abs_diff, randn, require, rounded


def test_erf_matches_math_erf_to_a_few_ulps_of_one_everywhere():
    x = np.linspace(-9, 9, 360001)                      # 50 points between grid points
    want = np.array([math.erf(t) for t in x])
    assert max_abs_diff(erf(x), want) <= 2.3e-16       # measured 1.1e-16 (one ulp of 0.5 .. 1)


def test_erf_is_relatively_accurate_near_zero():
    x = np.logspace(-300, -1, 400)
    want = np.array([math.erf(t) for t in x])
    np.testing.assert_allclose(erf(x), want, rtol=1e-15, atol=0)


@pytest.mark.float32
def test_erf_float32_is_within_one_float32_ulp():
    x = np.linspace(-5, 5, 20001, dtype=np.float32)
    got = erf(x)
    assert got.dtype == np.float32
    want = np.array([math.erf(float(t)) for t in x])
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want).astype(np.float32)))


def test_erf_is_odd_and_saturates():
    x = np.array([0.3, 2.0, 6.5, 40.0, np.inf])
    np.testing.assert_array_equal(erf(-x), -erf(x))
    assert erf(np.array([40.0, np.inf])).tolist() == [1.0, 1.0]


def test_erf_rejects_integers():
    with pytest.raises(TypeError, match="floating-point"):
        erf(np.arange(3))


def test_gelu_matches_torch_exact_gelu_values_and_grads(rng):
    torch = require("torch")
    x, dy = 3 * randn(rng, 1000), randn(rng, 1000)
    y, cache = gelu_forward(x)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx)                   # approximate="none": the erf form
    ty.backward(torch.tensor(dy))
    assert max_abs_diff(y, ty.detach()) < 1e-14
    assert max_abs_diff(gelu_backward(dy, cache), tx.grad) < 1e-14


@pytest.mark.float32
def test_gelu_float32_within_torch_float32_error(rng):
    torch = require("torch")
    (x,), (x64,) = rounded(4 * randn(rng, 5000))
    oracle = torch.nn.functional.gelu(torch.tensor(x64)).numpy()  # torch, float64: not ours
    ours = gelu_forward(x)[0]
    theirs = torch.nn.functional.gelu(torch.tensor(x)).numpy()
    assert_float32_within_framework(ours, theirs, oracle, name="gelu", framework="torch")


@pytest.mark.parametrize("pair", [(gelu_forward, gelu_backward), (relu_forward, relu_backward)],
                         ids=["gelu", "relu"])
def test_activation_backward_matches_finite_differences(rng, pair):
    forward, backward = pair
    x = randn(rng, 3, 4) + 0.05                          # keep relu's kink away from samples
    result = gradcheck(forward, lambda dy, x: (backward(dy, x),), (x,))
    assert result.ok, str(result)
