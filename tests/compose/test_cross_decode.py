"""Cross-attention decoding: the encoder output projected once (cross_kv_cache), new queries
attended to it step by step (mha_cross_decode_step) give the outputs of mha_forward on the whole
target sequence, and of torch's nn.MultiheadAttention."""

from __future__ import annotations

import re

import numpy as np
import pytest

import attention_np as an
from attention_np.compose import pipeline
from tests import torch_ref
from tests.helpers import assert_float32_within_framework, max_abs_diff, mha_params, randn, require, rounded


def _params(rng, d_model=16, num_heads=4, num_kv_heads=None):
    return mha_params(rng, d_model, num_heads, num_kv_heads=num_kv_heads, bias_scale=0.1)


def _source_padding(B=3, S=7):
    pad = np.ones((B, S), dtype=bool)
    pad[1, -3:] = False                          # right padding
    pad[2, :2] = False                           # left padding
    return pad


def _cross_decode(y, memory, params, chunks, mask=None, **heads):
    """Feed the target ``y`` through mha_cross_decode_step in chunks, memory projected once."""
    cache = an.cross_kv_cache(memory, params, **heads)
    outs, start = [], 0
    for T in chunks:
        outs.append(an.mha_cross_decode_step(y[..., start:start + T, :], params, cache,
                                             mask=mask, **heads))
        start += T
    assert start == y.shape[-2]
    return np.concatenate(outs, axis=-2), cache


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
@pytest.mark.parametrize("chunks", [[1] * 6, [4, 1, 1], [6]])
def test_cross_decoding_equals_mha_forward_on_the_whole_target(rng, num_kv_heads, chunks):
    params = _params(rng, num_kv_heads=num_kv_heads)
    y, memory = randn(rng, 3, 6, 16), randn(rng, 3, 7, 16)
    mask = _source_padding()[:, None, None, :]                               # (B, 1, 1, S)
    full, _ = an.mha_forward(y, memory, memory, params, mask, num_heads=4)   # GQA: W_k's width
    step, _ = _cross_decode(y, memory, params, chunks, mask, num_heads=4)
    assert max_abs_diff(step, full) < 1e-12
    # the padding matters: without the mask the outputs differ
    unmasked, _ = an.mha_forward(y, memory, memory, params, num_heads=4)
    assert max_abs_diff(unmasked, full) > 1e-3


def test_cross_decoding_with_a_bias_and_a_scale_equals_mha_forward(rng):
    params = _params(rng)
    y, memory = randn(rng, 2, 5, 16), randn(rng, 2, 7, 16)
    bias = randn(rng, 4, 5, 7)                                                # (h, L, S)
    full, _ = an.mha_forward(y, memory, memory, params, num_heads=4, bias=bias, scale=1.0)
    cache = an.cross_kv_cache(memory, params, num_heads=4)
    step = np.concatenate([an.mha_cross_decode_step(y[:, t:t + 1], params, cache, num_heads=4,
                                                    bias=bias[:, t:t + 1], scale=1.0)
                           for t in range(5)], axis=1)
    assert max_abs_diff(step, full) < 1e-12


def test_memory_is_projected_once_and_the_cache_never_grows(rng, monkeypatch):
    params = _params(rng)
    y, memory = randn(rng, 2, 5, 16), randn(rng, 2, 7, 16)
    weights = []
    real = pipeline.linear_forward

    def counting(x, W, b=None):
        weights.append(next(n for n in ("W_q", "W_k", "W_v", "W_o") if W is params[n]))
        return real(x, W, b)

    monkeypatch.setattr(pipeline, "linear_forward", counting)
    cache = an.cross_kv_cache(memory, params, num_heads=4)
    assert weights == ["W_k", "W_v"]
    k0, v0 = cache.k.copy(), cache.v.copy()
    for t in range(5):
        an.mha_cross_decode_step(y[:, t:t + 1], params, cache, num_heads=4)
    assert weights == ["W_k", "W_v"] + ["W_q", "W_o"] * 5        # per step: queries and W^O only
    assert cache.length == cache.max_len == 7
    np.testing.assert_array_equal(cache.k, k0)
    np.testing.assert_array_equal(cache.v, v0)
    with pytest.raises(ValueError, match="holds 7 of max_len=7 positions"):
        cache.append(k0[..., :1, :], v0[..., :1, :])


