"""Calls a hostile review found silently wrong or unclear in paper/, variants/, kernels/, compose/,
each with the other values of its kind (the fuzzer, tests/api/test_fuzz_signatures.py, covers
every parameter of every callable; these rows name the reported ones and say what is expected).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import reference

R = np.random.default_rng(0)
Q, K, V = R.standard_normal((2, 3, 4)), R.standard_normal((2, 5, 4)), R.standard_normal((2, 5, 6))
DOUT = R.standard_normal((2, 3, 6))
X = R.standard_normal((2, 3, 8))
P = an.init_mha_params(8, 2, rng=0)
NOT_BOOLS = [1, 0, "no", "", 1.5, None, np.ones(2, bool)]


def _backwards():
    """(name, () -> a backward's valid call taking return_dbias=) for every backward with the flag."""
    qh, kh, vh = (x[:, None].repeat(2, 1) for x in (Q, K, V))
    bias = np.zeros((3, 5))
    return {
        "sdpa_backward": lambda f: an.sdpa_backward(DOUT, an.sdpa_forward(Q, K, V, bias=bias)[1],
                                                    return_dbias=f),
        "reference.sdpa_backward": lambda f: reference.sdpa_backward(
            DOUT, reference.sdpa_forward(Q, K, V, bias=bias)[1], return_dbias=f),
        "flash_attention_backward": lambda f: an.flash_attention_backward(
            DOUT, an.flash_attention_forward(Q, K, V, bias=bias)[1], return_dbias=f),
        "sdpa_sinks_backward": lambda f: an.sdpa_sinks_backward(
            DOUT[:, None].repeat(2, 1), an.sdpa_sinks_forward(qh, kh, vh, np.zeros(2))[1], return_dbias=f),
        "mha_backward": lambda f: an.mha_backward(X, an.mha_forward(X, X, X, P, num_heads=2)[1],
                                                  return_dbias=f),
    }


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize("name", sorted(_backwards()))
def test_return_dbias_must_be_a_bool(name, value):
    with pytest.raises(TypeError, match=r"return_dbias must be True or False, got"):
        _backwards()[name](value)
    assert len(_backwards()[name](np.True_)) == len(_backwards()[name](False)) + 1


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize("init", [an.init_mha_params, an.paper.init_mha_params], ids=["compose", "paper"])
def test_init_mha_params_bias_must_be_a_bool(init, value):
    with pytest.raises(TypeError, match=r"bias must be True or False"):
        init(8, 2, bias=value)


@pytest.mark.parametrize("rng, exc", [(True, TypeError), (-1, ValueError), (1.5, TypeError),
                                      ("0", TypeError)])
def test_paper_init_mha_params_rng_is_a_seed_or_generator(rng, exc):
    with pytest.raises(exc, match=r"\brng\b"):
        an.paper.init_mha_params(8, 2, rng=rng)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.complex128, "nonsense", 3])
