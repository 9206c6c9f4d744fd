"""split_heads / merge_heads: the layout of §3.2.2's Concat, and each as the other's backward."""

import numpy as np

import attention_np as an
from tests.helpers import randn


def test_head_i_is_feature_columns_i_times_d(rng):
    x = randn(rng, 2, 5, 12)
    heads = an.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    for i in range(3):
        np.testing.assert_array_equal(heads[:, i], x[..., i * 4:(i + 1) * 4])


def test_merge_heads_undoes_split_heads(rng):
    x = randn(rng, 2, 3, 5, 8)
    np.testing.assert_array_equal(an.merge_heads(an.split_heads(x, 4)), x)
    h = randn(rng, 2, 4, 5, 3)
    np.testing.assert_array_equal(an.split_heads(an.merge_heads(h), 4), h)


def test_merge_heads_is_the_concat_of_the_paper(rng):
    h = randn(rng, 3, 4, 2)        # (h, L, d)
    np.testing.assert_array_equal(an.merge_heads(h), np.concatenate(list(h), axis=-1))


def test_split_heads_backward_is_merge_heads(rng):
    x = randn(rng, 2, 3, 6)
    result = an.gradcheck(lambda x: (an.split_heads(x, 2), None),
                          lambda dout, _: an.merge_heads(dout), (x,))
    assert result.ok, result


def test_merge_heads_backward_is_split_heads(rng):
    x = randn(rng, 2, 3, 4, 2)
    result = an.gradcheck(lambda x: (an.merge_heads(x), None),
                          lambda dout, _: an.split_heads(dout, 3), (x,))
    assert result.ok, result


def test_split_and_merge_take_2_d_and_nested_lists():
    """(L, h*d) is the smallest input of split_heads, and lists are arrays too."""
    x = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]                  # (L=2, h*d=4)
    heads = an.split_heads(x, 2)                                      # (h=2, L=2, d=2)
    np.testing.assert_array_equal(heads, [[[0, 1], [4, 5]], [[2, 3], [6, 7]]])
    np.testing.assert_array_equal(an.merge_heads(heads.tolist()), x)