def test_cross_decoding_equals_torch_multihead_attention_with_key_padding(rng):
    torch = require("torch")
    from attention_np.interop.torch import params_to_torch_mha
    params = _params(rng)
    y, memory = randn(rng, 3, 6, 16), randn(rng, 3, 7, 16)
    pad = _source_padding()
    module = params_to_torch_mha(params, 4).double().eval()
    with torch.no_grad():
        theirs = module(torch.from_numpy(y), torch.from_numpy(memory), torch.from_numpy(memory),
                        key_padding_mask=torch.from_numpy(~pad), need_weights=False)[0].numpy()
    ours, _ = _cross_decode(y, memory, params, [1] * 6, pad[:, None, None, :], num_heads=4)
    assert max_abs_diff(ours, theirs) < 1e-12


@pytest.mark.float32
def test_cross_decoding_float32_stays_float32_and_is_as_accurate_as_torch(rng):
    params = _params(rng)
    names = list(params)
    pad = _source_padding()[:2]                                              # (2, S), True = real
    f32, f64 = rounded(*params.values(), randn(rng, 2, 4, 16), randn(rng, 2, 7, 16),
                       randn(rng, 2, 4, 16))
    (p32, p64), n = (dict(zip(names, a, strict=False)) for a in (f32, f64)), len(names)
    (y32, memory32), (y64, memory64) = f32[n:n + 2], f64[n:n + 2]
    step32, cache = _cross_decode(y32, memory32, p32, [1] * 4, pad[:, None, None, :], num_heads=4)
    assert cache.k.dtype == np.float32
    # nn.MultiheadAttention: float64 the oracle, float32 the peer
    oracle, theirs = (torch_ref.mha(y, m, m, p, 4, d, key_padding_mask=~pad)[0]
                      for y, m, p, d in ((y64, memory64, p64, f64[-1]), (y32, memory32, p32, f32[-1])))
    assert_float32_within_framework(step32, theirs, oracle, name="cross decode", framework="torch")


def test_cross_decode_bad_input_is_refused_before_anything_changes(rng):
    params = _params(rng)
    y, memory = randn(rng, 2, 1, 16), randn(rng, 2, 7, 16)
    cache = an.cross_kv_cache(memory, params, num_heads=4)
    with pytest.raises(TypeError, match="kv_cache must be a KVCache.*got tuple"):
        an.mha_cross_decode_step(y, params, (cache.k, cache.v), num_heads=4)
    with pytest.raises(ValueError, match=r"2 key/value heads of d_k=4"):
        an.mha_cross_decode_step(y, _params(rng, num_kv_heads=2), cache, num_heads=4)
    with pytest.raises(TypeError, match="x is float32 but kv_cache holds float64"):
        an.mha_cross_decode_step(y.astype(np.float32),
                                 {n: w.astype(np.float32) for n, w in params.items()}, cache,
                                 num_heads=4)
    with pytest.raises(ValueError, match="same batch dims"):
        an.mha_cross_decode_step(randn(rng, 3, 1, 16), params, cache, num_heads=4)
    with pytest.raises(ValueError, match="mask"):
        an.mha_cross_decode_step(y, params, cache, num_heads=4, mask=np.ones((2, 1, 1, 6), bool))
    with pytest.raises(ValueError, match=r"memory has 8 features"):
        an.cross_kv_cache(randn(rng, 2, 7, 8), params, num_heads=4)
    with pytest.raises(ValueError, match="no RoPE"):
        an.cross_kv_cache(memory, params, spec=an.AttentionSpec(rope=True), num_heads=4)
    with pytest.raises(TypeError, match="no causal mask"):
        an.mha_cross_decode_step(y, params, cache, num_heads=4, is_causal=True)
    assert cache.length == 7


def test_cross_decode_with_qk_norm_equals_the_whole_target_forward(rng):
    params = _params(rng)
    params.update(q_norm=1 + 0.1 * randn(rng, 4), k_norm=1 + 0.1 * randn(rng, 4))
    y, memory = randn(rng, 2, 5, 16), randn(rng, 2, 7, 16)
    spec = an.AttentionSpec(qk_norm_eps=1e-3)
    full, _ = an.mha_forward(y, memory, memory, params, spec=spec, num_heads=4)
    cache = an.cross_kv_cache(memory, params, spec=spec, num_heads=4)
    step = np.concatenate([an.mha_cross_decode_step(y[:, t:t + 1], params, cache, spec=spec, num_heads=4)
                           for t in range(5)], axis=1)
    assert max_abs_diff(step, full) < 1e-12
    plain = {n: w for n, w in params.items() if n not in ("q_norm", "k_norm")}
    assert max_abs_diff(an.mha_forward(y, memory, memory, plain, spec=spec, num_heads=4)[0], full) > 1e-3


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def _cross_setup(rng, B=2, T=3, S=5, d_model=8, h=2):
    params = an.init_mha_params(d_model, h, rng=rng)
    memory, y = randn(rng, B, S, d_model), randn(rng, B, T, d_model)
    return params, memory, y


