"""Every bad input raises ValueError/TypeError whose message names the argument and the numbers."""

import numpy as np
import pytest

import attention_np as an

rng = np.random.default_rng(0)
q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))


def raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


# --- softmax -------------------------------------------------------------------------------

def test_softmax_refuses_integer_input():
    raises(TypeError, r"x must be a floating-point array, got dtype int64", an.softmax,
           np.arange(3))


def test_softmax_refuses_a_non_bool_where():
    raises(TypeError, r"where must be a bool array .*float64.*a float array is not a mask", an.softmax,
           np.zeros(3), where=np.ones(3))


def test_softmax_where_that_does_not_broadcast():
    raises(ValueError, r"where of shape \(4,\) does not broadcast to x of shape \(2, 3\)",
           an.softmax, np.zeros((2, 3)), where=np.ones(4, bool))


def test_softmax_backward_shape_mismatch():
    raises(ValueError, r"dp has shape \(2, 3\) but p has shape \(3, 2\)", an.softmax_backward,
           np.zeros((2, 3)), np.zeros((3, 2)))


# --- masks ---------------------------------------------------------------------------------

def test_causal_mask_unknown_align():
    raises(ValueError, r"align must be one of \('top_left', 'bottom_right'\), got 'bottom_left'",
           an.causal_mask, 3, 4, align="bottom_left")


@pytest.mark.parametrize("L", [-1, 2.5, "3"])
def test_causal_mask_bad_length(L):
    raises(ValueError, r"L must be a non-negative int", an.causal_mask, L)


def test_padding_mask_bad_lengths():
    raises(ValueError, r"lengths must be a 1-D int array \(B,\), got shape \(2, 2\)",
           an.padding_mask, np.ones((2, 2), int))
    raises(ValueError, r"lengths has a sequence of length 5 but S=4", an.padding_mask, [2, 5], 4)
    raises(ValueError, r"lengths must be >= 0, got -1", an.padding_mask, [2, -1])


def test_mask_from_blocked_refuses_float():
    raises(TypeError, r"blocked must be a bool array", an.mask_from_blocked, np.zeros(3))


# --- scaled dot-product attention ----------------------------------------------------------

def test_d_k_mismatch_names_both():
    raises(ValueError, r"q has d_k=4 but k has d_k=6", an.sdpa_forward, q,
           rng.normal(size=(2, 5, 6)), v)


def test_key_value_length_mismatch():
    raises(ValueError, r"k has S=5 positions but v has S=7", an.sdpa_forward, q, k,
           rng.normal(size=(2, 7, 6)))


def test_too_few_dims():
    raises(ValueError, r"q must have at least 2 dims \(\.\.\., L, d_k\), got shape \(4,\)",
           an.sdpa_forward, np.zeros(4), k, v)


def test_batch_dims_that_do_not_broadcast():
    raises(ValueError, r"batch dims do not broadcast: q \(2,\), k \(3,\), v \(2,\)",
           an.sdpa_forward, q, rng.normal(size=(3, 5, 4)), v)


def test_integer_inputs_are_refused():
    raises(TypeError, r"q must be a floating-point array, got dtype int64", an.sdpa_forward,
           np.ones((3, 4), int), k, v)


def test_mixed_dtypes_are_refused():
    raises(TypeError, r"q, k, v must share one dtype: q is float32; k, v are float64",
           an.sdpa_forward, q.astype(np.float32), k, v)


def test_float_mask_is_refused_with_a_pointer_to_bias():
    raises(TypeError, r"mask must be a bool array .*got dtype float64 \(a float array is not a "
           r"mask: to add it to the scores, pass it as bias where the function takes one\)", an.sdpa_forward,
           q, k, v, np.zeros((3, 5)))


def test_integer_mask_is_refused():
    raises(TypeError, r"mask must be a bool array .*got dtype int64", an.sdpa_forward, q, k, v,
           np.ones((3, 5), int))


def test_mask_that_does_not_broadcast_names_the_scores_shape():
    raises(ValueError, r"mask of shape \(3, 4\) does not broadcast to scores \(\.\.\., L, S\) = "
           r"\(3, 5\)", an.sdpa_forward, q, k, v, np.ones((3, 4), bool))
    raises(ValueError, r"batch dims do not broadcast: .*mask \(3,\)", an.sdpa_forward, q, k, v,
           np.ones((3, 3, 5), bool))


def test_bool_bias_is_refused_with_a_pointer_to_mask():
    raises(TypeError, r"bias must be a floating-point array .*got dtype bool \(a bool array is a "
           r"mask: pass it as mask\)", an.sdpa_forward, q, k, v, bias=np.ones((3, 5), bool))


def test_bias_that_does_not_broadcast():
    raises(ValueError, r"bias of shape \(5, 3\) does not broadcast", an.sdpa_forward, q, k, v,
           bias=np.zeros((5, 3)))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_p_out_of_range(p):
    raises(ValueError, r"dropout_p must be in \[0, 1\]", an.AttentionSpec, dropout_p=p)


def test_dropout_mask_needs_p_and_excludes_rng():
    keep = np.ones((3, 5), bool)
    raises(ValueError, r"dropout_mask needs dropout_p > 0", an.sdpa_forward, q, k, v,
           dropout_mask=keep)
    raises(ValueError, r"pass rng or dropout_mask, not both", an.sdpa_forward, q, k, v,
           spec=an.AttentionSpec(dropout_p=0.1), rng=0, dropout_mask=keep)


