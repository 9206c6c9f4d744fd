"""Tests that kill mutants which survived in the modules issue 12 added or split (tools/mutate.py).

Each test names the change it catches (``module.py:line`` as in ``tools/mutation/*.json``); each
compares against an independent computation (the dense path, a float64 oracle, or the definition).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn


def test_dropout_p_one_drops_even_the_weights_a_given_mask_keeps(rng):
    """Catches dropout.py:51 ``0.0 -> 1.0``: at ``p = 1`` every weight is dropped (as
    ``torch.nn.functional.dropout(x, p=1)`` gives zeros), even where an explicit keep-mask is
    True; the factor ``1/(1-p)`` has no finite value there and the kept weights must not
    pass through unscaled."""
    q, k, v = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2)
    keep = np.ones((3, 5), bool)
    out, cache = an.sdpa_forward(q, k, v, dropout_mask=keep, spec=an.AttentionSpec(dropout_p=1.0))
    assert np.all(out == 0)
    dq, dk, dv = an.sdpa_backward(randn(rng, 3, 2), cache)
    assert np.all(dq == 0) and np.all(dk == 0) and np.all(dv == 0)


def test_sinks_cache_is_frozen(rng):
    """Catches sinks.py:40 ``frozen=True`` dropped: the backward reads the cache, so a caller
    must not be able to rebind what it holds."""
    q = randn(rng, 2, 3, 4)
    _, cache = an.sdpa_sinks_forward(q, q, q, np.zeros(2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.attention = None


def test_sinks_forward_takes_array_likes(rng):
    """Catches sinks.py:79 ``check_qkv`` deleted: nested lists are inputs as for ``sdpa_forward``,
    and give the numbers of the arrays they hold."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    want, _ = an.sdpa_sinks_forward(q, k, v, sinks)
    out, _ = an.sdpa_sinks_forward(q.tolist(), k.tolist(), v.tolist(), sinks.tolist())
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("scale", [None, 0.3])
def test_sinks_forward_default_is_not_causal_and_scale_is_used(rng, scale):
    """Catches sinks.py:61 ``is_causal: bool = False`` -> ``True`` and sinks.py:108 ``scale=``
    dropped: with no mask every query attends every key, by the definition
    ``e^{scores} / (e^{s_n} + sum_j e^{scores_j})`` with ``scores = q kᵀ·scale``."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    s = 0.5 if scale is None else scale                                # 1/sqrt(d_k), d_k = 4
    e = np.exp(q @ np.swapaxes(k, -1, -2) * s)                         # (2, 3, 5)
    weights = e / (np.exp(sinks)[:, None, None] + e.sum(axis=-1, keepdims=True))
    out, _ = an.sdpa_sinks_forward(q, k, v, sinks, scale=scale)
    np.testing.assert_allclose(out, weights @ v, rtol=1e-12, atol=1e-14)


def test_sinks_mask_of_more_batch_dims_than_q_with_a_dead_row(rng):
    """Caught the 0.1 sinks.py:96 deleted (the dead-row flags of a mask that adds batch dims,
    summed back to q's rows; the fused kernel's drop_masked does this now): q must keep its
    shape, so dq has q's shape and is the sum of the gradients of the batch's masks run one at a
    time (the backward of broadcasting q over them)."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.3, -0.7])
    mask = rng.random((2, 1, 3, 5)) > 0.3
    mask[0, 0, 1] = False                       # query 1 sees no key in batch 0 (only the sink)
    mask[1, 0, 1, 2] = True                     # but it sees key 2 in batch 1
    dout = randn(rng, 2, 2, 3, 2)
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, mask)
    dq, dk, dv, dsinks = an.sdpa_sinks_backward(dout, cache)
    assert out.shape == (2, 2, 3, 2) and dq.shape == q.shape
    parts = []
    for b in range(2):
        out_b, cache_b = an.sdpa_sinks_forward(q, k, v, sinks, mask[b])
        np.testing.assert_allclose(out[b], out_b, rtol=1e-13, atol=1e-15)
        parts.append(an.sdpa_sinks_backward(dout[b], cache_b))
    for got, want in zip((dq, dk, dv, dsinks), (sum(p[i] for p in parts) for i in range(4)),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw, words", [
    ({"mask": np.ones((4, 3), bool)}, "mask of shape (4, 3)"),
    ({"bias": np.zeros((5, 3, 3))}, "bias of shape (5, 3, 3)"),
    ({"bias": np.zeros((3, 4))}, "bias of shape (3, 4)"),
])
def test_sinks_forward_names_a_mask_or_bias_that_does_not_fit(kw, words):
    """A bug found reading sinks.py:89 (``allowed`` broadcast to the mask's shape): a mask or bias
    that does not fit the scores raised NumPy's "shape mismatch: objects cannot be broadcast",
    naming neither; now a ValueError names the argument, its shape and the scores' shape."""
    q = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=re.escape(words) + ".*does not broadcast to scores"):
        an.sdpa_sinks_forward(q, q, q, np.zeros(2), **kw)


