"""The reference Eq. (1) (kernels/reference.py) and the fused path (kernels/fused.py) give the same
numbers: outputs, weights and every gradient, to float64 rounding, over the attention test matrix
(every mask broadcast shape, bias, causal with L < S, L = S and L > S, custom scale, d_k != d_v,
broadcast batch dims, fully masked rows, S = 0).

The fused path is run twice: as is (these shapes are too small for its blocked path), and with
the blocked path (kernels/blocked.py) forced on, one query row per block, on two threads."""

import numpy as np
import pytest

from attention_np.kernels import blocked, fused, reference
from tests.helpers import randn

B, H, L, S, D_K, D_V = 2, 3, 4, 6, 5, 3


def _cases():
    mask_shapes = [(L, S), (1, 1, L, S), (B, 1, 1, S), (B, H, L, S), (H, L, S), (B, 1, L, S), (S,), ()]
    for shape in mask_shapes:
        yield f"mask{shape}", dict(mask_shape=shape)
    yield "bias", dict(bias_shape=(B, 1, L, S))
    yield "bias(H,L,S)+mask", dict(bias_shape=(H, L, S), mask_shape=(B, 1, 1, S))
    for Lq, Sk in [(3, 7), (7, 3), (5, 5)]:
        yield f"causal L={Lq} S={Sk}", dict(L=Lq, S=Sk, is_causal=True)
    yield "causal+mask", dict(is_causal=True, mask_shape=(B, 1, 1, S), L=S)
    yield "scale=1", dict(scale=1.0)
    yield "scale=0.37, d_v=7", dict(scale=0.37, d_v=7)
    yield "broadcast batch", dict(q_batch=(B, H), kv_batch=(1, H))
    yield "k, v without batch", dict(q_batch=(B, H), kv_batch=())
    yield "mask adds batch dims", dict(q_batch=(), kv_batch=(), mask_shape=(B, L, S))
    yield "fully masked rows", dict(mask_shape=(B, H, L, S), fully_masked=True)
    yield "no keys (S = 0)", dict(S=0)


CASES = dict(_cases())


@pytest.fixture(params=["fused", "blocked"])
def path(request, monkeypatch):
    """The fused path as is, or forced onto its blocked path: every block one query row, 2 threads."""
    if request.param == "blocked":
        monkeypatch.setattr(blocked, "MIN_ELEMENTS", 0)
        monkeypatch.setattr(blocked, "BLOCK_ELEMENTS", 1)
        monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "2")
    return request.param


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(CASES))
def test_reference_and_fused_paths_agree(rng, name, dtype, path):
    c = CASES[name]
    Lq, Sk, d_v = c.get("L", L), c.get("S", S), c.get("d_v", D_V)
    qb, kvb = c.get("q_batch", (B, H)), c.get("kv_batch", (B, H))
    q, k, v = (randn(rng, *qb, Lq, D_K, dtype=dtype), randn(rng, *kvb, Sk, D_K, dtype=dtype),
               randn(rng, *kvb, Sk, d_v, dtype=dtype))
    kw = dict(is_causal=c.get("is_causal", False), scale=c.get("scale"))
    if "mask_shape" in c:
        shape = c["mask_shape"]
        shape = tuple(Lq if n == L and i == len(shape) - 2 else Sk if n == S else n
                      for i, n in enumerate(shape))
        kw["mask"] = rng.random(shape) > 0.35
        if c.get("fully_masked"):
            kw["mask"][0, 1, 2] = False
            kw["mask"][1, :, 0] = False
    if "bias_shape" in c:
        kw["bias"] = randn(rng, *c["bias_shape"], dtype=dtype)

    out_t, cache_t = reference.sdpa_forward(q, k, v, **kw)
    out_f, cache_f = fused.sdpa_forward(q, k, v, **kw)
    # the blocked path takes every case without bias (no dropout here)
    assert (cache_f.blocks is not None) == (path == "blocked" and "bias_shape" not in c)
    dout = randn(rng, *out_t.shape, dtype=dtype)
    grads_t = reference.sdpa_backward(dout, cache_t)
    grads_f = fused.sdpa_backward(dout, cache_f)

    # float64: a few ulps of the values involved; float32: the same, in float32 ulps.
    eps = np.finfo(dtype).eps
    pairs = [("out", out_t, out_f), ("weights", cache_t.weights, cache_f.weights),
             *zip(("dq", "dk", "dv"), grads_t, grads_f, strict=True)]
    for what, a, b in pairs:
        assert a.shape == b.shape and a.dtype == b.dtype == dtype, what
        scale_ = max(1.0, float(np.abs(a).max(initial=0)))
        np.testing.assert_allclose(a, b, rtol=0, atol=64 * eps * scale_, err_msg=what)
    if c.get("fully_masked"):
        assert not cache_t.weights[0, 1, 2].any() and not out_t[0, 1, 2].any()


def test_each_backward_refuses_the_other_paths_cache_and_names_its_forward(rng):
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    out_t, cache_t = reference.sdpa_forward(q, k, v)
    out_f, cache_f = fused.sdpa_forward(q, k, v)
    made_by = r"AttentionCache comes from attention_np\.kernels\.reference\.sdpa_forward"
    with pytest.raises(TypeError, match=made_by):
        fused.sdpa_backward(out_t, cache_t)
    with pytest.raises(TypeError, match=r"SDPACache comes from attention_np\.sdpa_forward"):
        reference.sdpa_backward(out_f, cache_f)


@pytest.mark.parametrize("kw", [dict(), dict(is_causal=True), dict(mask_shape=(2, 1, 1, 6))])
def test_multihead_attention_through_either_path_agrees(rng, kw):
    import attention_np as an
    x = randn(rng, 2, 6, 8)
    params = an.init_mha_params(8, 2, rng=1)
    mask = rng.random(kw.pop("mask_shape")) > 0.3 if "mask_shape" in kw else None
    out_f, c_f = an.mha_forward(x, x, x, params, num_heads=2, mask=mask, **kw)
    out_t, c_t = an.mha_forward(x, x, x, params, mask=mask,
                                spec=an.AttentionSpec(kernel="reference"), **kw, num_heads=2)
    dout = randn(rng, *out_f.shape)
    np.testing.assert_allclose(out_t, out_f, rtol=0, atol=1e-14)
    for gf, gt in zip(an.mha_backward(dout, c_f)[:3], an.mha_backward(dout, c_t)[:3], strict=True):
        np.testing.assert_allclose(gt, gf, rtol=0, atol=1e-13)


def test_reference_path_refuses_dropout_and_grouped_query_attention(rng):
    import attention_np as an
    x = randn(rng, 2, 6, 8)
    with pytest.raises(ValueError, match="kernel 'reference' cannot do dropout"):
        an.mha_forward(x, x, x, an.init_mha_params(8, 2, rng=1), rng=0,
                       spec=an.AttentionSpec(dropout_p=0.1, kernel="reference"), num_heads=2)
    with pytest.raises(ValueError, match="kernel 'reference' cannot do gqa"):
        an.mha_forward(x, x, x, an.init_mha_params(8, 4, num_kv_heads=2, rng=1),
                       spec=an.AttentionSpec(kernel="reference"), num_heads=4)
    with pytest.raises(ValueError, match="kernel must be one of"):
        an.AttentionSpec(kernel="fast")