@pytest.mark.parametrize("call", [
    lambda dt: an.rope_angles(np.arange(3), 4, dtype=dt),
    lambda dt: an.init_mha_params(8, 2, dtype=dt),
    lambda dt: an.paper.init_mha_params(8, 2, dtype=dt),
], ids=["rope_angles", "init_mha_params", "paper.init_mha_params"])
def test_dtype_must_be_floating(call, dtype):
    with pytest.raises(TypeError, match=r"dtype must be a floating dtype, got"):
        call(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rope_angles_in_a_floating_dtype_still_works(dtype):
    cos, sin = an.rope_angles(np.arange(3), 4, dtype=dtype)
    assert cos.dtype == sin.dtype == dtype and np.allclose(cos ** 2 + sin ** 2, 1, atol=1e-6)


@pytest.mark.parametrize("which", ["forward", "backward"])
@pytest.mark.parametrize("value", [None, 3, "softmax", np.ones(2)], ids=repr)
def test_gradcheck_names_a_non_callable(which, value):
    args = {"forward": an.softmax, "backward": an.softmax_backward, which: value}
    with pytest.raises(TypeError, match=rf"{which} must be a callable"):
        an.gradcheck(args["forward"], args["backward"], (R.standard_normal((2, 3)),))


@pytest.mark.parametrize("inputs", [[R.standard_normal((2, 3))], R.standard_normal((2, 3)), {"x": 1}])
def test_gradcheck_inputs_must_be_a_tuple(inputs):
    with pytest.raises(TypeError, match=r"inputs must be a tuple .* e\.g\. \(x,\)"):
        an.gradcheck(an.softmax, an.softmax_backward, inputs)


@pytest.mark.parametrize("names", [3, "x", [1]])
def test_gradcheck_names_must_be_strings(names):
    with pytest.raises(TypeError, match=r"names must be a sequence of str"):
        an.gradcheck(an.softmax, an.softmax_backward, (R.standard_normal((2, 3)),), names=names)


@pytest.mark.parametrize("loss", [None, 3, "loss", np.ones(2)], ids=repr)
def test_numerical_gradient_names_a_non_callable_loss(loss):
    with pytest.raises(TypeError, match=r"loss must be a callable"):
        an.numerical_gradient(loss, R.standard_normal(3))


@pytest.mark.parametrize("returns", [lambda x: x * 2, lambda x: [1.0], lambda x: None, lambda x: "1",
                                     lambda x: True, lambda x: x.sum(keepdims=True)])
def test_numerical_gradient_needs_a_scalar_loss_and_leaves_x_as_it_was(returns):
    x = R.standard_normal(3)
    before = x.copy()
    with pytest.raises(TypeError, match=r"loss must return a real number"):
        an.numerical_gradient(lambda: returns(x), x)
    np.testing.assert_array_equal(x, before)


def test_numerical_gradient_refuses_a_read_only_x():
    x = R.standard_normal(3)
    x.flags.writeable = False
    with pytest.raises(ValueError, match=r"x must be writeable"):
        an.numerical_gradient(lambda: float(x.sum()), x)


def test_numerical_gradient_still_takes_numpy_scalars():
    x = R.standard_normal(3)
    np.testing.assert_allclose(an.numerical_gradient(lambda: np.sum(x ** 2), x), 2 * x, atol=1e-6)


@pytest.mark.parametrize("num_buckets", [2, 3])
def test_t5_bidirectional_buckets_need_four(num_buckets):
    with pytest.raises(ValueError, match=rf"num_buckets must be >= 4 with bidirectional=True.*"
                                         rf"got {num_buckets}"):
        an.t5_relative_buckets(an.relative_positions(3, 4), num_buckets=num_buckets, max_distance=8)


@pytest.mark.parametrize("num_buckets", [2, 3, 4, 5])
def test_t5_buckets_that_are_allowed_stay_in_range(num_buckets):
    rel = an.relative_positions(6, 9)
    b = an.t5_relative_buckets(rel, bidirectional=False, num_buckets=num_buckets, max_distance=4)
    assert b.min() >= 0 and b.max() < num_buckets
    if num_buckets >= 4:
        b = an.t5_relative_buckets(rel, num_buckets=num_buckets, max_distance=4)
        assert b.min() >= 0 and b.max() < num_buckets


@pytest.mark.parametrize("q_batch, kv_batch", [((2,), (3,)), ((2, 1), (3, 2)), ((4,), (2,))])
@pytest.mark.parametrize("mha", [an.mha_forward, an.paper.mha_forward], ids=["compose", "paper"])
def test_mha_batch_mismatch_names_query_and_key(mha, q_batch, kv_batch):
    p = P if mha is an.mha_forward else an.paper.init_mha_params(8, 2, rng=0)
    query, key = R.standard_normal(q_batch + (3, 8)), R.standard_normal(kv_batch + (5, 8))
    with pytest.raises(ValueError) as e:
        mha(query, key, key, p, num_heads=2)
    message = str(e.value)
    assert re.search(r"\bquery\b", message) and re.search(r"\bkey\b", message), message


def test_mha_key_and_value_of_different_lengths_name_key_and_value():
    with pytest.raises(ValueError, match=r"key has S=5 positions but value has S=4"):
        an.mha_forward(X, R.standard_normal((2, 5, 8)), R.standard_normal((2, 4, 8)), P, num_heads=2)
