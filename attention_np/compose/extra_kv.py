r"""Extra key/value positions (beyond the paper): what PyTorch's ``nn.MultiheadAttention`` adds with
``add_bias_kv``, ``add_zero_attn`` and ``static_k``/``static_v``.

Multi-head attention (§3.2.2) with, after the projections:

- ``params["bias_k"]``, ``params["bias_v"]`` ``(h*d,)``: one learned key and value appended to
  every sequence's keys and values (``add_bias_kv=True``), a position every query may attend to;
- ``zero_attn=True``: one all-zero key and value appended to every head (``add_zero_attn``): a
  score of 0 in every row, an output contribution of 0;
- ``static_k``, ``static_v`` ``(..., h, S, d)``: the heads' keys (values) given, instead of the
  projection of ``key`` (``value``).

Each appended position is unmasked (the mask and bias get a column of True / 0 per position).
Shapes as :func:`attention_np.mha_forward`; forward/backward pair, checked by finite
differences and against ``torch.nn.MultiheadAttention``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.kernels import fused
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.linear import linear_backward, linear_forward


@dataclass(frozen=True)
class ExtraKVCache:
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    params: dict
    num_heads: int
    attention: fused.SDPACache
    concat: np.ndarray
    S: int                      # the keys from key (or static_k)
    extra: tuple                # (bias_kv, zero_attn, static_k given, static_v given)


def _pad(a, n: int, fill):
    """Append ``n`` columns of ``fill`` to the last axis of a mask or bias (None stays None)."""
    if a is None or n == 0:
        return a
    a = np.asarray(a)
    return np.concatenate([a, np.full(a.shape[:-1] + (n,), fill, dtype=a.dtype)], axis=-1)


def mha_extra_kv_forward(query, key, value, params: dict, mask=None, *, num_heads: int,
                         bias=None, zero_attn: bool = False, static_k=None, static_v=None):
    """Multi-head attention with appended key/value positions; returns ``(out, cache)``.

    Parameters
    ----------
    query (..., L, d_model), key (..., S, kdim), value (..., S, vdim), params as
        :func:`attention_np.mha_forward`'s, plus ``bias_k``, ``bias_v`` ``(h*d,)`` (both or
        neither).
    mask : bool, broadcastable to (..., h, L, S), optional (True = may attend)
    bias : float, broadcastable to (..., h, L, S), optional
    zero_attn : bool
    static_k, static_v : (..., h, S, d), optional
    """
    h = num_heads
    has_bias_kv = "bias_k" in params or "bias_v" in params
    if has_bias_kv and not ("bias_k" in params and "bias_v" in params):
        raise ValueError("params needs both bias_k and bias_v (add_bias_kv) or neither")
    if has_bias_kv and (static_k is not None or static_v is not None):
        raise ValueError("bias_k/bias_v cannot be added to a static_k/static_v (as in torch)")
    q = split_heads(linear_forward(query, params["W_q"], params.get("b_q")), h)   # (..., h, L, d)
    heads_kv = []
    for x, name, static in ((key, "k", static_k), (value, "v", static_v)):
        if static is not None:
            t = np.asarray(static, dtype=q.dtype)                               # (..., h, S, d)
        else:
            t = linear_forward(x, params[f"W_{name}"], params.get(f"b_{name}"))  # (..., S, h*d)
            if has_bias_kv:                   # one learned position after the S keys
                b = np.broadcast_to(params[f"bias_{name}"], t.shape[:-2] + (1, t.shape[-1]))
                t = np.concatenate([t, b], axis=-2)                             # (..., S+1, h*d)
            t = split_heads(t, h)
        if zero_attn:                         # one all-zero position in every head
            t = np.concatenate([t, np.zeros(t.shape[:-2] + (1, t.shape[-1]), t.dtype)], axis=-2)
        heads_kv.append(t)
    k, v = heads_kv
    S = k.shape[-2] - int(has_bias_kv) - int(zero_attn)
    n = k.shape[-2] - S
    heads, attention = fused.sdpa_forward(q, k, v, _pad(mask, n, True), bias=_pad(bias, n, 0.0))
    concat = merge_heads(heads)                                                 # (..., L, h*d)
    out = linear_forward(concat, params["W_o"], params.get("b_o"))
    extra = (has_bias_kv, zero_attn, static_k is not None, static_v is not None)
    return out, ExtraKVCache(query, key, value, params, h, attention, concat, S, extra)


def mha_extra_kv_backward(dout, cache: ExtraKVCache):
    """Backward of :func:`mha_extra_kv_forward`: ``(dquery, dkey, dvalue, grads)``; ``grads``
    has the keys of ``params`` (``bias_k``, ``bias_v`` included) and ``"static_k"``,
    ``"static_v"`` when they were given. ``dkey`` (``dvalue``) is 0 with a static key (value)."""
    c, p, grads = cache, cache.params, {}
    has_bias_kv, zero_attn, static_k, static_v = c.extra
    dconcat, grads["W_o"], db_o = linear_backward(dout, c.concat, p["W_o"], "b_o" in p)
    dq, dk, dv = fused.sdpa_backward(split_heads(dconcat, c.num_heads), c.attention)[:3]
    dinputs = []
    for x, name, d, static in ((c.key, "k", dk, static_k), (c.value, "v", dv, static_v)):
        if zero_attn:
            d = d[..., :-1, :]                                       # the zero position: no param
        if static:
            grads[f"static_{name}"] = d
            dinputs.append(np.zeros_like(x))
            grads[f"W_{name}"] = np.zeros_like(p[f"W_{name}"])
            if f"b_{name}" in p:
                grads[f"b_{name}"] = np.zeros_like(p[f"b_{name}"])
            continue
        d = merge_heads(d)                                           # (..., S[+1], h*d)
        if has_bias_kv:
            grads[f"bias_{name}"] = d[..., -1, :].reshape(-1, d.shape[-1]).sum(axis=0)
            d = d[..., :-1, :]
        dx, grads[f"W_{name}"], db = linear_backward(d, x, p[f"W_{name}"], f"b_{name}" in p)
        if db is not None:
            grads[f"b_{name}"] = db
        dinputs.append(dx)
    dquery, grads["W_q"], db_q = linear_backward(merge_heads(dq), c.query, p["W_q"], "b_q" in p)
    for name, g in (("b_q", db_q), ("b_o", db_o)):
        if name in p:
            grads[name] = g
    return dquery, dinputs[0], dinputs[1], grads
