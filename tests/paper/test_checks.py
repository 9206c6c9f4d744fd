"""The input checks have one copy each (attention_np/paper/_validate.py; attention_np/_checks.py
re-exports them), so the paper's functions and the kernels answer a wrong call alike."""

from __future__ import annotations

import re

import numpy as np
import pytest

import attention_np as an
from attention_np import _checks, paper
from attention_np.paper import _validate as paper_checks
from tests.helpers import max_abs_diff, randn

R = np.random.default_rng(2611)


@pytest.mark.parametrize("name", ["as_bool_mask", "check_broadcasts_to", "check_cache", "sum_to_shape",
                                  "check_min_ndim", "as_float_array"])
def test_one_copy_of_each_check(name):
    assert getattr(_checks, name) is getattr(paper_checks, name)


@pytest.mark.parametrize("forward", [paper.sdpa_forward, an.sdpa_forward, an.flash_attention_forward])
def test_a_float_mask_gets_the_same_answer_from_the_paper_and_the_kernels(forward):
    q = randn(R, 3, 4)
    with pytest.raises(TypeError, match=re.escape(
            "mask must be a bool array (True = may attend), got dtype float64 (a float array is not "
            "a mask: to add it to the scores, pass it as bias where the function takes one)")):
        forward(q, q, q, np.zeros((3, 3)))


def test_each_backward_names_the_forward_of_a_cache_it_cannot_use():
    q = randn(R, 3, 4)
    _, paper_cache = paper.sdpa_forward(q, q, q)
    _, fused_cache = an.sdpa_forward(q, q, q)
    with pytest.raises(TypeError, match=r"got attention_np\.paper\.attention\.AttentionCache \(a "
                                        r"AttentionCache comes from attention_np\.paper\.sdpa_forward"):
        an.sdpa_backward(q, paper_cache)
    with pytest.raises(TypeError, match=r"returned by attention_np\.paper\.sdpa_forward, got "
                                        r"attention_np\.kernels\.fused\.SDPACache \(a SDPACache comes "
                                        r"from attention_np\.sdpa_forward"):
        paper.sdpa_backward(q, fused_cache)


@pytest.mark.parametrize("shape, g_shape", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (2, 3)),
                                            ((), (2, 2))])
def test_sum_to_shape_is_the_backward_of_broadcasting(shape, g_shape):
    x, g = randn(R, *shape), randn(R, *g_shape)
    # <g, broadcast(x)> = <sum_to_shape(g), x> for every x: the adjoint of broadcasting
    got = _checks.sum_to_shape(g, shape)
    assert got.shape == shape
    assert abs(float(np.sum(g * np.broadcast_to(x, g_shape))) - float(np.sum(got * x))) < 1e-12


def test_a_mask_may_not_change_the_heads_or_positions_of_multi_head_scores():
    """One broadcast rule: a mask may add batch dims, never stretch h, L or S of the scores (a
    layer of one head given a mask of two used to fail later, naming W_o's shape)."""
    x = randn(R, 1, 3, 8)
    p1 = an.init_mha_params(8, 1, rng=0)
    with pytest.raises(ValueError, match=re.escape("mask of shape (1, 2, 3, 3) does not broadcast to "
                                                   "(..., h, L, S) = (1, 1, 3, 3)")):
        an.mha_forward(x, x, x, p1, np.ones((1, 2, 3, 3), bool), num_heads=1)
    with pytest.raises(ValueError, match="does not broadcast to"):
        paper.mha_forward(x, x, x, p1, np.ones((1, 2, 3, 3), bool), num_heads=1)


def test_no_forward_stretches_inputs_of_batch_one_over_a_batch_of_masks():
    """The one mask rule: the output's batch is the inputs', so a mask of batch 4 over inputs of
    batch 1 is refused by the paper's and the package's multi-head attention alike, and by the
    decode step (whose cache fixes the batch), naming the mask and the batch; the fix, inputs
    broadcast to the mask's batch, gives one output per mask."""
    x, p = randn(R, 1, 3, 8), an.init_mha_params(8, 2, rng=0)
    mask = R.random((4, 1, 3, 3)) > 0.3
    mask[..., 0] = True
    for forward, layout in ((an.mha_forward, "(..., h, L, S)"),
                            (paper.mha_forward, "multi-head scores (..., h, L, S)")):
        with pytest.raises(ValueError, match=re.escape(
                f"mask of shape (4, 1, 3, 3) does not broadcast to {layout} = (1, 2, 3, 3): it would "
                f"add or stretch batch dims of the inputs (batch (1,))")):
            forward(x, x, x, p, mask, num_heads=2)
    xb = np.broadcast_to(x, (4, 3, 8))
    out, _ = an.mha_forward(xb, xb, xb, p, mask, num_heads=2)
    want = np.concatenate([an.mha_forward(x, x, x, p, m, num_heads=2)[0] for m in mask])
    assert out.shape == (4, 3, 8) and max_abs_diff(out, want) < 1e-14
    kv = an.KVCache(5)
    with pytest.raises(ValueError, match=re.escape("mask of shape (4, 1, 3, 3) does not broadcast")):
        an.mha_decode_step(x, p, kv, num_heads=2, mask=mask)
    assert kv.length == 0
