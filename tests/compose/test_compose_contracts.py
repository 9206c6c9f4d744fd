"""Options of the composed layer that a path cannot do are refused by name, never ignored."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn


@pytest.fixture
def layer(rng):
    return randn(rng, 2, 5, 16), an.init_mha_params(16, 4, rng=0)


def test_positions_without_rope_are_refused(layer):
    x, params = layer
    with pytest.raises(ValueError, match="mha_forward got positions= but spec.rope is None"):
        an.mha_forward(x, x, x, params, num_heads=4, positions=np.arange(7))
    kv = an.KVCache(5)
    with pytest.raises(ValueError, match="mha_decode_step got positions= but spec.rope is None"):
        an.mha_decode_step(x, params, kv, num_heads=4, positions=np.arange(5))
    assert kv.length == 0                                   # refused before the cache changed


def test_an_unknown_keyword_is_a_plain_type_error_naming_it(layer):
    x, params = layer
    with pytest.raises(TypeError, match=r"mha_decode_step\(\) got an unexpected keyword argument "
                                        r"'q_lengths'"):
        an.mha_decode_step(x, params, an.KVCache(5), num_heads=4, q_lengths=np.array([5, 5]))
    with pytest.raises(TypeError, match=r"mha_forward\(\) got an unexpected keyword argument 'cache'"):
        an.mha_forward(x, x, x, params, num_heads=4, cache=an.KVCache(5))


def test_cross_decoding_refuses_a_window(layer):
    x, params = layer
    cache = an.cross_kv_cache(x, params, num_heads=4)
    with pytest.raises(ValueError, match=r"no window \(spec.window\)"):
        an.mha_cross_decode_step(x[:, :1], params, cache, spec=an.AttentionSpec(window=(1, 1)),
                                 num_heads=4)


def test_cross_decoding_refuses_a_cache_normalised_by_another_kind_of_norm(rng, layer):
    x, params = layer
    params = {**params, "q_norm": 1 + 0.1 * randn(rng, 4), "k_norm": 1 + 0.1 * randn(rng, 4)}
    rms, ln = an.AttentionSpec(), an.AttentionSpec(qk_norm="layer")
    cache = an.cross_kv_cache(x, params, num_heads=4, spec=rms)
    with pytest.raises(ValueError, match="another k_norm"):
        an.mha_cross_decode_step(x[:, :1], params, cache, num_heads=4, spec=ln)
    full, _ = an.mha_forward(x, x, x, params, num_heads=4, spec=ln)
    step = an.mha_cross_decode_step(x, params, an.cross_kv_cache(x, params, num_heads=4, spec=ln),
                                    num_heads=4, spec=ln)
    np.testing.assert_allclose(step, full, rtol=0, atol=1e-12)


