"""RoPE with the tiled path: rotate q and k, then attend block by block.

The tiled path (:mod:`attention_np.kernels.tiled`) takes queries and keys as they are; RoPE is
applied before it with :func:`attention_np.apply_rope` and undone after its backward with
:func:`attention_np.apply_rope_backward`. These tests hold that recipe (docs/api.md) to the dense
multi-head RoPE path, which tests/compose/test_mha_positions.py diffs against transformers.
"""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from tests.helpers import max_abs_diff

B, H, H_KV, D = 2, 4, 2, 8


def _identity_params(h, h_kv, d):
    """W_q, W_k, W_v, W_o = I: mha_forward's heads are then the inputs' column blocks."""
    return {"W_q": np.eye(h * d), "W_k": np.eye(h * d)[:, :h_kv * d],
            "W_v": np.eye(h * d)[:, :h_kv * d], "W_o": np.eye(h * d)}


def _heads(x, h):
    return x.reshape(x.shape[0], x.shape[1], h, -1).transpose(0, 2, 1, 3)      # (B, h, L, d)


def _merge(x):
    return x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)        # (B, L, h*d)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("window", [None, (3, 0)])
def test_rope_then_tiled_equals_multihead_rope_forward_and_backward(layout, window):
    rng = np.random.default_rng(0)
    L = S = 11
    query = rng.standard_normal((B, L, H * D))
    kv = rng.standard_normal((B, S, H_KV * D))
    # keys and values from one input (d_v = d_k): the identity W_k, W_v pick the first H_KV heads
    key = np.concatenate([kv, rng.standard_normal((B, S, (H - H_KV) * D))], axis=-1)
    positions = np.array([np.arange(L) + 5, np.arange(L)])                  # (B, L): offsets
    rope = {"layout": layout, "theta": 500.0}
    dout = rng.standard_normal((B, L, H * D))

    out, cache = an.mha_forward(query, key, key, _identity_params(H, H_KV, D), num_heads=H,
                                is_causal=True, spec=an.AttentionSpec(window=window, rope=rope),
                                positions=positions)
    dquery, dkey, dvalue, _ = an.mha_backward(dout, cache)

    # the recipe: rotate (B, h, L, d) heads by (B, 1, L) positions, tiled attention, rotate back
    at = positions[:, None, :]
    q = an.apply_rope(_heads(query, H), at, **rope)
    k = an.apply_rope(_heads(kv, H_KV), at, **rope)
    v = _heads(kv, H_KV)
    out_t, cache_t = an.flash_attention_forward(q, k, v, is_causal=True, spec=an.AttentionSpec(window=window,
                                                                                               enable_gqa=True),
                                                block_size=4)
    dq, dk, dv = an.flash_attention_backward(_heads(dout, H), cache_t)
    dq, dk = an.apply_rope_backward(dq, at, **rope), an.apply_rope_backward(dk, at, **rope)

    assert max_abs_diff(_merge(out_t), out) < 1e-13
    assert max_abs_diff(_merge(dq), dquery) < 1e-13
    # the identity W_k, W_v read the first H_KV*D features of `key` for both k and v
    assert max_abs_diff(_merge(dk) + _merge(dv), (dkey + dvalue)[..., :H_KV * D]) < 1e-13
    assert np.abs((dkey + dvalue)[..., H_KV * D:]).max() == 0.0


def test_tiled_rope_attention_depends_on_relative_positions_only():
    """Shifting every position by 100 rotates q and k alike: the tiled output is unchanged
    (to rounding), while a shift of the queries alone changes it."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 13, D)) for _ in range(3))
    pos = np.arange(13)

    def attend(q_pos, k_pos):
        return an.flash_attention_forward(an.apply_rope(q, q_pos), an.apply_rope(k, k_pos), v,
                                          is_causal=True, block_size=4)[0]

    base = attend(pos, pos)
    assert max_abs_diff(attend(pos + 100, pos + 100), base) < 1e-12
    assert max_abs_diff(attend(pos + 3, pos), base) > 1e-3
