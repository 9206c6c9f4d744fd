"""The gradcheck helper itself: it passes right backwards and catches wrong ones."""

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn


def test_gradcheck_catches_a_wrong_gradient_and_names_its_input(rng):
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)

    def wrong_backward(dout, cache):
        dq, dk, dv = an.sdpa_backward(dout, cache)
        return dq * 0.5, dk, dv                  # a plausible-looking bug in one input

    result = an.gradcheck(an.sdpa_forward, wrong_backward, (q, k, v))
    assert not result.ok
    assert result.failed == ["q"]                # named by sdpa_forward's parameter
    assert "q: max abs error" in str(result) and "FAILED" in str(result)
    named = an.gradcheck(lambda *a: an.sdpa_forward(*a), wrong_backward, (q, k, v),
                         names=("query", "key", "value"))
    assert named.failed == ["query"]
    anonymous = an.gradcheck(lambda *a: an.sdpa_forward(*a), wrong_backward, (q, k, v))
    assert anonymous.failed == ["0"]             # no names to give: positions


def test_gradcheck_refuses_names_of_the_wrong_length(rng):
    q = randn(rng, 2, 3)
    with pytest.raises(ValueError, match=r"names has 2 entries \('a', 'b'\) for 3 inputs"):
        an.gradcheck(an.sdpa_forward, an.sdpa_backward, (q, q, q), names=("a", "b"))


def test_gradcheck_handles_dict_inputs_and_names_them(rng):
    params = an.init_mha_params(4, 2, rng=1)
    params["b_q"] = randn(rng, 4)                # non-zero biases exercise their gradients
    query, key, value = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 4)
    result = an.gradcheck(lambda q, k, v, p: an.mha_forward(q, k, v, p, num_heads=2),
                          an.mha_backward, (query, key, value, params))
    assert "p.W_q" in result.errors and "p.b_q" in result.errors
    assert result.ok, result


def test_gradcheck_refuses_float32(rng):
    with pytest.raises(TypeError, match="float64"):
        an.gradcheck(an.sdpa_forward, an.sdpa_backward, tuple(randn(rng, 2, 2, dtype=np.float32)
                                                              for _ in range(3)))


def test_gradcheck_does_not_modify_the_callers_arrays(rng):
    q, k, v = randn(rng, 2, 3), randn(rng, 2, 3), randn(rng, 2, 3)
    copies = [a.copy() for a in (q, k, v)]
    an.gradcheck(an.sdpa_forward, an.sdpa_backward, (q, k, v))
    for a, b in zip((q, k, v), copies, strict=True):
        np.testing.assert_array_equal(a, b)


def test_numerical_gradient_of_a_quadratic_is_exact_to_rounding():
    x = np.array([1.0, -2.0, 3.0])
    g = an.numerical_gradient(lambda: float(np.sum(x ** 2)), x)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-9)


def test_softmax_and_its_backward_check_as_written():
    """``softmax`` returns no cache: its output stands in, which is what ``softmax_backward(dp, p)``
    takes; a wrong backward still fails."""
    x = np.random.default_rng(1).normal(size=(3, 5))
    assert an.gradcheck(an.softmax, an.softmax_backward, (x,)).ok
    assert not an.gradcheck(an.softmax, lambda dp, p: dp * p, (x,)).ok


def test_a_bare_array_for_inputs_says_to_pass_a_tuple():
    x = np.random.default_rng(1).normal(size=(3, 5))
    with pytest.raises(TypeError, match=r"inputs must be a tuple .* e\.g\. \(x,\) for one input; "
                                        r"got ndarray of shape \(3, 5\)"):
        an.gradcheck(an.softmax, an.softmax_backward, x)


def test_numerical_gradient_of_a_strided_view_nudges_the_view():
    """A transpose or a split of heads is a strided view, and ``reshape(-1)`` of one is a copy: the
    nudges must reach the array ``loss`` reads, or every gradient is 0 (lesson 4 checks split heads)."""
    rng = np.random.default_rng(5)
    for view in (rng.standard_normal((3, 4)).T, rng.standard_normal((2, 6))[:, ::2],
                 rng.standard_normal((2, 3, 4)).transpose(1, 0, 2), np.array(2.0)):
        w = rng.standard_normal(view.shape)
        before = view.copy()
        grad = an.numerical_gradient(lambda w=w, view=view: float(np.sum(w * view ** 2)), view)
        np.testing.assert_allclose(grad, 2 * w * before, rtol=1e-6, atol=1e-8)
        np.testing.assert_array_equal(view, before)                 # restored
