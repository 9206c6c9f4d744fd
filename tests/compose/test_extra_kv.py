"""Extra key/value positions (core/extra_kv.py): torch nn.MultiheadAttention's add_bias_kv,
add_zero_attn and static_k/static_v, by finite differences and against torch in float64
(interop.compare.compare_mha); complex inputs refused."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.compose.extra_kv import mha_extra_kv_backward, mha_extra_kv_forward
from attention_np.paper.gradcheck import numerical_gradient
from tests.helpers import max_abs_diff, require

R = np.random.default_rng(2526)
E, H, B, L, S = 8, 2, 2, 3, 4


def _params(bias_kv: bool):
    p = an.init_mha_params(E, H, rng=R)
    for n in p:
        p[n] = p[n] + 0.2 * R.standard_normal(p[n].shape)
    if bias_kv:
        p["bias_k"], p["bias_v"] = R.standard_normal(E), R.standard_normal(E)
    return p


@pytest.mark.parametrize("bias_kv, zero_attn, static", [(True, False, False), (False, True, False),
                                                        (True, True, False), (False, True, True)])
def test_extra_kv_backward_matches_finite_differences(bias_kv, zero_attn, static):
    p = _params(bias_kv)
    q, k, v = (R.standard_normal((B, n, E)) for n in (L, S, S))
    mask = R.random((B, 1, L, S)) > 0.3
    mask[..., 0] = True
    st = {"static_k": R.standard_normal((B, H, S, E // H)),
          "static_v": R.standard_normal((B, H, S, E // H))} if static else {}
    dout = R.standard_normal((B, L, E))

    def f():
        return float(np.sum(mha_extra_kv_forward(q, k, v, p, mask, num_heads=H,
                                                 zero_attn=zero_attn, **st)[0] * dout))
    dq, dk, dv, g = mha_extra_kv_backward(dout, mha_extra_kv_forward(
        q, k, v, p, mask, num_heads=H, zero_attn=zero_attn, **st)[1])
    arrays = {"query": (q, dq), "key": (k, dk), "value": (v, dv),
              **{n: (p[n], g[n]) for n in p}, **{n: (a, g[n]) for n, a in st.items()}}
    for name, (a, grad) in arrays.items():
        assert max_abs_diff(grad, numerical_gradient(f, a)) < 1e-8, name


@pytest.mark.parametrize("opts", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                  dict(add_bias_kv=True, add_zero_attn=True)])
@pytest.mark.parametrize("masked", [False, True])
def test_add_bias_kv_and_add_zero_attn_agree_with_torch(opts, masked):
    torch = require("torch")
    from attention_np.interop.compare import compare_mha
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64, **opts)
    if m.bias_k is not None:
        with torch.no_grad():
            m.bias_k.normal_()
            m.bias_v.normal_()
    x = R.standard_normal((B, L, E))
    pad = None
    if masked:
        pad = torch.zeros((B, L), dtype=torch.bool)
        pad[1, -1] = True                                    # key 2 of sequence 1 is padding
    r = compare_mha(m, x, key_padding_mask=pad, seed=1)
    assert r.ok, str(r)
    names = {c.name for c in r.checks}
    assert ({"dbias_k", "dbias_v"} <= names) == bool(opts.get("add_bias_kv"))


def test_static_k_and_static_v_agree_with_torch():
    torch = require("torch")
    from attention_np.interop.compare import compare_mha
    m = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    x = R.standard_normal((B, L, E))
    sk, sv = (R.standard_normal((B * H, S, E // H)) for _ in range(2))
    r = compare_mha(m, x, R.standard_normal((B, S, E)), static_k=sk, static_v=sv, seed=2)
    assert r.ok, str(r)
    assert {"dstatic_k", "dstatic_v"} <= {c.name for c in r.checks}
    m2 = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64,
                                     add_zero_attn=True)
    assert compare_mha(m2, x, R.standard_normal((B, S, E)), static_k=sk, seed=3).ok


def test_complex_inputs_are_refused_naming_them():
    torch = require("torch")
    from attention_np.interop.compare import compare_mha
    m = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    with pytest.raises(TypeError, match="query must be a floating-point array, got dtype complex128"):
        compare_mha(m, R.standard_normal((B, L, E)) + 1j)
    mc = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.complex64)
    with pytest.raises(TypeError, match="module weights must be real.*got module dtype torch.complex64"):
        compare_mha(mc, R.standard_normal((B, L, E)))


def test_a_mask_broadcast_along_the_keys_covers_every_key_and_the_appended_ones_stay_visible():
    """A mask whose key axis is 1 (broadcast) gets the appended positions after its S keys (it
    used to be padded to 2 columns, which fit no key count)."""
    p = _params(True)
    q, k, v = (R.standard_normal((B, n, E)) for n in (L, S, S))
    mask = np.ones((B, 1, L, 1), bool)
    mask[1, 0, 2] = False                          # query 2 of sequence 1: the appended keys only
    full = np.broadcast_to(mask, (B, 1, L, S))
    for zero_attn in (False, True):
        got, _ = mha_extra_kv_forward(q, k, v, p, mask, num_heads=H, zero_attn=zero_attn)
        want, _ = mha_extra_kv_forward(q, k, v, p, full, num_heads=H, zero_attn=zero_attn)
        assert max_abs_diff(got, want) == 0


def test_the_backward_refuses_another_forwards_cache_by_name():
    p = _params(False)
    x = R.standard_normal((B, L, E))
    _, cache = an.mha_forward(x, x, x, p, num_heads=H)
    with pytest.raises(TypeError, match=r"cache must be the ExtraKVCache returned by "
                                        r"attention_np\.compose\.extra_kv\.mha_extra_kv_forward, got "
                                        r"attention_np\.compose\.mha\.MHACache"):
        mha_extra_kv_backward(R.standard_normal((B, L, E)), cache)
