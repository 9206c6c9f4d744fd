"""attention_np.interop.jax: jax.nn.dot_product_attention's layout, masks, GQA and precision,
diffed against sdpa_forward / sdpa_backward with jax.vjp and random upstream gradients."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.interop import jax as ijax
from tests import oracles
from tests.helpers import assert_float32_all, max_abs_diff, require

jax = require("jax")
jnp = jax.numpy

# float32 against a float64 oracle with |scores| of a few units: ~1e-6 forward, a few 1e-6 for
# gradients (docs/frameworks.md). Absolute, because elementwise rtol fails near zero.
ATOL32 = 2e-5


def test_layout_swaps_heads_and_positions(rng):
    x = rng.standard_normal((2, 3, 5, 4))                 # ours (B, N, T, H)
    j = ijax.to_jax_layout(x)
    assert j.shape == (2, 5, 3, 4)
    np.testing.assert_array_equal(j[1, 4, 2], x[1, 2, 4])   # batch 1, position 4, head 2
    np.testing.assert_array_equal(ijax.from_jax_layout(j), x)


CASES = {
    "plain": dict(),
    "cross": dict(S=7),
    "mask": dict(S=7, mask=True),
    "causal L<S": dict(S=7, is_causal=True),
    "causal L>S": dict(L=7, S=4, is_causal=True),
    "bias": dict(S=7, bias=True),
    "mask+bias": dict(S=7, mask=True, bias=True),
    "scale": dict(scale=0.2),
    "GQA 4/2": dict(H=4, H_kv=2, S=6),
    "MQA 4/1": dict(H=4, H_kv=1, S=6),
}


@pytest.mark.float32
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_dot_product_attention_matches_ours_forward_and_vjp_in_float32(rng, case):
    L, S, H = case.get("L", 5), case.get("S", 5), case.get("H", 2)
    H_kv = case.get("H_kv", H)
    q = rng.standard_normal((2, H, L, 8))
    k, v = rng.standard_normal((2, 2, H_kv, S, 8))
    mask = None
    if case.get("mask"):
        mask = rng.random((2, 1, L, S)) < 0.6
        mask[..., 0] = True
    bias = rng.standard_normal((1, H, L, S)) if case.get("bias") else None
    kw = dict(bias=bias, is_causal=case.get("is_causal", False), scale=case.get("scale"))
    q, k, v = (a.astype(np.float32) for a in (q, k, v))
    dout = rng.standard_normal((2, H, L, 8)).astype(np.float32)
    # the float64 oracle, by definition on the float32-rounded inputs (JAX's own float64 is not
    # float64: its softmax runs in float32, see the next test)
    oracle = oracles.attention_and_gradients(q, k, v, dout, mask, groups=H // H_kv, **kw)
    got = ijax.forward_backward(q, k, v, dout, mask=mask, **kw)
    out32, cache32 = an.sdpa_forward(q, k, v, mask, **kw, spec=an.AttentionSpec(enable_gqa=H_kv != H))
    ours = (out32, *an.sdpa_backward(dout, cache32))
    assert_float32_all(("out", "dq", "dk", "dv"), ours, got, oracle, framework="jax")


@pytest.mark.float32
def test_jax_softmax_is_float32_even_for_float64_inputs_with_x64(rng):
    q, k, v = 2 * rng.standard_normal((3, 2, 2, 16, 16))
    oracle, _ = an.sdpa_forward(q, k, v)
    with ijax.x64():
        out = ijax.forward_backward(q, k, v, np.ones_like(oracle))[0]
    assert out.dtype == np.float64                            # float64 arrays...
    err = max_abs_diff(out, oracle)
    assert 1e-10 < err < ATOL32                               # ...float32 accuracy


def test_float64_inputs_without_x64_run_in_float32(rng):
    q, k, v = rng.standard_normal((3, 1, 2, 4, 4))
    with ijax.x64(False):
        out = jax.nn.dot_product_attention(*(ijax.to_jax_layout(a) for a in (q, k, v)))
    assert out.dtype == np.float32


def test_x64_is_scoped_to_the_block():
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is switched on globally in this process")
    with ijax.x64():
        assert jnp.asarray(np.zeros(1)).dtype == np.float64
    assert jnp.asarray(np.zeros(1)).dtype == np.float32


def test_fully_masked_row_is_mean_of_values_in_jax_and_zero_here(rng):
    q, k, v = rng.standard_normal((3, 1, 2, 4, 4)).astype(np.float32)
    mask = np.ones((4, 4), dtype=bool)
    mask[2] = False
    ours, _ = an.sdpa_forward(q, k, v, mask)
    theirs = ijax.forward_backward(q, k, v, np.ones_like(ours), mask=mask)[0]
    assert not ours[..., 2, :].any()
    assert max_abs_diff(theirs[..., 2, :], v.mean(axis=-2)) < 1e-6
    assert max_abs_diff(np.delete(theirs, 2, axis=-2), np.delete(ours, 2, axis=-2)) < 1e-6


def test_to_jax_dpa_refuses_d_v_other_than_d_k_and_non_4d_inputs(rng):
    q = k = rng.standard_normal((1, 2, 3, 4))
    with pytest.raises(ValueError, match="d_k == d_v"):
        ijax.to_jax_dpa(q, k, rng.standard_normal((1, 2, 3, 5)))
    with pytest.raises(ValueError):                      # JAX itself refuses it too
        jax.nn.dot_product_attention(q, k, rng.standard_normal((1, 2, 3, 5)))
    with pytest.raises(ValueError, match="must have 4 dims"):
        ijax.to_jax_dpa(q[0], k[0], k[0])
    with pytest.raises(TypeError, match="bool"):
        ijax.to_jax_dpa(q, k, k, mask=np.zeros((3, 3)))


def test_from_jax_dpa_gives_our_layout_and_mask(rng):
    query, key = rng.standard_normal((2, 1, 5, 2, 4))         # JAX (B, T, N, H)
    mask = rng.random((1, 2, 5, 5)) < 0.5
    q, k, v, kw = ijax.from_jax_dpa(query, key, key, mask=mask, is_causal=True, scale=0.5)
    assert q.shape == (1, 2, 5, 4)
    np.testing.assert_array_equal(q[0, 1, 3], query[0, 3, 1])
    assert kw == {"mask": kw["mask"], "bias": None, "is_causal": True, "scale": 0.5,
                  "spec": an.AttentionSpec(enable_gqa=False)}
    np.testing.assert_array_equal(kw["mask"], mask)


@pytest.mark.float32
def test_from_jax_dpa_arguments_give_jax_s_grouped_query_attention(rng):
    query = rng.standard_normal((2, 5, 4, 8)).astype(np.float32)      # JAX (B, T, N=4, H)
    key, value = rng.standard_normal((2, 2, 6, 2, 8)).astype(np.float32)   # K=2 key/value heads
    q, k, v, kw = ijax.from_jax_dpa(query, key, value, is_causal=True)
    assert kw["spec"].enable_gqa and q.shape == (2, 4, 5, 8) and k.shape == (2, 2, 6, 8)
    # float64 oracle on the float32 inputs, fed exactly what from_jax_dpa returned
    out, cache = an.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), **kw)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    want = (out, *an.sdpa_backward(dout.astype(np.float64), cache))
    direct = jax.nn.dot_product_attention(query, key, value, is_causal=True)   # JAX's own arrays
    assert max_abs_diff(ijax.from_jax_layout(np.asarray(direct)), out) < ATOL32
    got = ijax.forward_backward(q, k, v, dout, is_causal=True)
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert g.shape == w.shape and max_abs_diff(g, w) < ATOL32, name
