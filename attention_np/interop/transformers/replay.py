"""Replay one transformers attention layer in NumPy float64, forward and backward, from its
:class:`~attention_np.interop.transformers.layer_reading.LayerSpec`, its parameters and the inputs of a
call; shared by the one-layer diff, the whole-model diff and the attention-interface diff.

Also what makes a float64 copy of a layer float64 throughout (a rotary function that computes in
float32, Cohere's) and the rows left out of a verdict (query rows with every key masked).
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from attention_np.compose.mha import mha_backward, mha_forward
from attention_np.interop.transformers.layer_reading import GridTable, LayerSpec, mha_options
from attention_np.interop.transformers.layer_source import family_function
from attention_np.interop.transformers.reading_rope import interleaves_first_half, rope_rotation
from attention_np.variants.position_bias import (
    grid_relative_index,
    relative_position_bias,
    relative_position_bias_backward,
    relative_positions,
    t5_relative_buckets,
)
from attention_np.variants.qk_layernorm import layer_norm_backward, layer_norm_forward

POST_NORM = ("post_norm_w", "post_norm_b")


def t5_bias(spec: LayerSpec, table, L: int, S: int):
    """T5's bias ``(h, L, S)`` from its table and the buckets ``(L, S)`` (bottom-right)."""
    t5 = spec.relative_bias
    bucket = t5_relative_buckets(relative_positions(L, S, align="bottom_right"),
                                 bidirectional=t5.bidirectional, num_buckets=t5.num_buckets,
                                 max_distance=t5.max_distance)                  # (L, S)
    return relative_position_bias(table, bucket), bucket


def grid_bias(spec: LayerSpec, table, L: int, S: int):
    """A 2-D relative position table's bias ``(h, L, L)`` (Data2VecVision, Swin) and its index
    ``(L, L)``; the layer's queries must be its grid's patches (and class token)."""
    grid = spec.relative_bias
    H, W, cls = grid.height, grid.width, grid.cls
    index = grid_relative_index(H, W, cls=cls)                                     # (N, N)
    if (L, S) != index.shape:
        raise ValueError(f"a layer with a {H}x{W} relative position bias table"
                         f"{' and a class token' if cls else ''} attends {index.shape[0]} "
                         f"positions (its {'grid' if cls else 'window'}), got L={L}, S={S}: "
                         f"hidden_states must be (B, {index.shape[0]}, d_model)"
                         + ("" if cls else ", one row per window"))
    return relative_position_bias(table, index), index


def replay(spec: LayerSpec, params: dict, x, kv, mask, dout, *, positions=None, bias=None):
    """attention_np's forward and backward of the layer on ``x (B, L, d_model)`` (and
    ``kv (B, S, d_model)`` for cross-attention): ``{"out", "dhidden_states", ("dkey_value"),
    "d<param>"...}`` in the names of ``params``.

    ``mask`` bool ``(B, 1, L, S)`` or None; ``bias`` an additive ``(.., h, L, S)`` bias the layer
    receives (T5's blocks after the first, Data2VecVision's shared table, Swin's shifted-window
    mask); ``positions (B, L)`` RoPE's."""
    p = dict(params)
    if "W_o" not in p:                      # BERT stops at the concatenated heads: W^O = I
        p["W_o"] = np.eye(spec.num_heads * spec.head_dim)
    table = p.pop("bias_table", None)
    post = {n: p.pop(n) for n in POST_NORM if n in p}
    src = x if kv is None else kv
    L, S = x.shape[1], src.shape[1]
    bucket = None
    if table is not None and isinstance(spec.relative_bias, GridTable):   # a 2-D table:
        own, bucket = grid_bias(spec, table, L, S)      # bias[n, i, j] = table[index(i, j), n],
        bias = own if bias is None else own + bias      # plus any bias the layer was passed
    elif table is not None:                 # T5: bias[n, i, j] = table[bucket(j - i), n]
        bias, bucket = t5_bias(spec, table, L, S)
    out, cache = mha_forward(x, src, src, p, mask, bias=bias, **mha_options(spec, positions))
    dmha = dout
    if post:                                # ALBERT: LayerNorm(x + out)
        y, ln = layer_norm_forward(x + out, post["post_norm_w"], post["post_norm_b"],
                                   spec.residual.norm_eps)
        dsum, dw, db = layer_norm_backward(dout, ln)
        out, dmha = y, dsum
    dq, dk, dv, g, dbias = mha_backward(dmha, cache, return_dbias=True)
    if table is not None:
        g["bias_table"] = relative_position_bias_backward(dbias, bucket, table.shape[0])
    ours = {"out": out, "dhidden_states": dq if kv is not None else dq + dk + dv}
    if post:
        ours["dhidden_states"] = ours["dhidden_states"] + dsum
        g["post_norm_w"], g["post_norm_b"] = dw, db
    if kv is not None:
        ours["dkey_value"] = dk + dv
    ours.update({f"d{n}": g[n] for n in params})
    return ours