def test_bad_rng_type():
    raises(TypeError, r"rng must be None, an int seed or a np.random.Generator, got str",
           an.sdpa_forward, q, k, v, spec=an.AttentionSpec(dropout_p=0.1), rng="seed")


def test_backward_refuses_a_dout_of_another_dtype():
    out, cache = an.sdpa_forward(*(a.astype(np.float32) for a in (q, k, v)))
    raises(TypeError, r"dout has dtype float64 but out has dtype float32", an.sdpa_backward,
           np.zeros(out.shape), cache)
    out, cache = an.flash_attention_forward(*(a.astype(np.float32) for a in (q, k, v)))
    raises(TypeError, r"dout has dtype float64 but out has dtype float32",
           an.flash_attention_backward, np.zeros(out.shape), cache)


def test_dropout_mask_that_would_add_batch_dims():
    raises(ValueError, r"dropout_mask of shape \(4, 2, 3, 5\) would add batch dims to the weights "
           r"\(2, 3, 5\)", an.sdpa_forward, q, k, v,
           spec=an.AttentionSpec(dropout_p=0.5), dropout_mask=np.ones((4, 2, 3, 5), bool))


def test_backward_with_wrong_dout_shape():
    out, cache = an.sdpa_forward(q, k, v)
    raises(ValueError, r"dout has shape \(2, 3, 5\) but out has shape \(2, 3, 6\)",
           an.sdpa_backward, np.zeros((2, 3, 5)), cache)


# --- heads ---------------------------------------------------------------------------------

def test_split_heads_features_not_divisible():
    raises(ValueError, r"x has 10 features, not divisible by num_heads=3", an.split_heads,
           np.zeros((2, 10)), 3)
    raises(ValueError, r"num_heads must be a positive int, got 0", an.split_heads,
           np.zeros((2, 10)), 0)


def test_merge_heads_needs_a_head_axis():
    raises(ValueError, r"x must have at least 3 dims \(\.\.\., h, L, d\), got shape \(4, 2\)",
           an.merge_heads, np.zeros((4, 2)))


# --- multi-head attention ------------------------------------------------------------------

def test_init_d_model_not_divisible_by_heads():
    raises(ValueError, r"d_model=10 is not divisible by num_heads=3", an.init_mha_params, 10, 3)
    assert an.init_mha_params(10, 3, d_k=4, d_v=2)["W_q"].shape == (10, 12)   # explicit is fine


def test_init_bad_sizes_and_dtype():
    raises(ValueError, r"d_model must be a positive int, got 0", an.init_mha_params, 0, 1)
    raises(TypeError, r"dtype must be a floating dtype, got int32", an.init_mha_params, 4, 2,
           dtype=np.int32)


P = an.init_mha_params(8, 2, kdim=5, rng=0)
X, K, V = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 5)), rng.normal(size=(2, 4, 8))


def test_mha_missing_and_unknown_params():
    raises(ValueError, r"params is missing \['W_o'\]", an.mha_forward, X, K, V,
           {n: a for n, a in P.items() if n != "W_o"}, num_heads=2)
    raises(ValueError, r"params has unknown keys \['W_x'\]", an.mha_forward, X, K, V,
           {**P, "W_x": P["W_q"]}, num_heads=2)


def test_mha_input_width_does_not_match_its_projection():
    raises(ValueError, r"key has 8 features but params\['W_k'\] has shape \(5, 8\)",
           an.mha_forward, X, X, X, P, num_heads=2)


def test_mha_num_heads_must_divide_the_projection():
    raises(ValueError, r"params\['W_q'\] has 8 columns, not divisible by num_heads=3",
           an.mha_forward, X, K, V, P, num_heads=3)


def test_mha_dtype_mismatch_between_inputs_and_params():
    raises(TypeError, r"query, key, value and params must share one dtype: query, key, value "
           r"are float32; params\['W_q'\], .* are float64", an.mha_forward,
           X.astype(np.float32), K.astype(np.float32), X.astype(np.float32), P, num_heads=2)


def test_mha_inconsistent_param_shapes():
    bad = {**P, "W_k": np.zeros((5, 6))}
    raises(ValueError, r"params\['W_q'\] has 8 columns but params\['W_k'\] has 6", an.mha_forward,
           X, K, V, bad, num_heads=2)
    bad = {**P, "W_o": np.zeros((6, 8))}
    raises(ValueError, r"params\['W_o'\] has shape \(6, 8\) but the concatenated heads have 8",
           an.mha_forward, X, K, V, bad, num_heads=2)
    bad = {**P, "b_v": np.zeros(3)}
    raises(ValueError, r"params\['b_v'\] has shape \(3,\), expected \(8,\)", an.mha_forward,
           X, K, V, bad, num_heads=2)


def test_mha_backward_refuses_a_dout_of_another_dtype():
    P32 = {n: a.astype(np.float32) for n, a in P.items()}
    out, cache = an.mha_forward(*(a.astype(np.float32) for a in (X, K, V)), P32, num_heads=2)
    raises(TypeError, r"dout has dtype float64 but out has dtype float32", an.mha_backward,
           np.zeros(out.shape), cache)


def test_mha_backward_with_wrong_dout_shape():
    _, cache = an.mha_forward(X, K, V, P, num_heads=2)
    raises(ValueError, r"dout has shape \(2, 3, 4\) but out has shape \(2, 3, 8\)",
           an.mha_backward, np.zeros((2, 3, 4)), cache)
