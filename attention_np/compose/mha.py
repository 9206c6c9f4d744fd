r"""Multi-head attention, §3.2.2 of "Attention Is All You Need", with everything beyond the paper:

.. math:: \mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W^O,
          \quad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q, K W_i^K, V W_i^V)

The paper's version, with nothing else, is :mod:`attention_np.paper.multihead`: read it first.
This one runs the same five steps (:mod:`attention_np.compose.pipeline`) with the variants an
:class:`~attention_np.AttentionSpec` describes (RoPE, QK-norm, windows, soft-capping, sinks,
grouped-query attention, dropout) on a kernel of :mod:`attention_np.kernels`; with a spec that
asks for nothing beyond the paper, the tests hold it equal to the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_bool, check_cache, check_dout
from attention_np.compose.layer_spec import (
    check_heads_mask,
    layer_of,
    layer_plan,
    layer_spec,
    positions_without_rope,
)
from attention_np.compose.mha_params import init_mha_params  # noqa: F401  (re-exported)
from attention_np.compose.pipeline import (
    attend_heads,
    drop_unattended,
    output,
    project_heads,
    project_heads_backward,
    transform_qk,
    transform_qk_backward,
)
from attention_np.kernels.fast_linear import linear_backward
from attention_np.kernels.registry import KernelCache, attend_backward
from attention_np.paper.heads import split_heads
from attention_np.variants.rope import head_positions
from attention_np.variants.spec import refuse_elsewhere


@dataclass(frozen=True)
class MHACache:
    """What :func:`mha_backward` needs: the inputs, the parameters, the kernel's cache of step 3,
    the concatenated heads and the q/k transforms of step 2.

    ``weights`` is the (..., h, L, S) attention weight array of every head (kernels that keep
    one); ``attention`` the kernel's own cache; ``concat`` the (..., L, h*d_v) input of ``W_o``.
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    params: dict
    num_heads: int
    kernel_cache: KernelCache
    concat: np.ndarray
    transforms: tuple = ()

    made_by = "attention_np.mha_forward"

    @property
    def attention(self):
        return self.kernel_cache.cache

    @property
    def weights(self) -> np.ndarray:
        return self.kernel_cache.weights


def mha_forward(query, key, value, params: dict, mask=None, *, num_heads: int | None = None,
                is_causal: bool = False, scale=None, spec=None, bias=None, positions=None, rng=None,
                **elsewhere):
    """Multi-head attention, §3.2.2, forward pass, with the variants of ``spec``.

    Parameters
    ----------
    query : (..., L, d_model)
    key : (..., S, kdim)
    value : (..., S, vdim)
    params : dict from :func:`init_mha_params`
        Its contents decide grouped-query attention (``W_k`` with ``num_kv_heads * d_k``
        columns), QK-norm (``q_norm`` and ``k_norm``, each ``(d_k,)``) and attention sinks
        (``sinks``, ``(h,)``).
    mask : bool, broadcastable to (..., h, L, S), optional
        True = may attend: ``(L, S)`` for every sequence and head, ``(B, 1, 1, S)`` for key
        padding (``padding_mask(lengths)[:, None]``), ``(h, L, S)`` or ``(1, h, L, S)`` per head.
        The rule of :func:`attention_np.paper.mha_forward`: it may not add or stretch batch dims
        (the output's batch is the inputs'); with batched inputs a 3-D mask whose first dim
        could be the batch (``B == h``), or cannot be the heads (``padding_mask``'s
        ``(B, 1, S)``), is refused as ambiguous, naming the fix.
    num_heads : int
        ``h`` of §3.2.2 (query heads). Required.
    is_causal : bool
        Top-left causal mask, ANDed with ``mask``.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.
    spec : AttentionSpec, optional
        Everything beyond the paper: window, RoPE, soft-cap, the QK-norm kind and epsilon,
        dropout, the kernel (``spec.enable_gqa`` is refused: ``params`` decides it).
    bias : float, broadcastable to (..., h, L, S), optional
        Added to the scaled scores of every head (ALiBi, T5's relative position bias).
    positions : int (L,) or (..., L), or a pair ``(q_positions, kv_positions)``, optional
        The positions RoPE rotates by (per sequence with batch dims, e.g. left padding).
        Default ``0 .. L-1``; the keys use the queries' positions when ``S == L``, else
        ``0 .. S-1``, unless the pair gives them.
    rng : seed or np.random.Generator
        For attention dropout (``spec.dropout_p``).
    **elsewhere
        Nothing: an option whose home is elsewhere (``window=``, ``dropout_p=``: the spec;
        ``num_kv_heads=``: ``params``) is a ``TypeError`` naming that home.

    Returns
    -------
    out : (..., L, d_model)
    cache : MHACache, with ``cache.weights`` of shape (..., h, L, S)
    """
    caller = "mha_forward"
    refuse_elsewhere(caller, elsewhere)
    spec = layer_spec(caller, spec, num_heads)
    is_causal = check_bool(is_causal, "is_causal")
    query, key, value, layer = layer_of(caller, query, key, value, params, spec=spec,
                                        num_heads=num_heads, scale=scale)
    h, h_kv = layer.num_heads, layer.num_kv_heads
    L, S = query.shape[-2], key.shape[-2]
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    scores = batch + (h, L, S)
    mask = check_heads_mask(mask, "mask", batch, scores, "(..., h, L, S)")
    bias = check_heads_mask(bias, "bias", batch, scores, "(..., h, L, S)", stretch_batch=True)
    q_positions, k_positions = _positions(positions, L, S, spec.rope is not None)
    # the call's one plan: the whole mask built once (mask, a -inf bias, causal, window), the
    # kernel's support checked once
    plan = layer_plan(layer, params, mask=mask, bias=bias, is_causal=is_causal, window=spec.window,
                      rng=rng, scores=(L, S), dtype=query.dtype)
    # 0) key/value positions no query may attend, and queries that attend nothing, -> 0 before
    #    the projections, once: else a NaN there reaches the weight gradients through 0 * NaN
    query, key, value = drop_unattended(query, key, value, plan.mask)
    # 1) project every head's W_i^Q, W_i^K, W_i^V at once, 2) split into heads
    q = project_heads(query, params, "q", h)                         # (..., h, L, d_k)
    k = project_heads(key, params, "k", h_kv)                        # (..., h_kv, S, d_k)
    v = project_heads(value, params, "v", h_kv)                      # (..., h_kv, S, d_v)
    # 2') (beyond the paper) QK-norm, RoPE: transforms of q and k before the kernel
    q, k, transforms = transform_qk(q, k, params, layer, q_positions, k_positions)
    # 3) attend, every head in parallel: Eq. (1)
    heads, attention = attend_heads(q, k, v, params, layer, plan=plan)
    # 4) concat, 5) project back to d_model with W^O
    out, concat = output(heads, params)                              # (..., L, d_model)
    return out, MHACache(query, key, value, params, num_heads=h, kernel_cache=attention,
                         concat=concat, transforms=transforms)