def test_rope_frequencies_default_base_is_ten_thousand():
    """Catches rope_scaling.py:97 ``theta=10000.0`` -> ``10001.0``: RoFormer's (and §3.5's)
    ``w_m = 10000^(-2m/d)``."""
    inv_freq, factor = an.rope_frequencies(8)
    np.testing.assert_allclose(inv_freq, [1.0, 10000.0 ** -0.25, 10000.0 ** -0.5, 10000.0 ** -0.75],
                               rtol=1e-15)
    assert factor == 1.0


def test_proportional_rotates_floor_of_half_the_rotated_width():
    """Catches rope_scaling.py:202 ``// 2`` -> ``/ 2``: with ``partial_rotary_factor * d = 3``
    (odd), ``floor(3 / 2) = 1`` pair turns (transformers' ``int(p * head_dim // 2)``), not 2."""
    inv_freq, _ = an.rope_frequencies(8, theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.375})
    np.testing.assert_array_equal(inv_freq, [1.0, 0.0, 0.0, 0.0])


def test_rope_frequencies_of_the_smallest_width():
    """Catches rope_scaling.py:151 ``d < 2`` -> ``d <= 2``: ``d = 2`` is one pair of features,
    one frequency ``w_0 = theta^0 = 1``."""
    inv_freq, factor = an.rope_frequencies(2)
    np.testing.assert_array_equal(inv_freq, [1.0])
    assert factor == 1.0


@pytest.mark.parametrize("factor, want", [(0.5, 1.0), (1.0, 1.0), (1.5, 0.1 * np.log(1.5) + 1),
                                         (4.0, 0.1 * np.log(4.0) + 1)])
def test_yarn_attention_factor_default_is_eq_22(factor, want):
    """Catches rope_scaling.py:94 (a ``1.0`` or the ``factor <= 1`` of ``_yarn_mscale`` changed):
    YaRN's ``sqrt(1/t) = 0.1 ln(s) + 1`` (Peng et al. 2023, Eq. 22), and 1 for a factor
    ``s <= 1`` (no interpolation)."""
    _, a = an.rope_frequencies(8, scaling={"rope_type": "yarn", "factor": factor,
                                           "original_max_position_embeddings": 64})
    assert a == pytest.approx(want, rel=1e-15)


def test_yarn_default_betas_are_the_papers():
    """Catches rope_scaling.py:32 ``beta_fast: 32.0`` -> ``33.0`` (and ``beta_slow``): YaRN's
    alpha = 1, beta = 32 (Peng et al. 2023, §3.2), which transformers also defaults to; unrounded
    (``truncate=False``) so that any change of either bound moves the ramp."""
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
            "truncate": False}
    got, _ = an.rope_frequencies(32, scaling=base)
    want, _ = an.rope_frequencies(32, scaling={**base, "beta_fast": 32.0, "beta_slow": 1.0})
    np.testing.assert_array_equal(got, want)
    other, _ = an.rope_frequencies(32, scaling={**base, "beta_fast": 33.0, "beta_slow": 1.0})
    assert not np.array_equal(other, want)                  # the test can see a change of beta


def test_proportional_default_factor_is_one():
    """Catches rope_scaling.py:38 ``"factor": 1.0`` -> ``2.0``: without a factor the turning
    frequencies are RoFormer's own, ``w_m = theta^(-2m/d)``."""
    inv_freq, _ = an.rope_frequencies(8, theta=100.0, scaling={
        "rope_type": "proportional", "partial_rotary_factor": 0.5})
    np.testing.assert_allclose(inv_freq, [1.0, 100.0 ** -0.25, 0.0, 0.0], rtol=1e-15)


def test_rope_frequencies_bad_theta_message_names_no_rope_type():
    """Catches rope_scaling.py:48 ``rope_type is None`` -> ``is not None``: a bad ``theta`` is
    not a parameter of a rope_type, a bad ``factor`` is."""
    with pytest.raises(ValueError, match=r"^theta must be a positive finite number, got -1\.0$"):
        an.rope_frequencies(8, theta=-1.0)
    with pytest.raises(ValueError, match=r"^rope_type 'linear': factor must be a positive"):
        an.rope_frequencies(8, scaling={"rope_type": "linear", "factor": -1.0})


def test_llama3_refuses_equal_frequency_factors():
    """Catches rope_scaling.py:86 ``>`` -> ``>=``: with ``high_freq_factor == low_freq_factor``
    the blend weight ``(L / lambda - low) / (high - low)`` divides by zero."""
    with pytest.raises(ValueError, match="high_freq_factor must exceed low_freq_factor"):
        an.rope_frequencies(8, scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0,
                                        "high_freq_factor": 2.0,
                                        "original_max_position_embeddings": 64})


def test_dynamic_at_the_original_length_one_is_the_default():
    """Catches rope_scaling.py:82 ``v < 1`` -> ``v <= 1``: ``original_max_position_embeddings``
    is a positive int, 1 included; dynamic NTK at ``n = L`` keeps ``theta' = theta``."""
    inv_freq, _ = an.rope_frequencies(8, scaling={"rope_type": "dynamic", "factor": 2.0,
                                                  "original_max_position_embeddings": 1})
    np.testing.assert_allclose(inv_freq, 10000.0 ** (-np.arange(4) / 4), rtol=1e-14)


