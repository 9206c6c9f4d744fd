"""One mask rule for the paper's and the package's multi-head attention.

A mask broadcasts from the right against the scores ``(*batch, h, L, S)``, ``batch`` the inputs'
batch dims, and changes none of them (no batch dim added or stretched, nor h, L, S). With batched
inputs a 3-D ``(n, L, S)`` mask lines ``n`` up with the heads: one mask per head when n == h and
B != h (as NumPy, and torch's SDPA, broadcast it), refused when n could be the batch instead
(n == h == B: a per-sequence ``(B, 1, S)`` would be read as per head, silently) or cannot be the
heads (n != h), naming the fix.

Generated over every mask shape of rank 0 to 5 whose every axis is 1 or the size of one of the
scores' axes (B, h, L, S all distinct, so that a size names the axis it belongs to; and B == h),
for inputs without batch dims, with one or two, with a batch of 1, and with the batch on the keys
only: both functions accept and refuse the same shapes, exactly those the rule allows, and where
they accept give the same output and weights as the per-head formula (tests/oracles.py).
"""

import itertools

import numpy as np
import pytest

import attention_np as an
from attention_np import paper
from tests import oracles
from tests.helpers import mha_params, randn

h, L, S, d_model = 3, 4, 5, 6

# (query batch, key/value batch): the scores' batch is their broadcast
INPUTS = {
    "unbatched": ((), ()),
    "B=2": ((2,), (2,)),
    "B=h=3": ((3,), (3,)),
    "B=1": ((1,), (1,)),
    "batch on the keys only": ((), (2,)),
    "two batch dims (2, 3)": ((2, 3), (2, 3)),
}


def allowed(shape: tuple, batch: tuple) -> bool:
    """The rule, as the docstrings of both functions state it."""
    scores = batch + (h, L, S)
    if len(shape) == 3 and shape[0] > 1 and batch and (shape[0] != h or batch[0] == h):
        return False                       # heads or sequences?
    try:
        return np.broadcast_shapes(shape, scores) == scores
    except ValueError:
        return False


def mask_shapes(batch: tuple):
    """Every shape of rank 0 to 5 whose axes are each 1 or the size of some axis of the scores."""
    sizes = sorted({1, h, L, S, *batch, 2})
    for rank in range(6):
        choices = sizes if rank <= 4 else [1, 2, 3]
        yield from itertools.product(choices, repeat=rank)


def outcome(forward, *args, **kw):
    try:
        return forward(*args, **kw)
    except ValueError as e:
        return e


@pytest.mark.parametrize("inputs", list(INPUTS))
def test_both_multi_head_attentions_follow_one_mask_rule(rng, inputs):
    q_batch, kv_batch = INPUTS[inputs]
    batch = np.broadcast_shapes(q_batch, kv_batch)
    query, key = randn(rng, *q_batch, L, d_model), randn(rng, *kv_batch, S, d_model)
    params = mha_params(rng, d_model, h)
    accepted = refused = 0
    for shape in mask_shapes(batch):
        mask = rng.random(shape) < 0.7
        got = [outcome(f, query, key, key, params, mask, num_heads=h)
               for f in (paper.mha_forward, an.mha_forward)]
        kinds = [isinstance(g, ValueError) for g in got]
        assert kinds[0] == kinds[1], (shape, got)
        assert kinds[0] != allowed(shape, batch), (shape, batch, got)
        if kinds[0]:
            refused += 1
            for e in got:
                assert f"mask of shape {shape}" in str(e), (shape, str(e))
            continue
        accepted += 1
        (out_p, cache_p), (out_a, cache_a) = got
        want, weights = oracles.multihead(query, key, key, params, h,
                                          np.broadcast_to(mask, batch + (h, L, S)))
        assert out_p.shape == out_a.shape == batch + (L, d_model)
        np.testing.assert_allclose(out_p, want, rtol=1e-12, atol=1e-12, err_msg=str(shape))
        np.testing.assert_allclose(out_a, want, rtol=1e-12, atol=1e-12, err_msg=str(shape))
        np.testing.assert_allclose(cache_p.weights, weights, atol=1e-13, err_msg=str(shape))
        np.testing.assert_allclose(cache_a.weights, weights, atol=1e-13, err_msg=str(shape))
    assert accepted >= 8 and refused >= 100          # the generator reaches both kinds


def test_a_per_head_mask_of_three_dims_with_batched_inputs(rng):
    """The case that split the two rules: ``(h, L, S)`` over queries ``(B, L, d_model)``. Both take
    it per head when B != h (the paper's used to refuse it; its docstring and the package's said
    both did), and both refuse it, naming both fixes, when B == h; ``mask[None]`` is the per-head
    reading for every B."""
    params = mha_params(rng, d_model, h)
    mask = rng.random((h, L, L)) < 0.7
    mask[..., 0] = True
    for B in (1, 2, h):
        x = randn(rng, B, L, d_model)
        want, _ = oracles.multihead(x, x, x, params, h, np.broadcast_to(mask, (B, h, L, L)))
        for forward in (paper.mha_forward, an.mha_forward):
            if B == h:
                with pytest.raises(ValueError, match=r"ambiguous .*one per head or one per sequence "
                                                     r"\(batch 3\).* pass mask\[:, None\], of shape "
                                                     r"\(B, 1, 1, S\); for a per-head \(h, L, S\) mask "
                                                     r"pass mask\[None\]"):
                    forward(x, x, x, params, mask, num_heads=h)
            else:
                np.testing.assert_allclose(forward(x, x, x, params, mask, num_heads=h)[0], want,
                                           rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(forward(x, x, x, params, mask[None], num_heads=h)[0], want,
                                       rtol=1e-12, atol=1e-12)