def dead_rows(mask) -> np.ndarray:
    """``(B, L)`` bool: query rows with every key masked (in every head) by ``mask``
    ``(B, 1|h, L, S)``; None -> none."""
    if mask is None:
        return None
    return ~np.asarray(mask).any(axis=-1).any(axis=1)


def leave_out_rows(got: dict, ours: dict, rows) -> list:
    """Set the rows ``rows (B, L)`` of ``"out"`` to ours in ``got`` (transformers gives a row
    that attends nothing the mean of V; attention_np 0: neither is checked); the upstream
    gradient there was 0, so no gradient depends on them. Returns ``[(b, i), ...]``."""
    if rows is None or not rows.any():
        return []
    got["out"] = np.where(rows[..., None], ours["out"], got["out"])
    return [tuple(int(v) for v in idx) for idx in np.argwhere(rows)]


def _turn_half(x):
    """(x1, x2) -> (-x2, x1), the halves of the last axis (Llama's ``rotate_half``)."""
    import torch
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _turn_pairs(x):
    """(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...): interleaved pairs (Cohere, GLM)."""
    import torch
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def _float32_rotary(fn, rotate_half) -> bool:
    """Whether the family's ``apply_rotary_pos_emb`` loses float64 precision (Cohere: float32).
    One angle per position, the same for every pair: a family that lays its cos and sin out
    again (GLM interleaves the first half) computes the same as with them as given. False for
    a function of another signature (Gemma 4: ``(x, cos, sin)``, one tensor): left as it is."""
    import torch
    g = torch.Generator().manual_seed(0)
    q = torch.randn((1, 1, 3, 4), generator=g, dtype=torch.float64) * 3
    angle = 7.1 * torch.randn((1, 3, 1), generator=g, dtype=torch.float64).expand(1, 3, 4)
    cos, sin = torch.cos(angle), torch.sin(angle)
    want = q * cos + rotate_half(q) * sin
    try:
        got, _ = fn(q, q, cos, sin)
    except (TypeError, RuntimeError, ValueError):
        return False
    return bool((got - want).abs().max() > 1e-12)


@contextlib.contextmanager
def float64_rope_function(layer):
    """While inside: the layer's family's ``apply_rotary_pos_emb`` in float64, when it computes
    in float32 (Cohere: ``q.float()``); the same formula, ``q * cos + rotate_half(q) * sin`` on
    the first ``cos.shape[-1]`` features (their first half repeated in turn first, when the
    family's does: ERNIE 4.5). Restored on exit."""
    fn, rotate_half = (family_function(layer, n) for n in ("apply_rotary_pos_emb", "rotate_half"))
    rotate_half = {"half": _turn_half, "interleaved": _turn_pairs}.get(rope_rotation(fn),
                                                                        rotate_half)
    mod = next((sys.modules[c.__module__] for c in type(layer).__mro__
                if getattr(sys.modules.get(c.__module__), "apply_rotary_pos_emb", None) is fn), None)
    if fn is None or rotate_half is None or not _float32_rotary(fn, rotate_half):
        yield False
        return
    import torch

    relayout = interleaves_first_half(fn)                            # ERNIE 4.5

    def in_float64(q, k, cos, sin, unsqueeze_dim=1, **_):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        if relayout:
            cos, sin = (t[..., :t.shape[-1] // 2].repeat_interleave(2, dim=-1) for t in (cos, sin))
        r = cos.shape[-1]

        def turn(x):
            return torch.cat([x[..., :r] * cos + rotate_half(x[..., :r]) * sin, x[..., r:]], -1)
        return turn(q), turn(k)

    mod.apply_rotary_pos_emb = in_float64
    try:
        yield True
    finally:
        mod.apply_rotary_pos_emb = fn
