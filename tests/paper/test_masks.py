"""causal_mask in both alignments, padding_mask and the "True = blocked" conversion."""

import numpy as np
import pytest

import attention_np as an


@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3), (1, 5), (5, 1)])
def test_top_left_causal_mask_allows_exactly_keys_up_to_the_query_index(L, S):
    m = an.causal_mask(L, S)
    i, j = np.indices((L, S))
    np.testing.assert_array_equal(m, j <= i)
    assert m.dtype == bool and m.shape == (L, S)


@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3), (1, 5)])
def test_bottom_right_causal_mask_aligns_the_last_query_with_the_last_key(L, S):
    m = an.causal_mask(L, S, align="bottom_right")
    i, j = np.indices((L, S))
    np.testing.assert_array_equal(m, j <= i + S - L)
    assert m[-1].all()                 # the last query sees every key


def test_alignments_agree_when_square_and_default_S_is_L():
    np.testing.assert_array_equal(an.causal_mask(5), an.causal_mask(5, 5, align="bottom_right"))


def test_bottom_right_causal_with_one_query_is_decoding_with_a_kv_cache():
    # Decoding step: one new query, S cached keys; it may see all of them, itself included.
    assert an.causal_mask(1, 7, align="bottom_right").all()
    assert an.causal_mask(1, 7).sum() == 1


def test_padding_mask_marks_positions_before_each_length():
    m = an.padding_mask([3, 1, 0], S=4)
    assert m.shape == (3, 1, 4) and m.dtype == bool
    np.testing.assert_array_equal(m[:, 0], [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    assert an.padding_mask(np.array([2, 5])).shape == (2, 1, 5)


def test_mask_from_blocked_inverts_polarity():
    blocked = np.array([[False, True], [True, True]])
    np.testing.assert_array_equal(an.mask_from_blocked(blocked), ~blocked)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


@pytest.mark.parametrize("L, S", [(0, 0), (3, 0), (0, 4)])
def test_causal_mask_with_no_keys_or_no_queries(L, S):
    """Kills a lower bound of 1 instead of 0 on ``L`` or ``S``: an empty (L, S) mask is valid."""
    for align in ("top_left", "bottom_right"):
        m = an.causal_mask(L, S, align=align)
        assert m.shape == (L, S) and m.dtype == bool


def test_padding_mask_with_S_zero():
    """Kills a lower bound of 1 on ``S``, and a longest length of 1 for no sequences at all."""
    m = an.padding_mask(np.array([0, 0]))
    assert m.shape == (2, 1, 0) and m.dtype == bool
    m = an.padding_mask(np.array([0, 0]), S=0)
    assert m.shape == (2, 1, 0)
    assert an.padding_mask(np.array([], dtype=int), S=3).shape == (0, 1, 3)
    assert an.padding_mask(np.array([], dtype=int)).shape == (0, 1, 0)   # no sequences: S = 0