def test_yarn_ramp_clipped_at_d_minus_one_from_a_nonzero_start():
    """Catches rope_scaling.py:178 ``min(hi, d - 1)`` -> ``d - 2`` and 179 ``m - lo`` or
    ``hi - lo`` -> ``+``: d = 8, theta = 10, L = 471 put YaRN's pair indices at
    ``m(32) = 8 ln(471 / 64pi) / (2 ln 10) = 1.48`` and ``m(1) = 7.50``: lo = 1, hi = ceil(7.50) = 8
    clipped to d - 1 = 7, so the ramp ``(m - 1) / 6`` is 0, 0, 1/6, 1/3 over m = 0..3."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": 471})
    w = 10.0 ** (-np.arange(4) / 4)
    g = np.array([0.0, 0.0, 1 / 6, 1 / 3])
    np.testing.assert_allclose(inv_freq, (1 - g) * w + g * w / s, rtol=1e-14)


def test_sinks_mask_as_a_list_or_a_float_array(rng):
    """Catches sinks.py:90 ``mask = as_bool_mask(mask)`` deleted: a nested list of bools is a
    mask (the numbers of the array it holds); a float array is a TypeError naming ``mask``."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    mask = rng.random((3, 5)) > 0.4
    want, _ = an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask)
    out, _ = an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask.tolist())
    np.testing.assert_array_equal(out, want)
    with pytest.raises(TypeError, match="mask must be a bool array"):
        an.sdpa_sinks_forward(q, k, v, np.zeros(2), mask.astype(float))


def test_yarn_deepseek_mscale_may_be_negative_and_needs_both():
    """Catches rope_scaling.py:85 ``positive=`` dropped (``mscale`` and ``mscale_all_dim`` may be
    0 or negative) and 184 ``and`` -> ``or``: only both give DeepSeek's
    ``mscale(s, mscale) / mscale(s, mscale_all_dim)``, with ``mscale(s, a) = 0.1 a ln s + 1``;
    one alone leaves Eq. 22's ``0.1 ln s + 1``."""
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    _, a = an.rope_frequencies(8, scaling={**base, "mscale": -1.0, "mscale_all_dim": 1.0})
    ln = np.log(4.0)
    assert a == pytest.approx((1 - 0.1 * ln) / (1 + 0.1 * ln), rel=1e-15)
    for one in ({"mscale": 0.707}, {"mscale_all_dim": 0.707}):
        _, a = an.rope_frequencies(8, scaling={**base, **one})
        assert a == pytest.approx(0.1 * ln + 1, rel=1e-15)


def test_yarn_ramp_of_equal_bounds_is_a_step():
    """Catches rope_scaling.py:179 ``or 0.001`` -> ``1.001``: with ``beta_fast = beta_slow``
    unrounded, lo = hi = ``8 ln(15 / 2pi) / (2 ln 10) = 1.51``: the frequencies below are kept,
    those above divided by s (transformers nudges ``hi`` by 0.001 alike)."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": 15,
        "beta_fast": 1.0, "beta_slow": 1.0, "truncate": False})
    w = 10.0 ** (-np.arange(4) / 4)
    np.testing.assert_allclose(inv_freq, w / [1, 1, s, s], rtol=1e-14)


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_longrope_attention_factor_is_one_without_extension(factor):
    """Catches rope_scaling.py:194 ``1.0 if s <= 1`` -> ``2.0``: LongRoPE's
    ``sqrt(1 + ln s / ln L)`` is 1 at s = 1, and 1 for a factor below."""
    _, a = an.rope_frequencies(8, scaling={
        "rope_type": "longrope", "factor": factor, "original_max_position_embeddings": 64,
        "short_factor": [1.0] * 4, "long_factor": [2.0] * 4})
    assert a == 1.0


def test_llama3_three_bands_by_hand():
    """Catches rope_scaling.py:200 a ``/`` -> ``*`` (``w / s``, ``L / low_freq_factor``): d = 8,
    theta = 10 give wavelengths ``2pi 10^(m/4)`` = 6.3, 11.2, 19.9, 35.3; with L = 64 the bands
    are below L / 8 = 8 (kept), above L / 2 = 32 (divided by s), and blended in between with
    ``a = (L / lambda - 2) / (8 - 2)``."""
    s = 4.0
    inv_freq, _ = an.rope_frequencies(8, theta=10.0, scaling={
        "rope_type": "llama3", "factor": s, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
        "original_max_position_embeddings": 64})
    w = 10.0 ** (-np.arange(4) / 4)
    a = (64 * w / (2 * np.pi) - 2) / 6
    want = [w[0], (1 - a[1]) * w[1] / s + a[1] * w[1], (1 - a[2]) * w[2] / s + a[2] * w[2], w[3] / s]
    np.testing.assert_allclose(inv_freq, want, rtol=1e-14)


@pytest.mark.parametrize("kernel", ["fused", "reference"])
def test_mha_sinks_of_the_wrong_length_are_refused(rng, kernel):
    """Catches sinks.py:137 ``raise`` deleted: ``params["sinks"]`` must hold one logit per head."""
    params = an.init_mha_params(8, 2, sinks=True, rng=0)
    params["sinks"] = np.zeros(3)
    x = randn(rng, 3, 8)
    with pytest.raises(ValueError, match=re.escape("params['sinks'] has shape (3,), expected "
                                                   "(num_heads,) = (2,)")):
        an.mha_forward(x, x, x, params, spec=an.AttentionSpec(kernel=kernel), num_heads=2)


@pytest.mark.parametrize("bad", [["1.0"] * 4, ["a"] * 4, [True] * 4])
def test_longrope_factors_must_be_numbers(bad):
    """A bug found reading rope_scaling.py:77 (``dtype=float`` dropped survived): the list check
    converted with ``np.asarray(v, dtype=float)``, which took ``["1.0", ...]`` and bools as
    numbers and gave NumPy's "could not convert string to float" for ``["a", ...]``; now each
    is a ValueError naming the parameter."""
    with pytest.raises(ValueError, match="short_factor must be a list of positive numbers"):
        an.rope_frequencies(8, scaling={"rope_type": "longrope", "factor": 2.0,
                                        "original_max_position_embeddings": 64,
                                        "short_factor": bad, "long_factor": [1.0] * 4})


def test_sinks_forward_default_is_not_grouped_query_attention(rng):
    """Catches ``enable_gqa`` on by default: as ``sdpa_forward`` (and PyTorch SDPA), k and v of
    fewer heads than q are refused unless ``spec.enable_gqa`` is True, which
    then gives query head n the key/value head n // 2 (here against k, v repeated by hand)."""
    q, k, v = randn(rng, 4, 3, 8), randn(rng, 2, 5, 8), randn(rng, 2, 5, 2)
    sinks = np.array([0.1, -0.2, 0.3, 0.0])
    with pytest.raises(ValueError, match="batch dims do not broadcast"):
        an.sdpa_sinks_forward(q, k, v, sinks)
    out, _ = an.sdpa_sinks_forward(q, k, v, sinks, spec=an.AttentionSpec(enable_gqa=True))
    want, _ = an.sdpa_sinks_forward(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0), sinks)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)


