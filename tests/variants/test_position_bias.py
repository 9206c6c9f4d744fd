"""ALiBi and T5 relative-position buckets (variants/position_bias.py) against transformers' BLOOM and T5,
the bias table's backward by finite differences and against torch autograd through T5's own
``compute_bias`` and ``scaled_dot_product_attention``."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.paper.gradcheck import numerical_gradient
from tests.helpers import max_abs_diff, randn, require

R = np.random.default_rng(1212)


def test_relative_positions_both_alignments():
    assert an.relative_positions(2, 3).tolist() == [[0, 1, 2], [-1, 0, 1]]
    assert an.relative_positions(2, 3, align="bottom_right").tolist() == [[-1, 0, 1], [-2, -1, 0]]


def test_alibi_slopes_of_a_power_of_two_are_the_papers():
    # the paper: 8 heads -> 1/2, 1/4, ..., 1/256
    assert np.array_equal(an.alibi_slopes(8), 0.5 ** np.arange(1, 9))


@pytest.mark.parametrize("h", [1, 4, 5, 6, 12, 16, 24])
def test_alibi_slopes_equal_bloom(h):
    torch = require("torch")
    bloom = require("transformers.models.bloom.modeling_bloom")
    S = 5
    alibi = bloom.build_alibi_tensor(torch.ones(1, S, dtype=torch.long), h, torch.float64)
    # BLOOM's bias is slope * j (key position), (B*h, 1, S)
    theirs = alibi[:, 0, 1].numpy()
    # BLOOM computes its slopes in float32 (a power of a rounded base): a few float32 ulps
    np.testing.assert_allclose(theirs, an.alibi_slopes(h), rtol=8 * np.finfo(np.float32).eps, atol=0)
    np.testing.assert_allclose(alibi[:, 0].numpy(), an.alibi_slopes(h)[:, None] * np.arange(S),
                               rtol=8 * np.finfo(np.float32).eps, atol=0)


def test_alibi_with_a_causal_mask_gives_blooms_weights():
    torch = require("torch")
    bloom = require("transformers.models.bloom.modeling_bloom")
    h, L = 6, 7
    q, k, v = randn(R, 2, h, L, 4), randn(R, 2, h, L, 4), randn(R, 2, h, L, 4)
    ours, _ = an.sdpa_forward(q, k, v, bias=an.alibi_bias(an.alibi_slopes(h), L), is_causal=True)
    blooms = bloom.build_alibi_tensor(torch.ones(2, L, dtype=torch.long), h, torch.float64)
    theirs, _ = an.sdpa_forward(q, k, v, bias=blooms.numpy().reshape(2, h, 1, L), is_causal=True)
    # -m|j - i| and BLOOM's m*j differ by a constant per row: the same weights
    assert max_abs_diff(ours, theirs) < 1e-6                  # BLOOM's slopes are float32-rounded
    assert max_abs_diff(ours, an.sdpa_forward(q, k, v, is_causal=True)[0]) > 1e-2


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 20), (64, 256), (6, 7)])
def test_t5_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    torch = require("torch")
    t5 = require("transformers.models.t5.modeling_t5")
    rel = np.arange(-600, 601)[None, :] + np.arange(3)[:, None]
    theirs = t5.T5Attention._relative_position_bucket(
        torch.tensor(rel), bidirectional=bidirectional, num_buckets=num_buckets,
        max_distance=max_distance).numpy()
    ours = an.t5_relative_buckets(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                  max_distance=max_distance)
    assert np.array_equal(ours, theirs)
    assert ours.min() == 0 and ours.max() == num_buckets - 1


def test_table_backward_matches_finite_differences():
    table = randn(R, 10, 3)
    buckets = an.t5_relative_buckets(an.relative_positions(4, 6), num_buckets=10, max_distance=5)
    dbias = randn(R, 2, 3, 4, 6)
    dtable = an.relative_position_bias_backward(dbias, buckets, 10)
    num = numerical_gradient(
        lambda: float(np.sum(an.relative_position_bias(table, buckets) * dbias)), table)
    assert max_abs_diff(dtable, num) < 1e-8          # a linear map: only rounding, |loss| ~ 10
    assert np.all(dtable[np.setdiff1d(np.arange(10), buckets)] == 0)   # unused buckets: 0


def test_t5_bias_and_table_gradient_through_attention_equal_torch():
    torch = require("torch")
    t5 = require("transformers.models.t5.modeling_t5")
    config = t5.T5Config(d_model=16, d_kv=4, num_heads=4, relative_attention_num_buckets=8,
                         relative_attention_max_distance=12, is_decoder=True)
    attn = t5.T5Attention(config, has_relative_attention_bias=True).double()
    L, S, past = 3, 9, 6                          # decoding 3 queries after 6 cached positions
    theirs_bias = attn.compute_bias(L, S, past_seen_tokens=past)       # (1, h, L, S)
    q, k, v = randn(R, 2, 4, L, 4), randn(R, 2, 4, S, 4), randn(R, 2, 4, S, 4)
    tq, tk, tv = (torch.tensor(a) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=theirs_bias,
                                                           scale=1.0)   # T5 does not scale
    dout = randn(R, *out.shape)
    out.backward(torch.tensor(dout))
    table = attn.relative_attention_bias.weight.detach().numpy()
    buckets = an.t5_relative_buckets(an.relative_positions(L, S, align="bottom_right"),
                                     bidirectional=False, num_buckets=8, max_distance=12)
    bias = an.relative_position_bias(table, buckets)                   # (h, L, S)
    assert max_abs_diff(bias, theirs_bias[0].detach().numpy()) == 0
    ours, cache = an.sdpa_forward(q, k, v, bias=bias, scale=1.0)
    *_, dbias = an.sdpa_backward(dout, cache, return_dbias=True)
    dtable = an.relative_position_bias_backward(dbias, buckets, 8)
    assert max_abs_diff(ours, out.detach().numpy()) < 1e-14
    assert max_abs_diff(dtable, attn.relative_attention_bias.weight.grad.numpy()) < 1e-13


@pytest.mark.parametrize("call,exc,words", [
    (lambda: an.alibi_slopes(0), ValueError, "num_heads"),
    (lambda: an.alibi_bias(np.ones((2, 2)), 3), ValueError, "slopes"),
    (lambda: an.alibi_bias(np.ones(2, int), 3), TypeError, "slopes"),
    (lambda: an.relative_positions(3, align="left"), ValueError, "align"),
    (lambda: an.t5_relative_buckets(np.ones(3)), TypeError, "relative_position"),
    (lambda: an.t5_relative_buckets(np.ones(3, int), num_buckets=1), ValueError, "num_buckets"),
    (lambda: an.t5_relative_buckets(np.ones(3, int), max_distance=4), ValueError, "max_distance"),
    (lambda: an.relative_position_bias(np.ones((4, 2)), np.array([[4]])), ValueError, "buckets"),
    (lambda: an.relative_position_bias(np.ones((4, 2)), np.ones((1, 1))), TypeError, "buckets"),
    (lambda: an.relative_position_bias(np.ones(4), np.zeros((1, 1), int)), ValueError, "table"),
    (lambda: an.relative_position_bias_backward(np.ones((2, 3, 3)), np.zeros((3, 4), int), 4),
     ValueError, "dbias"),
])
def test_bad_arguments_name_themselves(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


@pytest.mark.parametrize("height, width", [(4, 4), (2, 3), (3, 1)])
def test_grid_relative_index_equals_swin_and_data2vec_vision(height, width):
    """The 2-D offsets of a grid of patches: Swin's index (a window, no class token) and
    Data2VecVision's (a class token first, 3 more rows), built by transformers itself."""
    torch = require("torch")
    swin = require("transformers.models.swin.modeling_swin")
    d2v = require("transformers.models.data2vec.modeling_data2vec_vision")
    from attention_np.variants.position_bias import grid_relative_index
    theirs = swin.SwinRelativePositionBias(2, (height, width)).relative_position_index
    ours = grid_relative_index(height, width)
    assert ours.shape == (height * width,) * 2
    assert np.array_equal(ours.ravel(), theirs.numpy())
    with_cls = d2v.Data2VecVisionRelativePositionBias.generate_relative_position_index(
        (height, width))
    assert np.array_equal(grid_relative_index(height, width, cls=True), with_cls.numpy())
    rows = (2 * height - 1) * (2 * width - 1)
    assert set(np.unique(ours)) == set(range(rows))           # every offset, once a row
    # the gather of a table (rows, h) into (h, N, N) and its backward against torch autograd
    table = randn(R, rows + 3, 2)
    t = torch.tensor(table, requires_grad=True)
    bias = t[with_cls.reshape(-1)].reshape(*with_cls.shape, 2).permute(2, 0, 1)
    dbias = randn(R, *bias.shape)
    bias.backward(torch.tensor(dbias))
    index = grid_relative_index(height, width, cls=True)
    assert max_abs_diff(an.relative_position_bias(table, index), bias.detach().numpy()) == 0
    assert max_abs_diff(an.relative_position_bias_backward(dbias, index, rows + 3),
                        t.grad.numpy()) < 1e-14
    with pytest.raises(ValueError, match="height"):
        grid_relative_index(0, 2)
