"""softmax and softmax_backward: values, stability, masking, and the vector-Jacobian product."""

import warnings

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn


def softmax_by_definition(x):
    """exp(x) / sum(exp(x)) written out, without the max shift (fine for small x)."""
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_matches_the_definition_and_rows_sum_to_one(rng):
    x = randn(rng, 3, 4, 7)
    p = an.softmax(x)
    np.testing.assert_allclose(p, softmax_by_definition(x), rtol=1e-14, atol=0)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-15)


def test_softmax_along_another_axis_is_the_transposed_softmax(rng):
    x = randn(rng, 5, 3)
    np.testing.assert_allclose(an.softmax(x, axis=0), an.softmax(x.T).T, rtol=1e-15)


def test_huge_scores_do_not_overflow(rng):
    # exp(1e5) overflows float64; the max shift makes every exponent <= 0.
    x = np.array([[1e5, 1e5 - 1.0, -1e5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = an.softmax(x)
    np.testing.assert_allclose(p, softmax_by_definition(np.array([[1.0, 0.0, -2e5]])), rtol=1e-15)
    p32 = an.softmax(x.astype(np.float32))
    assert p32.dtype == np.float32 and np.all(np.isfinite(p32))


def test_where_false_entries_get_zero_and_the_rest_renormalize(rng):
    x = randn(rng, 2, 6)
    where = np.array([True, False, True, True, False, True])
    p = an.softmax(x, where=where)
    assert np.all(p[:, ~where] == 0)
    np.testing.assert_allclose(p[:, where], softmax_by_definition(x[:, where]), rtol=1e-14)


def test_slice_with_nothing_allowed_is_all_zero_without_warning(rng):
    x = randn(rng, 3, 4)
    where = np.ones((3, 4), bool)
    where[1] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = an.softmax(x, where=where)
    assert np.all(p[1] == 0)
    np.testing.assert_allclose(p[[0, 2]].sum(-1), 1.0)


def test_row_of_minus_infinity_is_all_zero():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = an.softmax(x)
    np.testing.assert_array_equal(p, [[0.0, 0.0], [1.0, 0.0]])


def test_softmax_does_not_modify_its_input(rng):
    x = randn(rng, 2, 5)
    before = x.copy()
    an.softmax(x)
    an.softmax(x, where=x > 0)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_keeps_dtype(rng, dtype):
    x = randn(rng, 2, 5, dtype=dtype)
    assert an.softmax(x).dtype == dtype
    assert an.softmax(x, where=x > 0).dtype == dtype
    assert an.softmax_backward(x, an.softmax(x)).dtype == dtype


def test_softmax_backward_equals_the_jacobian_product(rng):
    # Oracle: the full Jacobian diag(p) - p pᵀ, built here only to check the VJP.
    x, dp = randn(rng, 6), randn(rng, 6)
    p = an.softmax(x)
    jacobian = np.diag(p) - np.outer(p, p)
    np.testing.assert_allclose(an.softmax_backward(dp, p), jacobian.T @ dp, rtol=1e-13, atol=1e-15)


def test_softmax_backward_matches_finite_differences(rng):
    x = randn(rng, 3, 5)
    result = an.gradcheck(lambda x: (an.softmax(x), an.softmax(x)),
                          lambda dp, p: an.softmax_backward(dp, p), (x,))
    assert result.ok, result


def test_softmax_backward_along_axis_zero_matches_finite_differences(rng):
    x = randn(rng, 4, 3)
    result = an.gradcheck(lambda x: (an.softmax(x, axis=0), an.softmax(x, axis=0)),
                          lambda dp, p: an.softmax_backward(dp, p, axis=0), (x,))
    assert result.ok, result


def test_softmax_backward_of_a_constant_upstream_gradient_is_zero(rng):
    # Why tests use random upstream gradients: with ones, every softmax gradient vanishes.
    p = an.softmax(randn(rng, 4, 5))
    np.testing.assert_allclose(an.softmax_backward(np.ones_like(p), p), 0.0, atol=1e-15)


def test_softmax_backward_is_zero_where_p_is_zero(rng):
    p = an.softmax(randn(rng, 2, 4), where=np.array([True, False, True, False]))
    dx = an.softmax_backward(randn(rng, 2, 4), p)
    assert np.all(dx[:, [1, 3]] == 0)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_softmax_backward_takes_array_likes_and_names_a_non_float_argument():
    """Kills the deleted conversion of ``dp`` or ``p`` to a float array in ``softmax_backward``:
    nested lists are array-likes like everywhere else, and an int ``dp`` is refused as not
    floating."""
    p = np.array([[0.25, 0.75]])
    dp = np.array([[1.0, -2.0]])
    want = p * (dp - (dp * p).sum())                       # p_j (dp_j - sum_i dp_i p_i)
    np.testing.assert_allclose(an.softmax_backward(dp.tolist(), p), want, rtol=1e-15)
    np.testing.assert_allclose(an.softmax_backward(dp, p.tolist()), want, rtol=1e-15)
    with pytest.raises(TypeError, match="dp must be a floating-point array"):
        an.softmax_backward(np.array([[1, 2]]), p)
    with pytest.raises(TypeError, match="p must be a floating-point array"):
        an.softmax_backward(dp, np.array([[0, 1]]))


def test_softmax_refuses_a_0d_array_and_an_axis_out_of_range():
    """Kills the deleted 0-d ``raise`` and ``axis < x.ndim`` -> ``<=`` in ``softmax`` and
    ``softmax_backward``: the documented errors, not NumPy's."""
    with pytest.raises(ValueError, match="at least 1 dim"):
        an.softmax(np.float64(1.0))
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 2\)"):
        an.softmax(x, axis=2)
    for axis in (2, 1.0):
        with pytest.raises(ValueError, match=r"axis must be an int in \[-2, 2\)"):
            an.softmax_backward(x, x, axis=axis)
    with pytest.raises(ValueError, match="p must have at least 1 dim"):
        an.softmax_backward(np.float64(1.0), np.float64(0.5))
