r"""The parameters of multi-head attention, §3.2.2: how they are made, and how they are checked.

``W_q`` holds every head's ``W_i^Q`` side by side as column blocks (``W_i^Q`` is columns
``[i*d_k, (i+1)*d_k)``), and the same for ``W_k``, ``W_v``; ``W_o`` maps the concatenated heads
back to ``d_model``. Projections are ``y = x @ W + b``. :func:`check_mha_inputs` is what every
multi-head forward (:mod:`attention_np.compose.mha`, the KV-cache decode step) runs first.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import (
    as_float_array,
    as_generator,
    broadcast_batch,
    check_bool,
    check_int,
    check_min_ndim,
    check_params_dict,
    check_same_dtype,
)
from attention_np.paper._validate import check_float_dtype
from attention_np.paper.params import glorot_uniform
from attention_np.variants.qk_norm import NORMS

WEIGHTS = ("W_q", "W_k", "W_v", "W_o")
BIASES = ("b_q", "b_k", "b_v", "b_o")


def init_mha_params(d_model: int, num_heads: int, *, d_k: int | None = None,
                    d_v: int | None = None, kdim: int | None = None, vdim: int | None = None,
                    bias: bool = True, rng=None, dtype=np.float64,
                    num_kv_heads: int | None = None, qk_norm: bool = False,
                    sinks: bool = False) -> dict:
    """Parameters of multi-head attention, §3.2.2.

    Parameters
    ----------
    d_model : int
        Width of the queries and of the output.
    num_heads : int
        ``h``, the number of heads.
    d_k, d_v : int, optional
        Per-head query/key and value widths; default ``d_model // num_heads`` (the paper's
        ``d_k = d_v = d_model / h``), a ``ValueError`` when that does not divide.
    kdim, vdim : int, optional
        Widths of the key and value inputs (cross-attention); default ``d_model``.
    bias : bool
        Whether the projections have biases (zero-initialized).
    rng : int seed or np.random.Generator, optional
    dtype : float dtype of every array
    num_kv_heads : int, optional
        ``H_kv``, the number of key/value heads for grouped-query attention (beyond the paper,
        see :mod:`attention_np.variants.gqa`); ``1`` is multi-query attention. Default ``num_heads``.
        Must divide ``num_heads``.
    qk_norm : bool
        Also make the QK-norm weights ``q_norm``, ``k_norm`` (beyond the paper, see
        :mod:`attention_np.variants.qk_norm`), each ``(d_k,)`` ones, as Qwen3 and OLMo 2 initialise
        their RMSNorms; :func:`mha_forward` applies them whenever ``params`` holds them.
    sinks : bool
        Also make the attention-sink logits ``sinks (h,)`` (beyond the paper, see
        :mod:`attention_np.kernels.sink_logits`), zeros: each head starts with one extra key of score 0
        (gpt-oss draws them from ``N(0, initializer_range²)``); :func:`mha_forward` applies
        them whenever ``params`` holds them.

    Returns
    -------
    params : dict
        ``W_q (d_model, h*d_k)``, ``W_k (kdim, h*d_k)``, ``W_v (vdim, h*d_v)``,
        ``W_o (h*d_v, d_model)``, and with ``bias=True`` ``b_q (h*d_k,)``, ``b_k (h*d_k,)``,
        ``b_v (h*d_v,)``, ``b_o (d_model,)``. Projections are ``y = x @ W + b``; ``W_i^Q`` is
        columns ``[i*d_k, (i+1)*d_k)`` of ``W_q``. Weights are Glorot-uniform. With
        ``num_kv_heads``, ``W_k``, ``W_v``, ``b_k``, ``b_v`` have ``num_kv_heads * d`` columns.
        With ``qk_norm=True``, ``q_norm (d_k,)`` and ``k_norm (d_k,)``; with ``sinks=True``,
        ``sinks (h,)``.
    """
    d_k, d_v, kdim, vdim = _widths(d_model, num_heads, d_k, d_v, kdim, vdim)
    dtype = check_float_dtype(dtype, "dtype")
    for name, flag in (("bias", bias), ("qk_norm", qk_norm), ("sinks", sinks)):
        check_bool(flag, name)
    h = num_heads
    h_kv = check_kv_heads(num_kv_heads, h)
    rng = as_generator(rng)
    params = {
        "W_q": glorot_uniform(rng, d_model, h * d_k),
        "W_k": glorot_uniform(rng, kdim, h_kv * d_k),
        "W_v": glorot_uniform(rng, vdim, h_kv * d_v),
        "W_o": glorot_uniform(rng, h * d_v, d_model),
    }
    if bias:
        params.update(b_q=np.zeros(h * d_k), b_k=np.zeros(h_kv * d_k),
                      b_v=np.zeros(h_kv * d_v), b_o=np.zeros(d_model))
    if qk_norm:
        params.update(q_norm=np.ones(d_k), k_norm=np.ones(d_k))
    if sinks:
        params.update(sinks=np.zeros(h))
    return {name: p.astype(dtype) for name, p in params.items()}


def _widths(d_model, num_heads, d_k, d_v, kdim, vdim) -> tuple:
    """``d_k, d_v, kdim, vdim`` with their defaults (``d_model // num_heads``, ``d_model``), checked."""
    check_int(d_model, "d_model")
    check_int(num_heads, "num_heads")
    if (d_k is None or d_v is None) and d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                         f"pass d_k and d_v explicitly")
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_model // num_heads if d_v is None else d_v
    kdim = d_model if kdim is None else kdim
    vdim = d_model if vdim is None else vdim
    for name, n in (("d_k", d_k), ("d_v", d_v), ("kdim", kdim), ("vdim", vdim)):
        check_int(n, name)
    return d_k, d_v, kdim, vdim