def test_cross_kv_cache_takes_a_list_and_an_unbatched_memory(rng):
    """Kills the deleted ``as_float_array`` of ``memory`` (a list has no ``.shape``) and ``2`` ->
    ``3`` in its ndim check (an unbatched ``(S, d_model)`` memory refused): both are the
    documented ``(..., S, d_model)``, and give the keys of ``mha_forward`` on the same memory."""
    from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step

    params, memory, y = _cross_setup(rng)
    for mem, q in ((memory[0].tolist(), y[0]), (memory[0], y[0])):      # (S, d_model), (T, d)
        cache = cross_kv_cache(mem, params, num_heads=2)
        out = mha_cross_decode_step(q, params, cache, num_heads=2)
        ref, _ = an.mha_forward(q, memory[0], memory[0], params, num_heads=2)
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)


def test_cross_kv_cache_names_a_memory_without_positions(rng):
    """Kills the deleted ndim check of ``memory``: a 1-D memory is refused naming ``memory`` and
    the layout it must have."""
    from attention_np.compose.cross_decode import cross_kv_cache

    params, _, _ = _cross_setup(rng)
    with pytest.raises(ValueError, match=re.escape("memory") + r".*\(\.\.\., S, d_model\)"):
        cross_kv_cache(np.ones(8), params, num_heads=2)


def test_cross_decode_step_refuses_qk_norm_params_its_cache_was_not_built_with(rng):
    """Written beside the mutants (for no one mutant): the step applies QK-norm, so a cache built
    before the norms were added holds keys that were never normalised, which it must refuse, not
    mix."""
    from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step

    params, memory, y = _cross_setup(rng)
    cache = cross_kv_cache(memory, params, num_heads=2)
    normed = {**params, "q_norm": np.ones(4), "k_norm": np.ones(4)}
    with pytest.raises(ValueError, match=re.escape("['k_norm', 'q_norm']") + ".*no k_norm"):
        mha_cross_decode_step(y, normed, cache, num_heads=2)
    other = cross_kv_cache(memory, {**normed, "k_norm": np.full(4, 2.0)}, num_heads=2)
    with pytest.raises(ValueError, match="another k_norm"):
        mha_cross_decode_step(y, normed, other, num_heads=2)


def test_cross_decode_mask_and_bias_are_checked_against_the_multihead_scores(rng):
    """Kills ``T`` or ``S`` read from the wrong axis, the batch dims dropped, the conversion of a
    list deleted, or the checks deleted (leaving sdpa_forward's message, which names the
    per-head scores ``(..., L, S)`` without ``h``) in the cross decode step's mask and bias
    checks: a full ``(B, h, T, S)`` mask or bias, unbatched ones of ``(h, T, S)``, and lists are
    taken, and a wrong shape is named against ``scores (..., h, T, S) = (B, h, T, S)``."""
    from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step

    params, memory, y = _cross_setup(rng)                     # B=2, T=3, S=5, h=2
    cache = cross_kv_cache(memory, params, num_heads=2)
    mask = rng.random((2, 2, 3, 5)) < 0.7
    mask[..., 0] = True
    bias = randn(rng, 2, 2, 3, 5)
    ref, _ = an.mha_forward(y, memory, memory, params, mask, num_heads=2, bias=bias)
    for m, b in ((mask, bias), (mask.tolist(), bias.tolist())):
        out = mha_cross_decode_step(y, params, cache, num_heads=2, mask=m, bias=b)
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)
    one = cross_kv_cache(memory[0], params, num_heads=2)       # unbatched: (h, T, S)
    out = mha_cross_decode_step(y[0], params, one, num_heads=2, mask=mask[0], bias=bias[0])
    np.testing.assert_allclose(out, ref[0], rtol=1e-13, atol=1e-13)
    for name in ("mask", "bias"):
        bad = np.ones((2, 1, 3, 4), bool if name == "mask" else float)
        with pytest.raises(ValueError, match=re.escape(
                f"{name} of shape (2, 1, 3, 4) does not broadcast to scores (..., h, T, S) = "
                f"(2, 2, 3, 5)")):
            mha_cross_decode_step(y, params, cache, num_heads=2, **{name: bad})