def test_sinks_nan_query_in_a_row_that_sees_no_key(rng):
    """Catches sinks.py:95 ``any(axis=-1)`` -> ``axis=1``: a query whose every key is masked (here
    row 1 of head 0 under a per-head mask) attends the sink alone, value 0, so its output is 0
    even when that query is NaN (the sink key's score is ``q · 0`` then); the other rows are
    the definition's."""
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 2)
    sinks = np.array([0.5, -1.0])
    mask = np.ones((2, 3, 5), bool)
    mask[0, 1] = False
    q[0, 1] = np.nan
    out, cache = an.sdpa_sinks_forward(q, k, v, sinks, mask)
    assert np.all(out[0, 1] == 0)
    e = np.exp(q @ np.swapaxes(k, -1, -2) / 2.0)
    weights = e / (np.exp(sinks)[:, None, None] + e.sum(axis=-1, keepdims=True))
    want = weights @ v
    np.testing.assert_allclose(out[1], want[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out[0, [0, 2]], want[0, [0, 2]], rtol=1e-12, atol=1e-14)
    assert all(np.isfinite(g).all() for g in an.sdpa_sinks_backward(randn(rng, 2, 3, 2), cache))


def test_causal_tiled_path_skips_the_key_blocks_above_the_diagonal():
    """Catches tiles.py:29 (the causal bound ``right = 0`` deleted, or ``0 -> 1``) and tiles.py:34
    ``Lt -> LtE``: under a top-left causal mask, query rows ``i < j0`` see nothing of the key
    block ``[j0, j1)``, so the block is visited by rows ``[j0, L)`` only, and a block that starts
    at or after row ``L`` (no row sees it) is not visited at all. The output would be the same;
    what the issue asks ("skipping blocks that are fully masked") is the work not done."""
    from attention_np.kernels import tiles

    assert list(tiles.key_blocks(8, 8, 4, True)) == [(0, 4, 0, 8), (4, 8, 4, 8)]
    # L = 8 queries, S = 16 keys: the block [8, 16) is above every query's diagonal
    assert list(tiles.key_blocks(8, 16, 8, True)) == [(0, 8, 0, 8)]
    # a right window wider than 0 does not undo causality
    assert list(tiles.key_blocks(8, 8, 4, True, (None, 3))) == [(0, 4, 0, 8), (4, 8, 4, 8)]


def test_tiled_path_with_a_scale_that_overflows_q_warns_nothing(rng):
    """Catches tiles.py:91 ``over=`` dropped: ``q * scale`` overflowing (scale 1e30, q ~ 1e10 in
    float32) is expected and handled (the scale is applied to the scores instead), so it must
    not surface as a RuntimeWarning; the output equals the float64 dense path's."""
    import warnings

    q = (randn(rng, 2, 3, 4) * 1e10).astype(np.float32)
    k = (randn(rng, 2, 5, 4) * 1e-30).astype(np.float32)
    v = randn(rng, 2, 5, 3).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(q, k, v, scale=1e30, block_size=2)
    ref, _ = an.sdpa_forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                             scale=1e30)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def _cross_setup(rng, B=2, T=3, S=5, d_model=8, h=2):
    params = an.init_mha_params(d_model, h, rng=rng)
    memory, y = randn(rng, B, S, d_model), randn(rng, B, T, d_model)
    return params, memory, y