def check_kv_heads(num_kv_heads, num_heads: int) -> int:
    """``num_kv_heads`` (default ``num_heads``), checked to divide ``num_heads``."""
    if num_kv_heads is None:
        return num_heads
    check_int(num_kv_heads, "num_kv_heads")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}: "
                         f"each key/value head serves num_heads / num_kv_heads query heads")
    return int(num_kv_heads)


def check_mha_inputs(query, key, value, params, num_heads, num_kv_heads=None):
    """Check the inputs of a multi-head forward; return ``query, key, value`` as float arrays
    and ``num_kv_heads`` (default ``num_heads``).

    Shapes: ``query (..., L, d_model)``, ``key (..., S, kdim)``, ``value (..., S, vdim)``, and
    ``params`` as :func:`init_mha_params` makes them (any of the biases may be left out; the QK-norm
    weights and the sink logits ``params["sinks"]`` may be added). Raises
    ``ValueError``/``TypeError`` naming the argument otherwise.
    """
    query = as_float_array(query, "query")
    key = as_float_array(key, "key")
    value = as_float_array(value, "value")
    check_min_ndim(query, "query", 2, "(..., L, d_model)")
    check_min_ndim(key, "key", 2, "(..., S, kdim)")
    check_min_ndim(value, "value", 2, "(..., S, vdim)")
    _check_keys(params)
    check_int(num_heads, "num_heads")
    W_q, W_k, W_v = (params[w] for w in WEIGHTS[:3])
    for name, x, W in (("query", query, "W_q"), ("key", key, "W_k"), ("value", value, "W_v")):
        if params[W].ndim != 2 or x.shape[-1] != params[W].shape[0]:
            raise ValueError(f"{name} has {x.shape[-1]} features but params['{W}'] has shape "
                             f"{params[W].shape}: its rows must match the input features")
    check_same_dtype("query, key, value and params", query=query, key=key, value=value,
                     **{f"params['{name}']": p for name, p in params.items()})
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key has S={key.shape[-2]} positions but value has S={value.shape[-2]} "
                         f"(key {key.shape}, value {value.shape})")
    broadcast_batch(query=query.shape[:-2], key=key.shape[:-2], value=value.shape[:-2])
    h_kv = check_kv_heads(num_kv_heads, num_heads)
    if h_kv == num_heads and W_q.shape[1] != W_k.shape[1]:
        raise ValueError(f"params['W_q'] has {W_q.shape[1]} columns but params['W_k'] has "
                         f"{W_k.shape[1]}: queries and keys need the same width "
                         f"h*d_k{_gqa_hint(W_q, W_k, num_heads)}")
    v_heads = "num_heads" if num_kv_heads is None else "num_kv_heads"
    for W, name, n in (("W_q", "num_heads", num_heads), ("W_v", v_heads, h_kv)):
        if params[W].shape[1] % n:
            raise ValueError(f"params['{W}'] has {params[W].shape[1]} columns, not divisible "
                             f"by {name}={n}")
    d_k = W_q.shape[1] // num_heads
    if W_k.shape[1] != h_kv * d_k:
        raise ValueError(f"params['W_k'] has {W_k.shape[1]} columns but num_kv_heads={h_kv} "
                         f"key heads of d_k={d_k} need {h_kv * d_k}")
    _check_output(params, W_v.shape[1] // h_kv * num_heads)
    return query, key, value, h_kv


def _check_output(params: dict, concat: int) -> None:
    """``W_o`` takes the ``concat = h * d_v`` features of the concatenated heads, and each bias
    has its weight's width."""
    W_o = params["W_o"]
    if W_o.ndim != 2 or W_o.shape[0] != concat:
        raise ValueError(f"params['W_o'] has shape {W_o.shape} but the concatenated heads have "
                         f"{concat} features (h*d_v)")
    for W, b in zip(WEIGHTS, BIASES, strict=True):
        if b in params and params[b].shape != (params[W].shape[1],):
            raise ValueError(f"params['{b}'] has shape {params[b].shape}, "
                             f"expected ({params[W].shape[1]},)")


def _check_keys(params) -> None:
    """``params`` a dict with the four weights and no key :func:`init_mha_params` cannot make."""
    check_params_dict(params)
    missing = [w for w in WEIGHTS if w not in params]
    if missing:
        raise ValueError(f"params is missing {missing}; init_mha_params makes a complete dict")
    unknown = sorted(set(params) - set(WEIGHTS) - set(BIASES) - set(NORMS) - {"sinks"}
                     - {f"{n}_bias" for n in NORMS})               # a LayerNorm QK-norm's bias
    if unknown:
        raise ValueError(f"params has unknown keys {unknown}")


def _gqa_hint(W_q, W_k, num_heads: int) -> str:
    """When ``W_k`` is narrower than ``W_q`` by a whole number of heads: the grouped-query
    attention it could be (else "")."""
    if W_q.shape[1] % W_k.shape[1] or num_heads * W_k.shape[1] % W_q.shape[1]:
        return ""
    n = num_heads * W_k.shape[1] // W_q.shape[1]
    return (f"; grouped-query attention with {n} key/value heads needs W_k and W_v of that many "
            f"heads' columns (init_mha_params(..., num_kv_heads={n}))")
