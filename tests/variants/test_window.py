"""Sliding-window (local) attention: sliding_window_mask against causal_mask, transformers' Mistral
masks and JAX's local_window_size; the window in the reference, fused, tiled and multi-head paths, with
finite differences and PyTorch (the window as a bool attn_mask) on random upstream gradients."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import reference, tiled, tiles
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.variants.window import sliding_window_mask
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded

R = np.random.default_rng(123)


def test_window_mask_examples_and_its_limits_are_causal_masks():
    assert sliding_window_mask(3, 4, left=0, right=1).astype(int).tolist() == [[1, 1, 0, 0], [0, 1, 1, 0],
                                                                     [0, 0, 1, 1]]
    for align in ("top_left", "bottom_right"):
        assert np.array_equal(sliding_window_mask(4, 6, left=None, right=0, align=align),
                              an.causal_mask(4, 6, align=align))
    with pytest.raises(ValueError, match=r"sliding_window_mask\(4, 2\) has no window"):
        sliding_window_mask(4, 2)                                   # the 0.1 trap: 2 is S, not a window
    with pytest.raises(TypeError):
        sliding_window_mask(4, 4, 2)                                # left and right are keyword-only
    # bottom right: the last query sits at the last key
    assert sliding_window_mask(2, 5, left=1, right=0, align="bottom_right").astype(int).tolist() == [
        [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]


@pytest.mark.parametrize("W", [1, 3, 8])
def test_equals_transformers_mistral_sliding_window_mask(W):
    torch = require("torch")
    transformers = require("transformers")
    from transformers.masking_utils import create_sliding_window_causal_mask
    cfg = transformers.MistralConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                                     sliding_window=W)
    cfg._attn_implementation = "sdpa"
    L = 7
    pad = torch.tensor([[1] * L, [0, 0] + [1] * (L - 2)])           # second sequence left-padded
    # no cache: `cache=None` where transformers has it (past_key_values is deprecated there,
    # to be removed in 5.40), `past_key_values=None` in the older releases we support (>= 5.15)
    params = inspect.signature(create_sliding_window_causal_mask).parameters
    no_cache = {"cache": None} if "cache" in params else {"past_key_values": None}
    theirs = create_sliding_window_causal_mask(
        config=cfg, inputs_embeds=torch.zeros(2, L, 16, dtype=torch.float64), attention_mask=pad,
        position_ids=torch.arange(L)[None], **no_cache)
    # Mistral's sliding_window=W counts the query itself: left = W - 1
    ours = sliding_window_mask(L, L, left=W - 1, right=0) & an.padding_mask(np.array([L, L]))
    ours = ours & (np.arange(L) >= np.array([0, 2])[:, None])[:, None, :]
    assert np.array_equal(theirs.numpy()[:, 0], ours)


def test_bottom_right_equals_transformers_mask_function_for_decoding():
    torch = require("torch")
    require("transformers")
    from transformers.masking_utils import sliding_window_causal_mask_function
    L, S, W = 3, 9, 4                                  # 3 new queries after 6 cached positions
    fn = sliding_window_causal_mask_function(W)
    q_idx, kv_idx = torch.arange(S - L, S)[:, None], torch.arange(S)[None]
    theirs = fn(0, 0, q_idx, kv_idx).numpy()
    assert np.array_equal(theirs, sliding_window_mask(L, S, left=W - 1, right=0, align="bottom_right"))


def _in_spec(forward, **fixed):
    """``forward`` called with ``window=`` as ``spec=AttentionSpec(window=...)``."""
    def run(*args, window=None, **kw):
        return forward(*args, spec=an.AttentionSpec(window=window), **fixed, **kw)
    return run


PATHS = {
    "reference": (_in_spec(reference.sdpa_forward), reference.sdpa_backward),
    "fused": (_in_spec(an.sdpa_forward), an.sdpa_backward),
    "tiled": (_in_spec(tiled.flash_attention_forward, block_size=2), tiled.flash_attention_backward),
}
WINDOWS = [((2, 1), False), ((1, None), True), ((0, 0), False), ((None, 3), False), ((3, 2), True)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("window,is_causal", WINDOWS, ids=str)
def test_window_equals_torch_with_the_window_as_a_mask(path, window, is_causal):
    forward, backward = PATHS[path]
    q, k, v = randn(R, 2, 3, 6, 4), randn(R, 2, 3, 9, 4), randn(R, 2, 3, 9, 5)
    out, cache = forward(q, k, v, window=window, is_causal=is_causal)
    dout = randn(R, *out.shape)
    mask = sliding_window_mask(6, 9, left=window[0], right=window[1])
    if is_causal:
        mask = mask & an.causal_mask(6, 9)
    want = torch_ref.sdpa(q, k, v, dout, mask=mask)
    for ours, theirs in zip((out, *backward(dout, cache)), want, strict=True):
        assert max_abs_diff(ours, theirs) < 1e-12


@pytest.mark.parametrize("path", PATHS)
def test_window_gradients_match_finite_differences(path):
    forward, backward = PATHS[path]
    q, k, v = randn(R, 5, 3), randn(R, 5, 3), randn(R, 5, 2)
    dout = randn(R, 5, 2)
    grads = backward(dout, forward(q, k, v, window=(1, 1))[1])
    for x, g in zip((q, k, v), grads, strict=True):
        num = numerical_gradient(lambda: float(np.sum(forward(q, k, v, window=(1, 1))[0] * dout)), x)
        assert max_abs_diff(g, num) < 1e-9


def test_tiled_path_skips_key_blocks_outside_every_window():
    # 64 queries and keys in blocks of 8, window (4, 0): each key block is seen by rows
    # [j0, j1 + 4) only, so a block costs 8 + 4 rows, not 64
    blocks = list(tiles.key_blocks(64, 64, 8, False, (4, 0)))
    assert len(blocks) == 8
    assert all(i0 == j0 and i1 == min(64, j1 + 4) for j0, j1, i0, i1 in blocks)
    # keys beyond every query's window (L=4 queries, window right=2, S=64): blocks from 8 on skipped
    assert [b[0] for b in tiles.key_blocks(4, 64, 8, False, (None, 2))] == [0]


def test_rows_whose_window_holds_no_key_give_zero_not_nan():
    q, k, v = randn(R, 6, 2), randn(R, 3, 2), randn(R, 3, 2)         # L > S, top left
    for forward, backward in PATHS.values():
        out, cache = forward(q, k, v, window=(1, 0))
        assert np.all(out[4:] == 0) and np.isfinite(out).all()      # rows 4, 5 see no key
        dq = backward(np.ones_like(out), cache)[0]
        assert np.all(dq[4:] == 0)


def test_mha_forward_window_equals_the_mask():
    x = randn(R, 2, 7, 8)
    params = an.init_mha_params(8, 2, rng=3)
    dout = randn(R, 2, 7, 8)
    for kernel in ("fused", "reference"):
        a, ca = an.mha_forward(x, x, x, params, spec=an.AttentionSpec(window=(2, 0),
                                                                      kernel=kernel), num_heads=2)
        b, cb = an.mha_forward(x, x, x, params, sliding_window_mask(7, 7, left=2, right=0), num_heads=2)
        assert max_abs_diff(a, b) < 1e-15
        ga, gb = an.mha_backward(dout, ca), an.mha_backward(dout, cb)
        assert max(max_abs_diff(ga[3][n], gb[3][n]) for n in params) < 1e-14


@pytest.mark.float32
def test_jax_local_window_size():
    jax = require("jax")
    from attention_np.interop import jax as ijax
    q, k, v = randn(R, 2, 3, 7, 4), randn(R, 2, 3, 7, 4), randn(R, 2, 3, 7, 4)
    dout = randn(R, 2, 3, 7, 4)
    t = ijax.to_jax_layout
    with ijax.x64():
        out, vjp = jax.vjp(lambda a, b, c: jax.nn.dot_product_attention(
            a, b, c, local_window_size=(2, 1)), t(q), t(k), t(v))
        theirs = [ijax.from_jax_layout(np.asarray(a)) for a in (out, *vjp(t(dout)))]
    o, cache = an.sdpa_forward(q, k, v, spec=an.AttentionSpec(window=(2, 1)))
    ours = (o, *an.sdpa_backward(dout, cache))
    # JAX's softmax runs in float32 even for float64 inputs: float32 accuracy
    for a, b in zip(ours, theirs, strict=True):
        assert max_abs_diff(a, b) < 2e-5


@pytest.mark.parametrize("window,exc", [((1,), ValueError), ((-1, 0), ValueError),
                                        ((1.5, 0), ValueError), (3, ValueError),
                                        ((True, 0), ValueError)])
def test_bad_window_names_itself(window, exc):
    for forward, _ in PATHS.values():
        with pytest.raises(exc, match="window"):
            forward(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), window=window)


@pytest.mark.float32
@pytest.mark.parametrize("path", ["fused", "tiled"])
def test_window_float32(path):
    forward, backward = PATHS[path]
    (q, k, v, dout), f64 = rounded(*(randn(R, 2, 3, 9, 8) for _ in range(4)))
    out, cache = forward(q, k, v, window=(3, 1))
    ours = [out, *backward(dout, cache)]
    window = sliding_window_mask(9, 9, left=3, right=1)
    oracle = torch_ref.sdpa(*f64, mask=window)                    # torch, float64: not ours
    theirs = torch_ref.sdpa(q, k, v, dout, mask=window)
    assert_float32_all(("out", "dq", "dk", "dv"), ours, theirs, oracle, framework="torch")