def test_cross_kv_cache_takes_a_list_and_an_unbatched_memory(rng):
    """Catches cross_cache.py:48 (``as_float_array`` deleted: a list has no ``.shape``) and
    cross_cache.py:49 ``2 -> 3`` (an unbatched ``(S, d_model)`` memory refused): both are the
    documented ``(..., S, d_model)``, and give the keys of ``mha_forward`` on the same memory."""
    from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step

    params, memory, y = _cross_setup(rng)
    for mem, q in ((memory[0].tolist(), y[0]), (memory[0], y[0])):      # (S, d_model), (T, d)
        cache = cross_kv_cache(mem, params, num_heads=2)
        out = mha_cross_decode_step(q, params, cache, num_heads=2)
        ref, _ = an.mha_forward(q, memory[0], memory[0], params, num_heads=2)
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)


def test_cross_kv_cache_names_a_memory_without_positions(rng):
    """Catches cross_cache.py:49 (the ndim check deleted): a 1-D memory is refused naming
    ``memory`` and the layout it must have."""
    from attention_np.compose.cross_decode import cross_kv_cache

    params, _, _ = _cross_setup(rng)
    with pytest.raises(ValueError, match=re.escape("memory") + r".*\(\.\.\., S, d_model\)"):
        cross_kv_cache(np.ones(8), params, num_heads=2)


def test_cross_decode_step_refuses_qk_norm_params_its_cache_was_not_built_with(rng):
    """0.2 applies QK-norm in cross-attention decoding; a cache built before the norms were added
    holds keys that were never normalised, which the step must refuse, not mix."""
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
    """Catches cross_cache.py:108 (``T`` or ``S`` read from the wrong axis), 109 (the batch dims
    dropped), 111/114 (the conversion of a list deleted) and 112/115 (the checks deleted, leaving
    sdpa_forward's message, which names the per-head scores ``(..., L, S)`` without ``h``): a
    full ``(B, h, T, S)`` mask or bias, unbatched ones of ``(h, T, S)``, and lists are taken, and
    a wrong shape is named against ``scores (..., h, T, S) = (B, h, T, S)``."""
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


def test_tiled_default_block_size_is_128(rng):
    """Catches flash_forward.py:64 ``128 -> 129``: the documented default, recorded in the cache
    (the backward walks the same blocks)."""
    _, cache = an.flash_attention_forward(randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2))
    assert cache.block_size == 128


@pytest.mark.parametrize("shape", [(), (5,)])
def test_tiled_backward_with_a_bias_of_fewer_than_two_dims(rng, shape):
    """Catches flash_backward.py:81 (the bias not given its (L, S) dims before the tiles slice
    it): a 0-d or a per-key (S,) bias, whose gradient comes back in its own shape, as the dense
    path's."""
    q, k, v, dout = randn(rng, 3, 4), randn(rng, 5, 4), randn(rng, 5, 2), randn(rng, 3, 2)
    bias = randn(rng, *shape) if shape else np.float64(0.3)
    _, cache = an.flash_attention_forward(q, k, v, bias=bias, block_size=2)
    got = an.flash_attention_backward(dout, cache, return_dbias=True)
    _, dense = an.sdpa_forward(q, k, v, bias=bias)
    want = an.sdpa_backward(dout, dense, return_dbias=True)
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kind", ["mask", "causal", "window"])
def test_tiled_garbage_reaches_only_the_rows_that_see_it_forward_and_backward(rng, kind):
    """Catches flash_forward.py:143 and flash_backward.py:73 (when to sum over the attended
    pairs only: any of a mask, causality or a window, with an input that is not finite): an inf
    in the value of key 1, which rows 0 (causal, or masked) or 4 and 5 (window) do not see. Those
    rows' outputs and gradients stay finite, the rest are what the dense path gives; NaN where
    it has NaN. Without any warning, as the dense path (flash_backward.py:89; the backward's
    ``D = rowsum(dout * out)`` warned "invalid value" here before this test)."""
    import warnings

    L = S = 6
    q, k, v, dout = randn(rng, L, 4), randn(rng, S, 4), randn(rng, S, 2), randn(rng, L, 2)
    v[1] = np.inf
    opts = {"mask": dict(mask=np.arange(S) != np.where(np.arange(L) == 0, 1, -1)[:, None]),
            "causal": dict(is_causal=True), "window": dict(spec=an.AttentionSpec(window=(2, 0)))}[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.flash_attention_forward(q, k, v, block_size=2, **opts)
        grads = an.flash_attention_backward(dout, cache)
    with np.errstate(invalid="ignore"):
        d_out, d_cache = an.sdpa_forward(q, k, v, **opts)
        d_grads = an.sdpa_backward(dout, d_cache)
    blind = {"mask": [0], "causal": [0], "window": [4, 5]}[kind]
    assert np.isfinite(out[blind]).all() and np.isfinite(grads[0][blind]).all()
    np.testing.assert_allclose(out, d_out, rtol=1e-12, atol=1e-13)          # NaN where NaN
    for g, w in zip(grads, d_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("block_size", [2, 128])
def test_tiled_backward_when_q_times_scale_overflows_but_the_softmax_is_not_saturated(
        rng, block_size):
    """Catches flash_backward.py:91 (``post=`` dropped) and :113 (``dk *= post`` deleted or a
    division): float32, scale 1e29, max |q| = 5e9 (q * scale = 5e38 overflows), k ~ 5e-39, so
    the scores are ~1 and every gradient is far from 0 (unlike scale 1e30 with k ~ 1e-10, where
    the weights are one-hot and dq = dk = 0). Against the float64 dense path on the same inputs;
    no warning (flash_forward.py:145)."""
    import warnings

    q, k, v, dout = _q_times_scale_overflows(rng, ())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.flash_attention_forward(q, k, v, scale=1e29, block_size=block_size)
        grads = an.flash_attention_backward(dout, cache)
    ref, c64 = an.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), scale=1e29)
    _assert_float32_near_float64(out, grads, ref, an.sdpa_backward(dout.astype(np.float64), c64))


