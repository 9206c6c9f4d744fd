"""Decoding with a KV cache gives the outputs of full causal multi-head attention."""

from __future__ import annotations

import re

import numpy as np
import pytest

import attention_np as an
from tests import oracles
from tests.helpers import max_abs_diff, randn


def _params(rng, d_model=16, num_heads=4, num_kv_heads=None, dtype=np.float64):
    p = an.init_mha_params(d_model, num_heads, num_kv_heads=num_kv_heads, rng=rng, dtype=dtype)
    return {name: w + dtype(0.1) * randn(rng, *w.shape, dtype=dtype) for name, w in p.items()}


def _decode(x, params, chunks, **heads):
    """Feed ``x`` (..., L, d_model) through mha_decode_step in chunks of the given sizes."""
    cache, outs, start = an.KVCache(max_len=x.shape[-2]), [], 0
    for T in chunks:
        outs.append(an.mha_decode_step(x[..., start:start + T, :], params, cache, **heads))
        start += T
    assert start == x.shape[-2] and cache.length == start
    return np.concatenate(outs, axis=-2), cache


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_decoding_one_position_at_a_time_equals_full_causal_attention(rng, num_kv_heads):
    L = 9
    params = _params(rng, num_kv_heads=num_kv_heads)
    x = randn(rng, 2, L, 16)
    full, _ = an.mha_forward(x, x, x, params, num_heads=4, is_causal=True)    # GQA: W_k's width
    step, _ = _decode(x, params, [1] * L, num_heads=4)
    assert max_abs_diff(step, full) < 1e-12


@pytest.mark.parametrize("chunks", [[1] * 7, [3, 4]])
def test_decoding_is_causal_multi_head_attention_by_definition(rng, chunks):
    # held to tests/oracles.py, not to mha_forward: a bug both share (a scale, a head order, a
    # causal mask off by one) fails here
    params = _params(rng)
    x = randn(rng, 2, 7, 16)
    want, _ = oracles.multihead(x, x, x, params, 4, is_causal=True)
    got, _ = _decode(x, params, chunks, num_heads=4)
    assert max_abs_diff(got, want) < 1e-12


@pytest.mark.parametrize("chunks", [[3, 1, 4, 2], [5, 5], [10], [1, 6, 3]])
def test_chunked_prefill_with_bottom_right_causal_equals_full_attention(rng, chunks):
    params = _params(rng, num_kv_heads=2)
    x = randn(rng, 3, 10, 16)
    full, _ = an.mha_forward(x, x, x, params, num_heads=4, is_causal=True)
    chunked, _ = _decode(x, params, chunks, num_heads=4)
    assert max_abs_diff(chunked, full) < 1e-12


def test_top_left_causal_on_a_later_chunk_would_give_the_wrong_outputs(rng):
    """Why bottom-right: a chunk of T=3 new queries after 4 cached positions, attending with
    the top-left is_causal of PyTorch/JAX, lets new query 0 (position 4) see key 0 only."""
    params = _params(rng)
    x = randn(rng, 7, 16)
    full, _ = an.mha_forward(x, x, x, params, num_heads=4, is_causal=True)
    cache = an.KVCache(max_len=7)
    an.mha_decode_step(x[:4], params, cache, num_heads=4)
    right = an.mha_decode_step(x[4:], params, cache, num_heads=4)
    q = an.split_heads(x[4:] @ params["W_q"] + params["b_q"], 4)
    top_left, _ = an.sdpa_forward(q, cache.k, cache.v, is_causal=True)
    wrong = an.merge_heads(top_left) @ params["W_o"] + params["b_o"]
    assert max_abs_diff(right, full[4:]) < 1e-12
    assert max_abs_diff(wrong, full[4:]) > 1e-2


def test_decoding_float32_stays_float32_and_close_to_float64(rng):
    params = _params(rng)
    x = randn(rng, 2, 6, 16)
    full, _ = an.mha_forward(x, x, x, params, num_heads=4, is_causal=True)
    p32 = {name: w.astype(np.float32) for name, w in params.items()}
    step, cache = _decode(x.astype(np.float32), p32, [2, 1, 3], num_heads=4)
    assert step.dtype == np.float32 and cache.k.dtype == np.float32
    assert max_abs_diff(step, full) < 1e-5


