r"""Multi-head attention, §3.2.2 of "Attention Is All You Need":

.. math:: \mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O,
          \qquad \mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)

In the Annotated Transformer's five steps: 1) project, 2) split into heads, 3) attend (Eq. (1),
every head at once), 4) concat, 5) project with :math:`W^O`. The backward undoes them from 5 to 1.

The paper's projections have no biases, and :func:`~attention_np.paper.params.init_mha_params`
makes none by default; ``params`` may carry ``b_q, b_k, b_v, b_o`` (PyTorch's default), and then
each projection is ``x @ W + b``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.paper._validate import (
    as_float_array,
    broadcast_batch,
    check_cache,
    check_dout,
    check_heads_mask,
    check_int,
)
from attention_np.paper.attention import AttentionCache, sdpa_backward, sdpa_forward
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.linear import linear_backward, linear_forward
from attention_np.paper.params import check_params


@dataclass(frozen=True)
class MHACache:
    """What :func:`mha_backward` needs: the inputs and ``params`` (step 1), ``num_heads``
    (step 2), the attention cache of step 3 and ``concat (..., L, h*d_v)``, the input of step 5.
    ``weights`` is every head's (..., h, L, S) attention weights."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    params: dict
    num_heads: int
    attention: AttentionCache
    concat: np.ndarray

    made_by = "attention_np.paper.mha_forward"

    @property
    def weights(self) -> np.ndarray:
        return self.attention.weights


def mha_forward(query, key, value, params: dict, mask=None, *, num_heads: int,
                is_causal: bool = False, scale=None):
    """Multi-head attention, §3.2.2, forward.

    Parameters
    ----------
    query : (..., L, d_model)
    key : (..., S, kdim)
    value : (..., S, vdim)
    params : dict from :func:`~attention_np.paper.params.init_mha_params`
    mask : bool, broadcastable to (..., h, L, S), optional
        True = may attend: ``(L, S)`` for every sequence and head, ``(B, 1, 1, S)`` for key
        padding (``padding_mask(lengths)[:, None]``), ``(h, L, S)`` or ``(1, h, L, S)`` per head.
        It may not add or stretch batch dims (the output's batch is the inputs'). With batched
        inputs a 3-D mask whose first dim could be the batch (``B == h``), or cannot be the
        heads (``padding_mask``'s ``(B, 1, S)``), is refused as ambiguous, naming the fix.
    num_heads : int, ``h``
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (§3.2.3), ANDed with ``mask``.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.

    Returns
    -------
    out : (..., L, d_model)
    cache : MHACache, with ``cache.weights`` (..., h, L, S)
    """
    query = as_float_array(query, "query", 2, "(..., L, d_model)")
    key = as_float_array(key, "key", 2, "(..., S, kdim)")
    value = as_float_array(value, "value", 2, "(..., S, vdim)")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key has S={key.shape[-2]} positions but value has S={value.shape[-2]}")
    h = check_int(num_heads, "num_heads")
    check_params(params, query, key, value, h)
    batch = broadcast_batch(query=query.shape[:-2], key=key.shape[:-2], value=value.shape[:-2])
    mask = check_heads_mask(mask, batch, (h, query.shape[-2], key.shape[-2]),
                            "multi-head scores (..., h, L, S)")
    p = params
    # 1) project: every head's W_i^Q (and W_i^K, W_i^V) at once, as column blocks of W_q
    #    (+ b_q, b_k, b_v only when params has them: §3.2.2 has no biases)
    q = linear_forward(query, p["W_q"], p.get("b_q"))              # (..., L, h*d_k)
    k = linear_forward(key, p["W_k"], p.get("b_k"))                # (..., S, h*d_k)
    v = linear_forward(value, p["W_v"], p.get("b_v"))              # (..., S, h*d_v)
    # 2) split into heads
    q, k, v = split_heads(q, h), split_heads(k, h), split_heads(v, h)   # (..., h, L|S, d_k|d_v)
    # 3) attend: Eq. (1) on every head in parallel
    heads, attention = sdpa_forward(q, k, v, mask, is_causal=is_causal, scale=scale)  # (..., h, L, d_v)
    # 4) concat
    concat = merge_heads(heads)                                    # (..., L, h*d_v)
    # 5) project back to d_model
    out = linear_forward(concat, p["W_o"], p.get("b_o"))           # (..., L, d_model)
    return out, MHACache(query, key, value, params, h, attention, concat)


def mha_backward(dout, cache: MHACache):
    """Multi-head attention, §3.2.2, backward.

    Parameters
    ----------
    dout : (..., L, d_model) gradient w.r.t. ``out``
    cache : MHACache from :func:`mha_forward`

    Returns
    -------
    dquery, dkey, dvalue : the shapes of ``query``, ``key``, ``value``; one per argument even
        when they were one array (self-attention: the caller adds the three)
    grads : dict with the keys of ``params``
    """
    check_cache(cache, MHACache, MHACache.made_by)
    c, p = cache, cache.params
    dout = check_dout(dout, c.concat.shape[:-1] + p["W_o"].shape[1:], c.concat.dtype)  # (..., L, d_model)
    grads = {}
    # 5) forward: out = concat @ W_o + b_o  ->  dconcat = dout @ W_o.T, dW_o = concat.T @ dout
    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, c.concat, p["W_o"], "b_o" in p)
    # dconcat (..., L, h*d_v), dW_o (h*d_v, d_model), db_o (d_model,) or None
    # 4) forward: concat = merge_heads(heads)  ->  dheads = split_heads(dconcat)
    dheads = split_heads(dconcat, c.num_heads)                     # (..., h, L, d_v)
    # 3) forward: heads = Attention(q, k, v)  ->  Eq. (1)'s backward
    dq, dk, dv = sdpa_backward(dheads, c.attention)                # (..., h, L|S, d_k|d_v)
    # 2) forward: q = split_heads(q)  ->  dq = merge_heads(dq), and for k, v
    dq, dk, dv = merge_heads(dq), merge_heads(dk), merge_heads(dv)  # (..., L|S, h*d_k|h*d_v)
    # 1) forward: q = query @ W_q + b_q  ->  dquery = dq @ W_q.T, dW_q = query.T @ dq (and k, v)
    # dquery (..., L, d_model), dkey (..., S, kdim), dvalue (..., S, vdim)
    dquery, grads["W_q"], grads["b_q"] = linear_backward(dq, c.query, p["W_q"], "b_q" in p)
    dkey, grads["W_k"], grads["b_k"] = linear_backward(dk, c.key, p["W_k"], "b_k" in p)
    dvalue, grads["W_v"], grads["b_v"] = linear_backward(dv, c.value, p["W_v"], "b_v" in p)
    return dquery, dkey, dvalue, {name: grads[name] for name in p}
