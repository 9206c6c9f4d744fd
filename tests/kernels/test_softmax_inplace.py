"""The in-place softmax (kernels/softmax_inplace.py) against the definition. Found by mutation
testing (docs/mutation.md); each test names the mutant it kills."""

from __future__ import annotations

import numpy as np

from attention_np.kernels.softmax_inplace import softmax_
from tests.helpers import randn
from tests.oracles import softmax_rows


def test_in_place_softmax_default_axis_is_the_last(rng):
    """Kills ``axis: int = -1`` -> ``1`` in ``softmax_`` (additive attention calls it with the
    default on (..., L, S) scores): each last-axis slice of a 3-D array sums to 1."""
    x = randn(rng, 2, 3, 4)
    np.testing.assert_allclose(softmax_(x.copy()), softmax_rows(x), rtol=1e-14)