def test_cache_holds_num_kv_heads_and_shrinks_with_grouped_query_attention(rng):
    x = randn(rng, 2, 5, 16)
    sizes = {}
    for h_kv in (4, 2, 1):
        _, cache = _decode(x, _params(rng, num_kv_heads=h_kv), [5], num_heads=4)
        assert cache.k.shape == (2, h_kv, 5, 4) and cache.v.shape == (2, h_kv, 5, 4)
        sizes[h_kv] = cache.nbytes
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1] == 2 * (2 * 4 * 5 * 4) * 8


def test_cache_stores_keys_and_values_in_order(rng):
    cache = an.KVCache(max_len=5)
    a, b = randn(rng, 2, 3, 4), randn(rng, 2, 2, 4)
    cache.append(a, a + 1)
    k, v = cache.append(b, b + 1)
    assert np.array_equal(k, np.concatenate([a, b], axis=-2))
    assert np.array_equal(v, np.concatenate([a, b], axis=-2) + 1)


def test_cache_refuses_overflow_and_mismatched_shapes(rng):
    cache = an.KVCache(max_len=3)
    cache.append(randn(rng, 2, 2, 4), randn(rng, 2, 2, 4))
    with pytest.raises(ValueError, match="holds 2 of max_len=3 positions; 2 more do not fit"):
        cache.append(randn(rng, 2, 2, 4), randn(rng, 2, 2, 4))
    with pytest.raises(ValueError, match=r"k_new has shape \(3, 1, 4\) but the cache holds"):
        cache.append(randn(rng, 3, 1, 4), randn(rng, 3, 1, 4))
    with pytest.raises(TypeError, match="k_new is float32 and v_new float32 but the cache holds float64"):
        cache.append(randn(rng, 2, 1, 4, dtype=np.float32), randn(rng, 2, 1, 4, dtype=np.float32))
    with pytest.raises(ValueError, match="must agree"):
        cache.append(randn(rng, 2, 1, 4), randn(rng, 2, 2, 4))
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        an.KVCache(max_len=0)


def test_max_len_is_a_bound_not_an_allocation(rng):
    # KVCache(10**12) was once accepted and failed at its first append (8 TB of np.empty)
    cache = an.KVCache(10**12)
    k, v = randn(rng, 2, 3, 4), randn(rng, 2, 3, 5)
    cache.append(k, v)
    assert cache.nbytes == 2 * 16 * (4 + 5) * 8             # room for 16 positions, not 10**12
    for _ in range(10):                                   # 33 positions: the room doubles
        cache.append(k, v)
    assert cache.length == 33 and cache.nbytes == 2 * 64 * (4 + 5) * 8
    np.testing.assert_array_equal(cache.k, np.concatenate([k] * 11, axis=-2))
    np.testing.assert_array_equal(cache.v, np.concatenate([v] * 11, axis=-2))


def test_growth_never_passes_max_len(rng):
    cache = an.KVCache(20)
    x = randn(rng, 1, 12, 2)
    cache.append(x, x)
    cache.append(x[:, :8], x[:, :8])                          # 20: doubling 16 would give 32
    assert cache.length == 20 and cache.k.shape == (1, 20, 2) and cache.nbytes == 2 * 20 * 2 * 8


def test_an_allocation_that_fails_names_the_bytes_and_leaves_the_cache_unchanged(rng, monkeypatch):
    cache = an.KVCache(10**12)
    k = randn(rng, 1, 2, 4)
    cache.append(k, k)
    more = randn(rng, 1, 20, 4)
    real_empty = np.empty

    def no_memory(shape, dtype):
        raise MemoryError
    monkeypatch.setattr(np, "empty", no_memory)
    with pytest.raises(MemoryError, match=r"max_len=1000000000000.*GiB.*unchanged \(2 positions\)"):
        cache.append(more, more)
    monkeypatch.setattr(np, "empty", real_empty)
    assert cache.length == 2
    np.testing.assert_array_equal(cache.k, k)


