"""Attention dropout (variants/dropout.py): the keep-mask's draw, its threshold, and ``p = 1``.

Dropout's agreement with PyTorch and its gradients are held in tests/kernels/test_sdpa.py and
tests/interop/test_torch.py; the tests here were found by mutation testing (docs/mutation.md),
each naming the mutant it kills.
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused
from tests.helpers import randn


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_is_drawn_in_the_inputs_precision(dtype):
    """Kills a changed dtype of the draw: documented as ``rng.random(shape, dtype)`` in the
    inputs' precision, so a seed gives the same keep-mask as that draw (and float32 attention
    makes no float64 (L, S) array)."""
    q, k, v = (np.ones((2, 4, 3), dtype) for _ in range(3))
    _, cache = an.sdpa_forward(q, k, v, rng=7, spec=an.AttentionSpec(dropout_p=0.5))
    want = np.random.default_rng(7).random((2, 4, 4), dtype=dtype) >= 0.5
    np.testing.assert_array_equal(cache.dropout_mask, want)
    other = np.float64 if dtype == np.float32 else np.float32
    assert not np.array_equal(np.random.default_rng(7).random((2, 4, 4), dtype=other) >= 0.5, want)


def test_dropout_keeps_a_draw_equal_to_p():
    """Kills ``draw >= dropout_p`` -> ``>``: a weight is dropped iff its uniform draw u < p,
    so that P(dropped) = P(u < p) = p exactly; a draw equal to p is kept."""
    q = np.ones((1, 2, 3))
    u = np.random.default_rng(5).random((1, 2, 2))
    _, cache = fused.sdpa_forward(q, q, q, rng=5, spec=an.AttentionSpec(dropout_p=float(u[0, 0, 0])))
    assert cache.dropout_mask[0, 0, 0]
    np.testing.assert_array_equal(cache.dropout_mask, u >= u[0, 0, 0])


def test_dropout_p_one_drops_even_the_weights_a_given_mask_keeps(rng):
    """Kills the factor ``0.0`` -> ``1.0`` at ``p = 1``: every weight is dropped (as
    ``torch.nn.functional.dropout(x, p=1)`` gives zeros), even where an explicit keep-mask is
    True; the factor ``1/(1-p)`` has no finite value there and the kept weights must not
    pass through unscaled."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    keep = np.ones((3, 5), bool)
    out, cache = an.sdpa_forward(q, k, v, dropout_mask=keep, spec=an.AttentionSpec(dropout_p=1.0))
    assert np.all(out == 0)
    dq, dk, dv = an.sdpa_backward(randn(rng, 3, 2), cache)
    assert np.all(dq == 0) and np.all(dk == 0) and np.all(dv == 0)
