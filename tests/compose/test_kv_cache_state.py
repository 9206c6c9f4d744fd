"""Nothing a caller receives from a KVCache can make it inconsistent.

``length``, ``max_len`` and ``key_norm`` are read-only; ``k`` and ``v`` are read-only views; only
``append`` and ``reorder`` change a cache, and a refused decode step leaves it as it was, with an
error naming the caller's argument (``x``, ``kv_cache``, ``memory``), not the step's internals.
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an

R = np.random.default_rng(0)
P = an.init_mha_params(8, 2, rng=0)


def _cache(batch=(2,), n=3, max_len=8):
    cache = an.KVCache(max_len)
    cache.append(R.standard_normal(batch + (2, n, 4)), R.standard_normal(batch + (2, n, 5)))
    return cache


def _state(cache):
    return cache.length, cache.max_len, cache.k.copy(), cache.v.copy()


def _same(a, b):
    assert a[:2] == b[:2]
    np.testing.assert_array_equal(a[2], b[2])
    np.testing.assert_array_equal(a[3], b[3])


@pytest.mark.parametrize("attr", ["length", "max_len", "key_norm"])
@pytest.mark.parametrize("value", [-2, 0, 100, 2.5, "3", None])
def test_length_max_len_key_norm_are_read_only(attr, value):
    cache = _cache()
    before = _state(cache)
    with pytest.raises(AttributeError, match=attr):
        setattr(cache, attr, value)
    _same(_state(cache), before)


@pytest.mark.parametrize("name", ["k", "v"])
@pytest.mark.parametrize("batch", [(), (1,), (2, 3)])
def test_k_and_v_are_read_only_views(name, batch):
    cache = _cache(batch)
    before = _state(cache)
    view = getattr(cache, name)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[...] = 0
    with pytest.raises(ValueError, match="read-only"):
        cache.append(*[R.standard_normal(batch + (2, 1, d)) for d in (4, 5)])[0][..., 0, :] = 0
    # the append went through; the positions before it are untouched
    np.testing.assert_array_equal(getattr(cache, name)[..., :3, :], before[2 if name == "k" else 3])
    assert cache.length == 4


def test_the_storage_stays_writeable_for_append():
    cache = an.KVCache(40)                     # several doublings of the storage
    ks = [R.standard_normal((2, 2, 5, 4)) for _ in range(7)]
    for k in ks:
        cache.append(k, k)
    np.testing.assert_array_equal(cache.k, np.concatenate(ks, axis=-2))


@pytest.mark.parametrize("index", [[1, 0], [0, 0], [1, 1]])
def test_reorder_keeps_the_chosen_batch_rows(index):
    cache = _cache()
    k, v = cache.k.copy(), cache.v.copy()
    cache.reorder(np.array(index))
    np.testing.assert_array_equal(cache.k, k[index])
    np.testing.assert_array_equal(cache.v, v[index])


@pytest.mark.parametrize("index", [[0], [0, 2], [-1, 0], [0.0, 1.0], [[0, 1]]])
def test_reorder_refuses_a_bad_index_before_changing_anything(index):
    cache = _cache()
    before = _state(cache)
    with pytest.raises(ValueError, match="index"):
        cache.reorder(np.array(index))
    _same(_state(cache), before)


@pytest.mark.parametrize("x_batch", [(3,), (1,), (2, 2), ()])
def test_a_decode_step_of_another_batch_names_x_and_kv_cache(x_batch):
    cache = an.KVCache(8)
    an.mha_decode_step(R.standard_normal((2, 1, 8)), P, cache, num_heads=2)
    before = _state(cache)
    with pytest.raises(ValueError, match=r"x has batch dims .* kv_cache holds"):
        an.mha_decode_step(R.standard_normal(x_batch + (1, 8)), P, cache, num_heads=2)
    _same(_state(cache), before)


def test_a_decode_step_of_another_dtype_names_x_and_kv_cache():
    cache = an.KVCache(8)
    an.mha_decode_step(R.standard_normal((2, 1, 8)), P, cache, num_heads=2)
    p32 = {n: p.astype(np.float32) for n, p in P.items()}
    with pytest.raises(TypeError, match="x is float32 but kv_cache holds float64"):
        an.mha_decode_step(R.standard_normal((2, 1, 8)).astype(np.float32), p32, cache, num_heads=2)
    assert cache.length == 1


@pytest.mark.parametrize("T", [1, 3])
def test_a_decode_step_past_max_len_names_x_and_kv_cache(T):
    cache = an.KVCache(T + 1)
    an.mha_decode_step(R.standard_normal((2, 2, 8)), P, cache, num_heads=2)
    with pytest.raises(ValueError, match=rf"kv_cache holds 2 of max_len={T + 1} positions; x adds T={T}"):
        an.mha_decode_step(R.standard_normal((2, T, 8)), P, cache, num_heads=2)
    assert cache.length == 2
    full = an.cross_kv_cache(R.standard_normal((2, 4, 8)), P, num_heads=2)
    with pytest.raises(ValueError, match="kv_cache holds 4 of max_len=4 .* mha_cross_decode_step"):
        an.mha_decode_step(R.standard_normal((2, T, 8)), P, full, num_heads=2)
    assert full.length == 4


@pytest.mark.parametrize("shape", [(2, 0, 8), (0, 8), (3, 1, 0, 8)])
def test_cross_kv_cache_of_an_empty_memory_names_memory(shape):
    with pytest.raises(ValueError, match=r"memory must hold at least one position .* got shape") as e:
        an.cross_kv_cache(np.zeros(shape), P, num_heads=2)
    assert "max_len" not in str(e.value)


@pytest.mark.parametrize("filled", [0, 3])
def test_zero_new_positions_are_a_step_that_changes_nothing_on_an_empty_or_filled_cache(filled):
    """T = 0 (an empty chunk of a prompt): output (..., 0, d_model), the cache's length unchanged;
    on an empty cache the first append gives the keys' shape and dtype even for 0 positions (it
    raised a TypeError from inside append), and the next steps equal those of a fresh cache."""
    params = an.init_mha_params(12, 3, rng=0)
    x = np.random.default_rng(0).standard_normal((2, 5, 12))
    cache, fresh = an.KVCache(8), an.KVCache(8)
    if filled:
        an.mha_decode_step(x[:, :filled], params, cache, num_heads=3)
        an.mha_decode_step(x[:, :filled], params, fresh, num_heads=3)
    out = an.mha_decode_step(x[:, :0], params, cache, num_heads=3)
    assert out.shape == (2, 0, 12) and cache.length == filled
    assert cache.k.shape == (2, 3, filled, 4)
    np.testing.assert_array_equal(an.mha_decode_step(x[:, filled:], params, cache, num_heads=3),
                                  an.mha_decode_step(x[:, filled:], params, fresh, num_heads=3))


def test_cross_decoding_on_an_empty_cache_names_kv_cache_and_cross_kv_cache():
    params = an.init_mha_params(12, 3, rng=0)
    with pytest.raises(ValueError, match=r"kv_cache is empty.*cross_kv_cache\(memory"):
        an.mha_cross_decode_step(np.ones((2, 1, 12)), params, an.KVCache(4), num_heads=3)