# --- found by mutation testing (docs/mutation.md): each test names the mutant it kills ---------


def test_kv_cache_append_takes_array_likes_and_names_bad_ones(rng):
    """Kills the deleted ``as_float_array`` / ``np.asarray`` of ``k_new``, ``v_new``, or the
    ``v_new`` ndim check, in ``KVCache``: lists append like arrays; an int or 1-D one is refused."""
    k, v = randn(rng, 2, 3, 4), randn(rng, 2, 3, 5)
    cache = an.KVCache(max_len=4)
    ck, cv = cache.append(k.tolist(), v.tolist())
    np.testing.assert_array_equal(ck, k)
    np.testing.assert_array_equal(cv, v)
    with pytest.raises(TypeError, match="k_new must be a floating-point array"):
        an.KVCache(max_len=4).append(np.ones((2, 3, 4), int), v)
    with pytest.raises(ValueError, match="v_new must have at least 2 dims"):
        an.KVCache(max_len=4).append(k[0], v[0, 0])


def test_mha_decode_step_scale(rng):
    """Kills ``mha_decode_step`` dropping ``scale=``: the output must be mha_forward's with the
    same scale."""
    params = an.init_mha_params(4, 2, rng=0)
    x = randn(rng, 3, 4)
    want, _ = an.mha_forward(x, x, x, params, num_heads=2, is_causal=True, scale=0.3)
    out = an.mha_decode_step(x, params, an.KVCache(max_len=3), num_heads=2, scale=0.3)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)
    assert max_abs_diff(out, an.mha_decode_step(x, params, an.KVCache(max_len=3), num_heads=2)) > 1e-6


def test_kv_cache_second_append_must_match_the_first(rng):
    """Kills a change to the shape test of a later ``append`` (``[:-2]`` -> ``[:-3]`` or
    ``[:2]``, ``[-1]`` -> ``[-2]``): a valid second chunk is taken; other heads or widths are not."""
    cache = an.KVCache(max_len=6)
    cache.append(randn(rng, 2, 3, 4), randn(rng, 2, 3, 5))
    k, v = cache.append(randn(rng, 2, 1, 4), randn(rng, 2, 1, 5))
    assert k.shape == (2, 4, 4) and v.shape == (2, 4, 5)
    for k_new in (randn(rng, 3, 1, 4), randn(rng, 2, 1, 3)):
        with pytest.raises(ValueError, match=r"k_new has shape .* but the cache holds "
                                             r"\(2,\) \+ \(positions, 4\)$"):
            cache.append(k_new, randn(rng, *k_new.shape[:-1], 5))
    assert cache.length == 4


def _decode_setup(rng, B=2, T=3, d_model=8, h=2):
    params = an.init_mha_params(d_model, h, rng=rng, qk_norm=True)
    kv = an.KVCache(10)
    an.mha_decode_step(randn(rng, B, 2, d_model), params, kv, num_heads=h)   # 2 cached positions
    return params, kv, randn(rng, B, T, d_model)


@pytest.mark.parametrize("bad", [
    (dict(spec=dict(softcap=-1.0)), ValueError, "softcap must be a positive finite number, got -1.0"),
    (dict(q_norm=3), ValueError, "params['q_norm'] has shape (3,), expected (4,)"),
])
def test_decode_step_checks_softcap_and_qk_norm_before_the_cache_changes(rng, bad):
    """Kills the deleted ``check_softcap`` (sdpa_forward refuses a bad softcap, but after the
    cache has grown) and ``check_qk_norm`` (or ``d_k`` as ``W_q.shape[1] / num_heads``, printed
    ``(4.0,)``) of the decode step."""
    kwargs, error, message = bad
    params, kv, x = _decode_setup(rng)
    if "q_norm" in kwargs:
        params = {**params, "q_norm": np.ones(kwargs.pop("q_norm"))}
    before = kv.k.copy(), kv.length
    with pytest.raises(error, match=re.escape(message)):      # (a bad spec: when it is made)
        if "spec" in kwargs:
            kwargs = {"spec": an.AttentionSpec(**kwargs["spec"])}
        an.mha_decode_step(x, params, kv, num_heads=2, **kwargs)
    assert kv.length == before[1]
    np.testing.assert_array_equal(kv.k, before[0])


