"""A ``-inf`` bias entry removes a key exactly like a False in ``mask`` (docs/api.md, conventions).

Generated: shapes from 1 up (L, S, d_k, d_v, batch), a random pattern of ``-inf`` entries in a
bias of shape ``(L, S)`` or ``(B, L, S)`` (fully removed rows and keys removed for every row
included), NaN or ±inf written into ``k`` and ``v`` at keys every row has removed; every kernel
(fused, reference, tiled, the sinks kernel, multi-head attention on each registered kernel),
float32 and float64, forward and backward (``dq, dk, dv`` and ``dbias``). Each run is held to
the same call with the ``-inf`` entries given as a boolean mask instead (and 0 in the bias):
the documented equivalence. The inputs of that second call are finite where it matters, so
that the expected result is itself the finite one.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import attention_np as an
from attention_np.kernels import reference
from attention_np.kernels.registry import KERNELS
from attention_np.variants.spec import AttentionSpec

GARBAGE = (np.nan, np.inf, -np.inf)
TOL = {np.float64: 1e-12, np.float32: 2e-5}


@st.composite
def cases(draw):
    """q, k, v, dout, the bias with its ``-inf`` entries and the garbage put at removed keys."""
    B, L, S = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bias_shape = draw(st.sampled_from([(L, S), (B, L, S)]))
    removed = rng.random(bias_shape) < draw(st.sampled_from([0.2, 0.5, 0.8]))
    if draw(st.booleans()):                                     # a fully removed query row
        removed[..., rng.integers(L), :] = True
    if draw(st.booleans()):                                     # a key every row has removed
        removed[..., rng.integers(S)] = True
    bias = rng.standard_normal(bias_shape)
    bias[removed] = -np.inf
    q, k, v = (rng.standard_normal(s) for s in ((B, L, d_k), (B, S, d_k), (B, S, d_v)))
    dout = rng.standard_normal((B, L, d_v))
    gone = np.broadcast_to(removed, (B, L, S)).all(axis=1)      # (B, S): removed for every row
    bad = draw(st.sampled_from(GARBAGE))
    kb, vb = k.copy(), v.copy()
    kb[gone], vb[gone] = bad, bad
    cast = [x.astype(dtype) for x in (q, k, v, kb, vb, dout, bias)]
    return (*cast, removed, bad)


def _as_mask(bias, removed):
    """The same removal as a boolean mask, and the bias with 0 where it was ``-inf``."""
    return ~removed, np.where(removed, bias.dtype.type(0), bias)


def _same(got, want, dtype):
    for g, w in zip(got, want, strict=True):
        if g is None or w is None:
            assert g is None and w is None
            continue
        assert g.dtype == w.dtype == dtype
        assert np.isfinite(g).all()                             # the garbage stayed out
        np.testing.assert_allclose(g, w, rtol=TOL[np.dtype(dtype).type], atol=TOL[np.dtype(dtype).type])


def _sdpa_paths():
    tiled = (lambda q, k, v, m=None, **kw: an.flash_attention_forward(q, k, v, m, block_size=2, **kw),
             an.flash_attention_backward)
    return {"fused": (an.sdpa_forward, an.sdpa_backward),
            "reference": (reference.sdpa_forward, reference.sdpa_backward), "tiled": tiled}


@given(cases(), st.sampled_from(sorted(_sdpa_paths())))
def test_minus_inf_bias_is_the_boolean_mask_in_every_sdpa_kernel(case, path):
    q, k, v, kb, vb, dout, bias, removed, bad = case
    fwd, bwd = _sdpa_paths()[path]
    mask, finite_bias = _as_mask(bias, removed)
    out, cache = fwd(q, kb, vb, bias=bias)
    got = (out, *bwd(dout, cache, return_dbias=True))
    out_m, cache_m = fwd(q, k, v, mask, bias=finite_bias)
    want = (out_m, *bwd(dout, cache_m, return_dbias=True))
    _same(got[:2] + got[4:], want[:2] + want[4:], q.dtype)      # out, dq, dbias
    gone = np.broadcast_to(removed, q.shape[:-2] + removed.shape[-2:]).all(axis=-2)
    for g, w in zip(got[2:4], want[2:4], strict=True):           # dk, dv: 0 at removed keys
        assert np.all(g[gone] == 0)
        _same([np.where(gone[..., None], 0, g)], [w], q.dtype)


def _sinks_paths():
    def tiled(q, k, v, sinks, mask=None, *, bias):
        return an.flash_attention_forward(q, k, v, mask, bias=bias, sinks=sinks, block_size=2)

    def tiled_backward(dout, cache, *, return_dbias):
        from attention_np.kernels.tiled import backward
        g = backward(dout, cache)
        return (*g.qkv, g.dsinks, g.dbias)

    return {"fused": (an.sdpa_sinks_forward, an.sdpa_sinks_backward), "tiled": (tiled, tiled_backward)}


@given(cases(), st.sampled_from(sorted(_sinks_paths())))
def test_minus_inf_bias_is_the_boolean_mask_with_attention_sinks(case, kernel):
    q, k, v, kb, vb, dout, bias, removed, bad = case
    q, k, v, kb, vb, dout = (x[:, None] for x in (q, k, v, kb, vb, dout))   # one head
    sinks = np.array([0.3], q.dtype)
    fwd, bwd = _sinks_paths()[kernel]
    mask, finite_bias = _as_mask(bias, removed)
    bias, mask, finite_bias = (x[..., None, :, :] if x.ndim == 3 else x for x in (bias, mask, finite_bias))
    out, cache = fwd(q, kb, vb, sinks, bias=bias)
    got = (out, *bwd(dout, cache, return_dbias=True))
    out_m, cache_m = fwd(q, k, v, sinks, mask, bias=finite_bias)
    want = (out_m, *bwd(dout, cache_m, return_dbias=True))
    gone = np.broadcast_to(mask, q.shape[:-2] + mask.shape[-2:])
    gone = ~gone.any(axis=-2)
    for g, w in zip(got[2:4], want[2:4], strict=True):
        assert np.all(g[gone] == 0)
        _same([np.where(gone[..., None], 0, g)], [w], q.dtype)
    _same([got[0], got[1], got[4], got[5]], [want[0], want[1], want[4], want[5]], q.dtype)


@given(cases(), st.sampled_from(sorted(KERNELS)))
def test_minus_inf_bias_is_the_boolean_mask_in_multi_head_attention(case, kernel):
    """Multi-head attention (the bias reaches every head's kernel): the key and value inputs carry
    the garbage at removed positions; their projections do too, and must stay out."""
    q, k, v, kb, vb, dout, bias, removed, bad = case
    d_model = 4
    rng = np.random.default_rng(0)
    x, mem = rng.standard_normal(q.shape[:-1] + (d_model,)), rng.standard_normal(k.shape[:-1] + (d_model,))
    x, mem = x.astype(q.dtype), mem.astype(q.dtype)
    memb = mem.copy()
    memb[np.broadcast_to(removed, q.shape[:-2] + removed.shape[-2:]).all(axis=-2)] = bad
    params = an.init_mha_params(d_model, 2, rng=0, dtype=q.dtype)
    spec = AttentionSpec(kernel=kernel)
    mask, finite_bias = _as_mask(bias, removed)
    head = (lambda b: b[:, None]) if bias.ndim == 3 else (lambda b: b)
    out, cache = an.mha_forward(x, memb, memb, params, num_heads=2, bias=head(bias), spec=spec)
    dout = rng.standard_normal(out.shape).astype(q.dtype)
    g = an.mha_backward(dout, cache)
    out_m, cache_m = an.mha_forward(x, mem, mem, params, head(mask), num_heads=2,
                                    bias=head(finite_bias), spec=spec)
    w = an.mha_backward(dout, cache_m)
    _same([out, g[0]] + [g[3][n] for n in sorted(g[3])], [out_m, w[0]] + [w[3][n] for n in sorted(w[3])],
          q.dtype)