def _q_times_scale_overflows(rng, batch, L=8, S=8):
    """float32 q, k, v, dout where ``q * 1e29`` overflows (max |q| = 5e9) but the scores
    ``q @ k.T * 1e29`` are ~1 (k ~ 5e-39) and ``dk = 1e29 dS^T q`` fits (dout ~ 0.01)."""
    q = randn(rng, *batch, L, 4)
    q = (q / np.abs(q).max() * 5e9).astype(np.float32)
    k = (randn(rng, *batch, S, 4) * 5e-39).astype(np.float32)
    v = randn(rng, *batch, S, 2, dtype=np.float32)
    dout = (0.01 * randn(rng, *batch, L, 2)).astype(np.float32)
    with np.errstate(over="ignore"):
        assert not np.isfinite(q * np.float32(1e29)).all()
    return q, k, v, dout


def _assert_float32_near_float64(out, grads, ref, refs):
    """float32 results against a float64 oracle on the same inputs, relative to each array's
    largest entry; every reference gradient is non-zero (a saturated softmax would give 0)."""
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    for g, r, name in zip(grads, refs, ("dq", "dk", "dv"), strict=True):
        assert np.abs(r).max() > 0
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4 * np.abs(r).max(), err_msg=name)


def test_tiled_values_near_float32_max_are_averaged_without_a_warning(rng):
    """Catches flash_forward.py:145 (``over=``/``invalid=`` dropped from the first pass's errstate):
    with every value 3e38 in float32 the running sum ``acc`` overflows, which the forward detects
    and redoes as a running average; that is handled, so no RuntimeWarning may surface, and the
    output is the values' weighted average (3e38, the dense path's)."""
    import warnings

    q, k = randn(rng, 3, 4, dtype=np.float32), randn(rng, 5, 4, dtype=np.float32)
    v = np.full((5, 2), 3e38, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(q, k, v, block_size=2)
    dense, _ = an.sdpa_forward(q, k, v)
    np.testing.assert_allclose(out, dense, rtol=1e-6)
    np.testing.assert_allclose(out, 3e38, rtol=1e-6)
    # mixed signs, equal weights (q = 0): the first block's sum is +inf, the second's -inf, and
    # inf + (-inf) is the "invalid" NaN the errstate hides; the average is 3e38 / 5
    v = np.array([3e38, 3e38, -3e38, -3e38, 3e38], np.float32)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = an.flash_attention_forward(np.zeros_like(q), k, v, block_size=2)
    np.testing.assert_allclose(out, np.float32(3e38) / 5, rtol=1e-6)


def test_tiled_backward_is_as_silent_as_the_dense_path_when_garbage_meets_an_overflow(rng):
    """Catches flash_backward.py:77 and :90 (``over=`` dropped): with an inf in a value that
    row 0 does not see (masked), the dense backward runs under ``errstate(over="ignore")`` as
    well as ``invalid``, so where ``dout ~ 1e30`` times ``v ~ 1e10`` overflows float32 it gives
    inf without a warning; the tiled backward gives the same numbers, equally silently."""
    import warnings

    q, k = randn(rng, 4, 3, dtype=np.float32), randn(rng, 4, 3, dtype=np.float32)
    v = (randn(rng, 4, 2) * 1e10).astype(np.float32)
    v[3] = np.inf
    mask = np.ones((4, 4), bool)
    mask[0, 3] = False                                    # key 3: seen by rows 1-3 only
    dout = (randn(rng, 4, 2) * 1e30).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, dense = an.sdpa_forward(q, k, v, mask)
        want = an.sdpa_backward(dout, dense)
        _, cache = an.flash_attention_forward(q, k, v, mask, block_size=2)
        got = an.flash_attention_backward(dout, cache)
    assert not np.isfinite(want[0][0]).all()              # row 0's dq overflows
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5)


# ---- kernels/blocked.py: the fused path walking blocks of query rows --------------------------------