def test_decode_step_takes_a_list_bias_and_a_full_mask_of_the_batch(rng):
    """Kills the deleted ``as_bias`` (a list has no ``.shape``) and ``x.shape[:-3]`` (the batch
    dim dropped from the scores the mask is checked against) of the decode step: a bias given as
    a list and a full ``(B, h, T, S)`` mask give the last T rows of ``mha_forward`` on the whole
    sequence with the same mask and bias."""
    params = an.init_mha_params(8, 2, rng=rng)
    xs = randn(rng, 2, 5, 8)
    mask = rng.random((2, 2, 5, 5)) < 0.8
    mask[..., 0] = True
    bias = randn(rng, 2, 2, 5, 5)
    ref, _ = an.mha_forward(xs, xs, xs, params, mask, num_heads=2, bias=bias, is_causal=True)
    kv = an.KVCache(5)
    an.mha_decode_step(xs[:, :2], params, kv, num_heads=2, mask=mask[..., :2, :2],
                       bias=bias[..., :2, :2].tolist())
    out = an.mha_decode_step(xs[:, 2:], params, kv, num_heads=2, mask=mask[..., 2:, :],
                             bias=bias[..., 2:, :].tolist())
    np.testing.assert_allclose(out, ref[:, 2:], rtol=1e-13, atol=1e-13)


def test_decode_step_default_qk_norm_eps_is_mha_forwards(rng):
    """Kills the decode step's default ``qk_norm_eps`` ``1e-06`` -> ``1.000001``: with both
    defaults, decoding with QK-norm gives ``mha_forward``'s causal output (eps 1e-6 in both,
    transformers' Qwen3 default)."""
    params = an.init_mha_params(8, 2, rng=rng, qk_norm=True)
    params["q_norm"], params["k_norm"] = 0.5 + rng.random(4), 0.5 + rng.random(4)
    xs = randn(rng, 2, 4, 8) * 1e-3          # small heads: the eps is not negligible against them
    ref, _ = an.mha_forward(xs, xs, xs, params, num_heads=2, is_causal=True)       # QK-norm: params
    kv = an.KVCache(4)
    out = np.concatenate([an.mha_decode_step(xs[:, t:t + 1], params, kv, num_heads=2)
                          for t in range(4)], axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)


def test_decode_step_refuses_a_mask_of_another_batch_before_the_cache_changes(rng):
    """Kills ``2`` -> ``3`` in the batch dims of the scores the decode step checks a mask
    against: a mask of batch 4 for a batch of 2 broadcasts against ``(h, T, S)`` but not
    ``(B, h, T, S)``; it is named against the latter, and the cache keeps its length."""
    params, kv, x = _decode_setup(rng)                     # B = 2, T = 3, h = 2, 2 cached
    with pytest.raises(ValueError, match=re.escape(
            "mask of shape (4, 1, 3, 5) does not broadcast to scores (..., h, T, S) after "
            "appending = (2, 2, 3, 5)")):
        an.mha_decode_step(x, params, kv, num_heads=2, mask=np.ones((4, 1, 3, 5), bool))
    assert kv.length == 2


def test_decode_step_with_sinks_passes_bias_and_scale(rng):
    """Kills ``bias=`` or ``scale=`` dropped on the way to the sinks' attention: decoding with
    sinks, a bias and a scale gives ``mha_forward``'s causal output with the same."""
    params = an.init_mha_params(8, 2, rng=rng, sinks=True)
    params["sinks"] = randn(rng, 2)
    xs = randn(rng, 2, 4, 8)
    bias = randn(rng, 2, 4, 4)
    ref, _ = an.mha_forward(xs, xs, xs, params, num_heads=2, is_causal=True,       # sinks: params
                            bias=bias, scale=0.7)
    kv = an.KVCache(4)
    out = np.concatenate([an.mha_decode_step(xs[:, t:t + 1], params, kv, num_heads=2,
                                             bias=bias[:, t:t + 1, :t + 1], scale=0.7)
                          for t in range(4)], axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)
