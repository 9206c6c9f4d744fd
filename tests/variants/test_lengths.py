"""Per-sequence lengths: ``lengths_mask(q_lengths, kv_lengths, L, S)`` in sdpa_forward, the tiled path
and mha_forward, equal to the explicit mask and to JAX's query_seq_lengths / key_value_seq_lengths;
and the 0.1 keywords ``q_lengths=``, ``kv_lengths=`` it replaces (deprecated since 0.2.0)."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import tiled
from tests.helpers import max_abs_diff, randn, require

R = np.random.default_rng(1205)
B, H, L, S, D = 3, 2, 5, 6, 4
QL, KL = np.array([5, 2, 0]), np.array([6, 3, 1])
MASK = ((np.arange(L) < QL[:, None])[:, :, None] & (np.arange(S) < KL[:, None])[:, None, :])[:, None]


@pytest.mark.parametrize("forward,backward", [
    (an.sdpa_forward, an.sdpa_backward),
    (lambda *a, **kw: tiled.flash_attention_forward(*a, block_size=4, **kw), tiled.flash_attention_backward),
], ids=["fused", "tiled"])
def test_lengths_equal_the_explicit_padding_mask(forward, backward):
    q, k, v = randn(R, B, H, L, D), randn(R, B, H, S, D), randn(R, B, H, S, D)
    k[1, :, 3:] = np.nan                                 # padding keys never reach the answer
    out, cache = forward(q, k, v, an.lengths_mask(QL, KL, L, S)[:, None], is_causal=True)
    want, wcache = forward(q, k, v, MASK, is_causal=True)
    dout = randn(R, *out.shape)
    assert np.isfinite(out).all() and max_abs_diff(out, want) == 0
    assert np.all(out[2] == 0) and np.all(out[1, :, 2:] == 0)     # padded query rows: 0
    for a, b in zip(backward(dout, cache), backward(dout, wcache), strict=True):
        assert max_abs_diff(a, b) == 0


def test_mha_lengths_equal_the_mask():
    x, y = randn(R, B, L, 8), randn(R, B, S, 8)
    params = an.init_mha_params(8, 2, rng=0)
    a, _ = an.mha_forward(x, y, y, params, an.lengths_mask(QL, KL, L, S)[:, None], num_heads=2)
    b, _ = an.mha_forward(x, y, y, params, MASK, num_heads=2)
    assert max_abs_diff(a, b) == 0


@pytest.mark.float32
def test_jax_seq_lengths():
    jax = require("jax")
    from attention_np.interop import jax as ijax
    q, k, v = randn(R, B, H, L, D), randn(R, B, H, S, D), randn(R, B, H, S, D)
    t = ijax.to_jax_layout
    with ijax.x64():
        theirs = jax.nn.dot_product_attention(t(q), t(k), t(v), query_seq_lengths=QL.astype(np.int32),
                                              key_value_seq_lengths=KL.astype(np.int32))
    ours, _ = an.sdpa_forward(q, k, v, an.lengths_mask(QL, KL, L, S)[:, None])
    real = np.arange(L) < QL[:, None]                          # JAX leaves padded rows undefined
    theirs = ijax.from_jax_layout(np.asarray(theirs))
    # JAX's softmax runs in float32 even for float64 inputs: float32 accuracy
    assert max_abs_diff(ours[real[:, None, :].repeat(H, 1)], theirs[real[:, None, :].repeat(H, 1)]) < 2e-5


def test_lengths_mask_is_the_padding_of_the_lengths():
    """The 0.1 keywords q_lengths=/kv_lengths= became this mask (0.2; the keywords are gone in 0.3)."""
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((3, 4, 2)), rng.standard_normal((3, 5, 2)), rng.standard_normal((3, 5, 3))
    ql, kl = np.array([4, 2, 0]), np.array([5, 1, 3])
    m = an.lengths_mask(ql, kl, 4, 5)
    i, j = np.arange(4)[:, None], np.arange(5)
    assert np.array_equal(m, (i < ql[:, None, None]) & (j < kl[:, None, None]))
    new, _ = an.sdpa_forward(q, k, v, m)
    assert not new[2].any() and new[1, :2].any()                  # a padded query row gives 0
