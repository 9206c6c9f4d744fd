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

from attention_np._checks import check_cache
from attention_np.compose.pipeline import output, project_heads, project_heads_backward
from attention_np.kernels import fused
from attention_np.kernels.fast_linear import linear_backward
from attention_np.paper.heads import merge_heads, split_heads


@dataclass(frozen=True)
class ExtraKVCache:
    """What :func:`mha_extra_kv_backward` needs: the inputs, ``params``, the fused kernel's cache
    over the ``S`` keys and the appended ones, and ``concat (..., L, h*d_v)``, the input of ``W_o``."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    params: dict
    num_heads: int
    attention: fused.SDPACache
    concat: np.ndarray
    S: int                      # the keys from key (or static_k)
    extra: tuple                # (bias_kv, zero_attn, static_k given, static_v given)

    made_by = "attention_np.compose.extra_kv.mha_extra_kv_forward"


def _pad(a, S: int, n: int, fill):
    """A mask or bias for ``S`` keys with ``n`` columns of ``fill`` appended (None stays None)."""
    if a is None or n == 0:
        return a
    a = np.asarray(a)
    a = np.broadcast_to(a, a.shape[:-1] + (S,))           # a key axis of 1 (broadcast) too
    return np.concatenate([a, np.full(a.shape[:-1] + (n,), fill, dtype=a.dtype)], axis=-1)


def _append(heads, row):
    """``heads (..., h, S, d)`` with one position ``row (h, 1, d)`` (or 0) appended to each head."""
    row = np.broadcast_to(np.asarray(row, heads.dtype), heads.shape[:-2] + (1, heads.shape[-1]))
    return np.concatenate([heads, row], axis=-2)                          # (..., h, S + 1, d)


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
    # 1) project, 2) split into heads: the pipeline's steps (compose/pipeline.py)
    q = project_heads(query, params, "q", h)                                  # (..., h, L, d)
    heads_kv = []
    for x, name, static in ((key, "k", static_k), (value, "v", static_v)):
        if static is not None:
            t = np.asarray(static, dtype=q.dtype)                               # (..., h, S, d)
        else:
            t = project_heads(x, params, name, h)                               # (..., h, S, d)
            if has_bias_kv:                   # one learned position after the S keys
                t = _append(t, split_heads(params[f"bias_{name}"][None], h))    # (..., h, S+1, d)
        if zero_attn:                         # one all-zero position in every head
            t = _append(t, 0)
        heads_kv.append(t)
    k, v = heads_kv
    n = int(has_bias_kv) + int(zero_attn)
    S = k.shape[-2] - n
    # 3) attend, the appended positions unmasked, 4) concat, 5) project with W^O
    heads, attention = fused.sdpa_forward(q, k, v, _pad(mask, S, n, True), bias=_pad(bias, S, n, 0.0))
    out, concat = output(heads, params)                                        # (..., L, d_model)
    extra = (has_bias_kv, zero_attn, static_k is not None, static_v is not None)
    return out, ExtraKVCache(query, key, value, params, num_heads=h, attention=attention,
                             concat=concat, S=S, extra=extra)


def mha_extra_kv_backward(dout, cache: ExtraKVCache):
    """Backward of :func:`mha_extra_kv_forward`: ``(dquery, dkey, dvalue, grads)``; ``grads``
    has the keys of ``params`` (``bias_k``, ``bias_v`` included) and ``"static_k"``,
    ``"static_v"`` when they were given. ``dkey`` (``dvalue``) is 0 with a static key (value)."""
    check_cache(cache, ExtraKVCache, ExtraKVCache.made_by)
    c, p, grads, statics = cache, cache.params, {}, {}
    has_bias_kv, zero_attn, static_k, static_v = c.extra
    # 5) forward: out = concat @ W_o + b_o, 4) concat = merge_heads(heads), 3) Eq. (1)
    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, c.concat, p["W_o"], "b_o" in p)
    dq, dk, dv = fused.sdpa_backward(split_heads(dconcat, c.num_heads), c.attention)
    dinputs = []
    for x, name, d, static in ((c.key, "k", dk, static_k), (c.value, "v", dv, static_v)):
        if zero_attn:
            d = d[..., :-1, :]                                       # the zero position: no param
        if static:
            statics[f"static_{name}"] = d                         # key (value) and W_k unused
            dinputs.append(np.zeros_like(x))
            grads.update({n: np.zeros_like(p[n]) for n in (f"W_{name}", f"b_{name}") if n in p})
            continue
        if has_bias_kv:
            # forward: the learned position appended to every sequence  ->  summed over them
            last = merge_heads(d[..., -1:, :])                       # (..., 1, h*d)
            grads[f"bias_{name}"] = last.reshape(-1, last.shape[-1]).sum(axis=0)
            d = d[..., :-1, :]
        # 1, 2) forward: heads = split_heads(x @ W + b)
        dx, grads[f"W_{name}"], grads[f"b_{name}"] = project_heads_backward(d, x, p, name)
        dinputs.append(dx)
    dquery, grads["W_q"], grads["b_q"] = project_heads_backward(dq, c.query, p, "q")
    return dquery, dinputs[0], dinputs[1], {**{n: grads[n] for n in p}, **statics}