@pytest.fixture
def blocked_two_rows(monkeypatch):
    """Every sdpa_forward call blocked, two query rows per block when the batch is 1 and S = 8,
    on two threads."""
    from attention_np.kernels import blocked

    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", "2")
    monkeypatch.setattr(blocked, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(blocked, "BLOCK_ELEMENTS", 16)


@pytest.mark.parametrize("mask_shape", [(), (8,), (1, 8)])
def test_blocked_unbatched_with_a_mask_of_fewer_dims(rng, blocked_two_rows, mask_shape):
    """Catches blocked.py:63 ``2 -> 3`` and blocked.py:64 (``2 - ndim`` as ``2 + ndim`` or
    ``3 - ndim``): a 0-d, 1-D or 2-D mask with an unbatched ``q (L, d_k)`` adds no batch dim; the
    output is ``(L, d_v)``, as the textbook's."""
    from attention_np.kernels import reference as textbook

    q, k, v = randn(rng, 6, 4), randn(rng, 8, 4), randn(rng, 8, 3)
    mask = np.ones(mask_shape, bool) if mask_shape else np.True_
    if mask_shape:
        mask[..., 2] = False
    out, cache = an.sdpa_forward(q, k, v, mask)
    assert cache.blocks is not None
    ref, _ = textbook.sdpa_forward(q, k, v, mask)
    assert out.shape == ref.shape == (6, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_blocked_garbage_in_a_block_whose_other_row_sees_it(rng, blocked_two_rows, bad):
    """Catches blocked.py:110 and :155 (``mask is not None`` as ``is None``: the attended-pairs
    sums left out), and the ``invalid=`` of blocked.py:121, 129 and 159 (a warning): batch 1,
    two rows per block, causal, a NaN or inf at key 5. Rows 4 and 5 share a block whose key span
    holds key 5, which row 4 does not see; row 4's output and gradient must equal the clean
    input's, and no warning may surface (the fused path's behaviour)."""
    import warnings

    q, k, v, dout = randn(rng, 1, 8, 4), randn(rng, 1, 8, 4), randn(rng, 1, 8, 3), randn(rng, 1, 8, 3)
    q[:, 6] = np.abs(q[:, 6])             # an inf key scores +inf: the softmax meets inf - inf
    q[:, 7] = np.abs(q[:, 7]) * [1, -1, 1, -1]      # +inf - inf inside the product q @ k.T
    kb, vb = k.copy(), v.copy()
    kb[:, 5] = vb[:, 5] = bad
    clean, c_cache = an.sdpa_forward(q, k, v, is_causal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dirty, d_cache = an.sdpa_forward(q, kb, vb, is_causal=True)
        grads = an.sdpa_backward(dout, d_cache)
    assert d_cache.blocks is not None and any(b[:2] == (4, 6) for b in d_cache.blocks)
    np.testing.assert_array_equal(dirty[:, :5], clean[:, :5])
    np.testing.assert_array_equal(grads[0][:, :5], an.sdpa_backward(dout, c_cache)[0][:, :5])


def test_blocked_backward_when_q_times_scale_overflows_but_the_softmax_is_not_saturated(
        rng, blocked_two_rows):
    """Catches blocked.py:191 (the recomputed ``dk`` deleted, or divided by the scale) and the
    ``errstate`` of :186: float32, causal, scale 1e29, max |q| = 5e9, k ~ 5e-39 (scores ~1),
    against the float64 textbook on the same inputs, without a warning."""
    import warnings

    from attention_np.kernels import reference as textbook

    q, k, v, dout = _q_times_scale_overflows(rng, (1,))
    with warnings.catch_warnings():       # causal: masked pairs have dscores = 0, and 0 * inf
        warnings.simplefilter("error")    # (q * scale) is the "invalid" the errstate hides
        out, cache = an.sdpa_forward(q, k, v, scale=1e29, is_causal=True)
        grads = an.sdpa_backward(dout, cache)
    assert cache.blocks is not None
    ref, c64 = textbook.sdpa_forward(*(a.astype(np.float64) for a in (q, k, v)), scale=1e29,
                                     is_causal=True)
    _assert_float32_near_float64(out, grads, ref,
                                 textbook.sdpa_backward(dout.astype(np.float64), c64))


def test_blocked_values_of_mixed_sign_near_float32_max_without_a_warning(blocked_two_rows):
    """Catches blocked.py:133 and :137 (``over=``/``invalid=`` dropped): equal weights (q = 0) on
    values +-3e38 overflow ``e @ v`` before the division by the row sum; the fallback gives the
    average, 3e38 / 5 on every row, without a warning."""
    import warnings

    q = np.zeros((1, 6, 4), np.float32)
    k = np.ones((1, 5, 4), np.float32)
    v = np.array([3e38, 3e38, -3e38, -3e38, 3e38], np.float32).reshape(1, 5, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v)
    assert cache.blocks is not None
    np.testing.assert_allclose(out, np.float32(3e38) / 5, rtol=1e-6)


def test_blocked_one_key_and_a_row_that_sees_none(rng, blocked_two_rows):
    """Probes blocked.py:86 (``S == 0`` as ``S == 1``): with one key, a row that may not attend it
    gives 0, and the others give v, forward and backward as the textbook."""
    from attention_np.kernels import reference as textbook

    q, k, v, dout = randn(rng, 4, 3), randn(rng, 1, 3), randn(rng, 1, 2), randn(rng, 4, 2)
    mask = np.array([[True], [False], [True], [True]])
    out, cache = an.sdpa_forward(q, k, v, mask)
    assert cache.blocks is not None
    ref, rc = textbook.sdpa_forward(q, k, v, mask)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    for g, r in zip(an.sdpa_backward(dout, cache), textbook.sdpa_backward(dout, rc), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


# ---- compose/decode.py after the split -------------------------------------------------------

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
    """Catches kv_cache.py:188 (``check_softcap`` deleted: sdpa_forward refuses it, but after the
    cache has grown) and :191 (``check_qk_norm`` deleted, or ``d_k`` as ``W_q.shape[1] /
    num_heads``, printed ``(4.0,)``)."""
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
    """Catches kv_cache.py:235 (``as_bias`` deleted: a list has no ``.shape``) and :194 (``x.shape
    [:-3]``: the batch dim dropped from the scores the mask is checked against): a bias given as
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
    """Catches kv_cache.py:133 ``1e-06 -> 1.000001``: with both defaults, decoding with QK-norm
    gives ``mha_forward``'s causal output (eps 1e-6 in both, transformers' Qwen3 default)."""
    params = an.init_mha_params(8, 2, rng=rng, qk_norm=True)
    params["q_norm"], params["k_norm"] = 0.5 + rng.random(4), 0.5 + rng.random(4)
    xs = randn(rng, 2, 4, 8) * 1e-3          # small heads: the eps is not negligible against them
    ref, _ = an.mha_forward(xs, xs, xs, params, num_heads=2, is_causal=True)       # QK-norm: params
    kv = an.KVCache(4)
    out = np.concatenate([an.mha_decode_step(xs[:, t:t + 1], params, kv, num_heads=2)
                          for t in range(4)], axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)


def test_blocked_infinite_values_without_a_mask_give_nan_silently_as_the_fused_path(
        rng, blocked_two_rows):
    """Catches blocked.py:137 (``invalid=`` dropped from the fallback): values +inf and -inf, no
    mask: ``e @ v`` is NaN (inf - inf), the fallback meets the same; NaN in, NaN out, without a
    warning, as the fused path (which ignores invalid operations there)."""
    import warnings

    from attention_np.kernels import blocked

    q, k = randn(rng, 1, 6, 4), randn(rng, 1, 5, 4)
    v = randn(rng, 1, 5, 2)
    v[0, 1], v[0, 3] = np.inf, -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, cache = an.sdpa_forward(q, k, v)
        assert cache.blocks is not None
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(blocked, "MIN_ELEMENTS", 1 << 40)          # the fused path, unblocked
            fused, fcache = an.sdpa_forward(q, k, v)
    assert fcache.blocks is None
    np.testing.assert_array_equal(out, fused)                     # NaN where NaN


def test_blocked_backward_is_as_silent_as_the_fused_path_when_garbage_meets_an_overflow(
        rng, blocked_two_rows):
    """Catches blocked.py:159 (``over=`` dropped): an inf in a value that rows 0-4 do not see
    (causal), and ``dout ~ 1e30`` times ``v ~ 1e10`` overflowing float32: the fused backward
    ignores overflows once an input is non-finite under a mask, and so does the blocked one;
    the same numbers."""
    import warnings

    from attention_np.kernels import blocked

    q, k = randn(rng, 1, 8, 3, dtype=np.float32), randn(rng, 1, 8, 3, dtype=np.float32)
    v = (randn(rng, 1, 8, 2) * 1e10).astype(np.float32)
    v[0, 5] = np.inf
    dout = (randn(rng, 1, 8, 2) * 1e30).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, cache = an.sdpa_forward(q, k, v, is_causal=True)
        got = an.sdpa_backward(dout, cache)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(blocked, "MIN_ELEMENTS", 1 << 40)
            _, fcache = an.sdpa_forward(q, k, v, is_causal=True)
            want = an.sdpa_backward(dout, fcache)
    assert cache.blocks is not None and fcache.blocks is None
    assert not np.isfinite(want[0][0, :5]).all()          # rows that never see key 5 overflow
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_decode_step_refuses_a_mask_of_another_batch_before_the_cache_changes(rng):
    """Catches kv_cache.py:194 ``2 -> 3`` (the scores checked without their batch dim): a mask
    of batch 4 for a batch of 2 broadcasts against ``(h, T, S)`` but not ``(B, h, T, S)``; it is
    named against the latter, and the cache keeps its length."""
    params, kv, x = _decode_setup(rng)                     # B = 2, T = 3, h = 2, 2 cached
    with pytest.raises(ValueError, match=re.escape(
            "mask of shape (4, 1, 3, 5) does not broadcast to scores (..., h, T, S) after "
            "appending = (2, 2, 3, 5)")):
        an.mha_decode_step(x, params, kv, num_heads=2, mask=np.ones((4, 1, 3, 5), bool))
    assert kv.length == 2


def test_decode_step_with_sinks_passes_bias_and_scale(rng):
    """Catches kv_cache.py:214 (``bias=`` or ``scale=`` dropped on the way to the sinks'
    attention): decoding with sinks, a bias and a scale gives ``mha_forward``'s causal output
    with the same."""
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