def mha_backward(dout, cache: MHACache, *, return_dbias: bool = False):
    """Backward of :func:`mha_forward`.

    Parameters
    ----------
    dout : (..., L, d_model) gradient w.r.t. ``out``
    cache : MHACache from :func:`mha_forward`
    return_dbias : bool
        With True a fifth value follows ``grads``: ``dbias``, the gradient w.r.t. the
        forward's ``bias`` with its shape (None without a bias), e.g. for a learned relative
        position bias (T5) or ALiBi slopes.

    Returns
    -------
    dquery, dkey, dvalue : gradients with the shapes of ``query``, ``key``, ``value``.
        One per argument even when they were the same array: for self-attention the
        caller adds the three.
    grads : dict with the keys of ``params``
    """
    check_cache(cache, MHACache, MHACache.made_by)
    return_dbias = check_bool(return_dbias, "return_dbias")
    c, p, grads = cache, cache.params, {}
    dout = check_dout(dout, c.concat.shape[:-1] + (p["W_o"].shape[1],), c.concat.dtype)
    # 5) forward: out = concat @ W_o + b_o
    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, c.concat, p["W_o"], "b_o" in p)
    # 4) forward: concat = merge_heads(heads)  ->  its backward is split_heads
    dheads = split_heads(dconcat, c.num_heads)                       # (..., h, L, d_v)
    # 3) forward: heads = Attention(q, k, v)
    kernel_grads = attend_backward(dheads, c.kernel_cache)
    dq, dk, dv = kernel_grads.qkv                                    # (..., h | h_kv, L | S, d)
    if kernel_grads.dsinks is not None:
        grads["sinks"] = kernel_grads.dsinks
    # 2') forward: q, k = RoPE(QKNorm(q)), RoPE(QKNorm(k))
    dq, dk = transform_qk_backward(dq, dk, c.transforms, grads)
    # 1, 2) forward: q = split_heads(query @ W_q + b_q), and the same for k, v
    dquery, grads["W_q"], grads["b_q"] = project_heads_backward(dq, c.query, p, "q")
    dkey, grads["W_k"], grads["b_k"] = project_heads_backward(dk, c.key, p, "k")
    dvalue, grads["W_v"], grads["b_v"] = project_heads_backward(dv, c.value, p, "v")
    grads = {name: grads[name] for name in p}                        # the keys of params
    return (dquery, dkey, dvalue, grads) + ((kernel_grads.dbias,) if return_dbias else ())


def _positions(positions, L: int, S: int, rope: bool):
    """The RoPE positions of queries and keys, for heads (``head_positions``)."""
    kv_positions = None
    if not rope and positions is not None:
        raise ValueError(positions_without_rope("mha_forward"))
    if isinstance(positions, tuple) and len(positions) == 2 and all(
            x is None or np.ndim(x) >= 1 for x in positions):
        positions, kv_positions = positions
    if kv_positions is None and L == S:
        kv_positions = positions
    return head_positions(positions, L), head_positions(kv_positions, S)
