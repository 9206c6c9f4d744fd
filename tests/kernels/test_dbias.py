"""The gradient w.r.t. ``bias`` (``return_dbias=True``): reference, fused, tiled and multi-head paths,
against PyTorch (a float ``attn_mask`` with ``requires_grad``) and JAX (``jax.nn.dot_product_attention``'s
bias), and by central finite differences, with random upstream gradients, summed to broadcast shapes."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import fused, reference, tiled
from attention_np.paper.gradcheck import numerical_gradient
from tests import torch_ref
from tests.helpers import assert_float32_all, max_abs_diff, randn, require, rounded

R = np.random.default_rng(120)
B, H, L, S, D = 2, 3, 4, 7, 5


def _tiled(q, k, v, mask=None, **kw):
    return tiled.flash_attention_forward(q, k, v, mask, block_size=3, **kw)


PATHS = {
    "reference": (reference.sdpa_forward, reference.sdpa_backward),
    "fused": (fused.sdpa_forward, fused.sdpa_backward),
    "tiled": (_tiled, tiled.flash_attention_backward),
}
BIAS_SHAPES = [(B, H, L, S), (L, S), (H, 1, S), (B, 1, 1, S), (1, L, 1), ()]


def _torch_dbias(q, k, v, bias, dout, mask=None, enable_gqa=False):
    return torch_ref.sdpa(q, k, v, dout, mask=mask, bias=bias, enable_gqa=enable_gqa, return_dbias=True)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shape", BIAS_SHAPES, ids=str)
def test_dbias_equals_torch_float64(path, shape):
    forward, backward = PATHS[path]
    q, k, v = randn(R, B, H, L, D), randn(R, B, H, S, D), randn(R, B, H, S, D)
    bias = randn(R, *shape)
    mask = R.random((B, 1, L, S)) > 0.3
    mask[0, 0, 1] = False                              # a fully masked row: dbias 0 there
    out, cache = forward(q, k, v, mask, bias=bias)
    dout = randn(R, *out.shape)
    dq, dk, dv, dbias = backward(dout, cache, return_dbias=True)
    want = _torch_dbias(q, k, v, bias, dout, mask=mask)
    assert dbias.shape == bias.shape
    for name, ours, theirs in zip(("out", "dq", "dk", "dv", "dbias"), (out, dq, dk, dv, dbias),
                                  want, strict=True):
        if name == "out" or name == "dbias":
            # torch gives a fully masked row NaN (all -inf); we give 0 (docs/api.md)
            theirs = np.nan_to_num(theirs, nan=0.0)
        if name != "dbias":
            theirs = np.where(np.isnan(theirs), 0.0, theirs)
        assert max_abs_diff(ours, theirs) < 1e-12, name if name != "dbias" else (name, shape)


@pytest.mark.parametrize("path", PATHS)
def test_dbias_with_causal_and_gqa_equals_torch(path):
    forward, backward = PATHS[path]
    if path == "reference":
        pytest.skip("the reference kernel has no grouped-query attention")
    q, k, v = randn(R, B, 4, L, D), randn(R, B, 2, S, D), randn(R, B, 2, S, D)
    bias = randn(R, 4, L, S)
    out, cache = forward(q, k, v, bias=bias, is_causal=True, spec=an.AttentionSpec(enable_gqa=True))
    dout = randn(R, *out.shape)
    *grads, dbias = backward(dout, cache, return_dbias=True)
    # torch refuses attn_mask with is_causal=True: the causal mask goes into attn_mask
    want = _torch_dbias(q, k, v, bias, dout, mask=an.causal_mask(L, S), enable_gqa=True)
    for ours, theirs in zip((out, *grads, dbias), want, strict=True):
        assert ours.shape == theirs.shape
        assert max_abs_diff(ours, theirs) < 1e-12


@pytest.mark.parametrize("path", PATHS)
def test_dbias_matches_finite_differences(path):
    forward, backward = PATHS[path]
    q, k, v = randn(R, 2, 3, 2), randn(R, 2, 5, 2), randn(R, 2, 5, 3)
    bias = randn(R, 1, 3, 5)
    dout = randn(R, 2, 3, 3)
    *_, dbias = backward(dout, forward(q, k, v, bias=bias, is_causal=True)[1], return_dbias=True)
    num = numerical_gradient(lambda: float(np.sum(forward(q, k, v, bias=bias, is_causal=True)[0]
                                                   * dout)), bias)
    assert max_abs_diff(dbias, num) < 1e-9
    assert np.all(dbias[0][np.triu_indices(3, 1, 5)] == 0)     # causally masked: no gradient


@pytest.mark.parametrize("path", PATHS)
def test_no_bias_gives_none_and_default_returns_three(path):
    forward, backward = PATHS[path]
    q, k, v = randn(R, 3, 2), randn(R, 4, 2), randn(R, 4, 2)
    out, cache = forward(q, k, v)
    assert len(backward(out, cache)) == 3
    assert backward(out, cache, return_dbias=True)[3] is None


@pytest.mark.float32
def test_jax_bias_gradient():
    jax = require("jax")
    from attention_np.interop import jax as ijax
    jnp = jax.numpy
    q, k, v = randn(R, B, L, H, D), randn(R, B, S, H, D), randn(R, B, S, H, D)    # JAX: (B, T, N, H)
    bias = randn(R, 1, H, L, S)                                                     # (B, N, T, S)
    dout = randn(R, B, L, H, D)
    f = lambda b: jnp.sum(jax.nn.dot_product_attention(q, k, v, bias=b) * dout)   # noqa: E731
    with ijax.x64():
        want = np.asarray(jax.grad(f)(jnp.asarray(bias)))
    t = ijax.from_jax_layout
    out, cache = an.sdpa_forward(t(q), t(k), t(v), bias=bias)
    *_, dbias = an.sdpa_backward(t(dout), cache, return_dbias=True)
    # JAX runs its softmax in float32 even for float64 inputs (docs/frameworks.md): float32 accuracy
    assert dbias.shape == want.shape
    assert max_abs_diff(dbias, want) < 2e-5


def test_mha_backward_returns_dbias_for_every_path():
    x = randn(R, B, L, 8)
    params = an.init_mha_params(8, 2, rng=1)
    bias = randn(R, 2, L, L)
    dout = randn(R, B, L, 8)
    results = []
    for kernel in ("fused", "reference"):
        out, cache = an.mha_forward(x, x, x, params, bias=bias,
                                    spec=an.AttentionSpec(kernel=kernel), num_heads=2)
        assert len(an.mha_backward(dout, cache)) == 4
        *_, dbias = an.mha_backward(dout, cache, return_dbias=True)
        results.append(dbias)
    num = numerical_gradient(lambda: float(np.sum(
        an.mha_forward(x, x, x, params, num_heads=2, bias=bias)[0] * dout)), bias)
    assert results[0].shape == bias.shape
    assert max_abs_diff(results[0], num) < 1e-8          # central differences, eps = 1e-6
    assert max_abs_diff(results[0], results[1]) < 1e-13


@pytest.mark.float32
@pytest.mark.parametrize("path", PATHS)
def test_dbias_float32(path):
    forward, backward = PATHS[path]
    (q, k, v, bias, dout), f64 = rounded(*(randn(R, B, H, n, D) for n in (L, S, S)), randn(R, H, L, S),
                                         randn(R, B, H, L, D))
    ours = list(backward(dout, forward(q, k, v, bias=bias)[1], return_dbias=True))
    ours.insert(0, forward(q, k, v, bias=bias)[0])
    oracle = _torch_dbias(*f64[:4], f64[4])                       # torch, float64: not ours
    theirs = _torch_dbias(q, k, v, bias, dout)
    assert_float32_all(("out", "dq", "dk", "dv", "dbias"), ours, theirs, oracle, framework="torch")
