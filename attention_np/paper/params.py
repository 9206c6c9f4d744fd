r"""The parameters of multi-head attention (§3.2.2): how they are made and checked.

``W_q`` holds every head's :math:`W_i^Q` side by side (columns ``[i*d_k, (i+1)*d_k)``), and the
same for ``W_k``, ``W_v``; ``W_o`` maps the concatenated heads back to ``d_model``.

§3.2.2's projections are matrices alone, :math:`QW_i^Q`, :math:`KW_i^K`, :math:`VW_i^V` and
:math:`W^O`, so :func:`init_mha_params` makes no biases unless asked (``bias=True``). The
engineering layer's :func:`attention_np.init_mha_params` keeps PyTorch's default instead
(``nn.MultiheadAttention(bias=True)``): biases on, zero-initialized.
"""

from __future__ import annotations

import numpy as np

from attention_np.paper._validate import (
    check_bool,
    check_float_dtype,
    check_int,
    check_same_dtype,
    check_seed,
)

WEIGHTS = ("W_q", "W_k", "W_v", "W_o")
BIASES = ("b_q", "b_k", "b_v", "b_o")


def glorot_uniform(rng: np.random.Generator, fan_in: int, fan_out: int, shape=None) -> np.ndarray:
    """Glorot (Xavier) uniform: ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``, float64.

    The variance ``a²/3 = 2 / (fan_in + fan_out)`` keeps activations and gradients at one scale.

    Parameters
    ----------
    rng : np.random.Generator
        Drawn from (a Generator, not a seed: the caller's stream goes on).
    fan_in, fan_out : int
        The widths the variance is set by.
    shape : tuple of int, optional
        The shape of the result; default ``(fan_in, fan_out)``.
    """
    check_int(fan_in, "fan_in")
    check_int(fan_out, "fan_out")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a np.random.Generator, got {type(rng).__name__}")
    if shape is not None and (not isinstance(shape, tuple) or not shape
                              or any(isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer))
                                     or n < 1 for n in shape)):
        raise TypeError(f"shape must be a tuple of positive ints, got {shape!r}")
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out) if shape is None else shape)


def init_mha_params(d_model: int, num_heads: int, *, d_k=None, d_v=None, kdim=None, vdim=None,
                    bias: bool = False, rng=None, dtype=np.float64) -> dict:
    """Glorot-uniform weights (and, with ``bias=True``, zero biases) for
    :func:`~attention_np.paper.multihead.mha_forward`.

    Parameters
    ----------
    d_model : int, the width of the queries and of the output
    num_heads : int, ``h``
    d_k, d_v : int, optional
        Per-head widths; default ``d_model // num_heads`` (the paper's ``d_k = d_v = d_model/h``).
    kdim, vdim : int, optional
        Widths of the key and value inputs (cross-attention); default ``d_model``.
    bias : bool, default False
        Whether the projections have biases. §3.2.2 has none; ``True`` adds zero biases
        ``b_q, b_k, b_v, b_o`` (PyTorch's ``nn.MultiheadAttention`` default, and that of
        :func:`attention_np.init_mha_params`).
    rng : int seed or np.random.Generator, optional
    dtype : floating dtype of every array

    Returns
    -------
    params : dict
        ``W_q (d_model, h*d_k)``, ``W_k (kdim, h*d_k)``, ``W_v (vdim, h*d_v)``,
        ``W_o (h*d_v, d_model)``; with ``bias``, ``b_q (h*d_k,)``, ``b_k (h*d_k,)``,
        ``b_v (h*d_v,)``, ``b_o (d_model,)``.
    """
    d_model, h = check_int(d_model, "d_model"), check_int(num_heads, "num_heads")
    if (d_k is None or d_v is None) and d_model % h:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={h}; "
                         f"pass d_k and d_v explicitly")
    d_k = check_int(d_model // h if d_k is None else d_k, "d_k")
    d_v = check_int(d_model // h if d_v is None else d_v, "d_v")
    kdim = check_int(d_model if kdim is None else kdim, "kdim")
    vdim = check_int(d_model if vdim is None else vdim, "vdim")
    bias = check_bool(bias, "bias")
    dtype = check_float_dtype(dtype, "dtype")
    check_seed(rng, "rng")
    rng = np.random.default_rng(rng)                # a Generator is returned as it is
    params = {"W_q": glorot_uniform(rng, d_model, h * d_k), "W_k": glorot_uniform(rng, kdim, h * d_k),
              "W_v": glorot_uniform(rng, vdim, h * d_v), "W_o": glorot_uniform(rng, h * d_v, d_model)}
    if bias:
        params.update(b_q=np.zeros(h * d_k), b_k=np.zeros(h * d_k), b_v=np.zeros(h * d_v),
                      b_o=np.zeros(d_model))
    return {name: p.astype(dtype) for name, p in params.items()}


def check_params(params, query, key, value, num_heads: int) -> None:
    """``params`` as :func:`init_mha_params` makes them (any bias may be left out), fitting the inputs."""
    _check_names_and_dtypes(params, query, key, value)
    for name, x, W in (("query", query, "W_q"), ("key", key, "W_k"), ("value", value, "W_v")):
        if params[W].ndim != 2 or params[W].shape[0] != x.shape[-1]:
            raise ValueError(f"{name} has {x.shape[-1]} features but params['{W}'] has shape "
                             f"{params[W].shape}: its rows must match the input features")
    _check_widths(params, num_heads)


def _check_names_and_dtypes(params, query, key, value) -> None:
    """``params`` is a dict of the four weights and any of the biases, float arrays of the
    inputs' dtype."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays (init_mha_params makes one), "
                        f"got {type(params).__name__}")
    missing = [w for w in WEIGHTS if w not in params]
    unknown = sorted(set(params) - set(WEIGHTS) - set(BIASES))
    if missing or unknown:
        raise ValueError(f"params must hold {list(WEIGHTS)} and any of {list(BIASES)}; "
                         f"missing {missing}, not in §3.2.2 {unknown}")
    for name, p in params.items():
        if not isinstance(p, np.ndarray) or not np.issubdtype(p.dtype, np.floating):
            raise TypeError(f"params[{name!r}] must be a floating-point ndarray, got "
                            f"{p.dtype if isinstance(p, np.ndarray) else type(p).__name__}")
    check_same_dtype("query, key, value and params", query=query, key=key, value=value,
                     **{f"params['{n}']": p for n, p in params.items()})


def _check_widths(params: dict, h: int) -> None:
    """The columns of the weights: ``h*d_k`` for ``W_q`` and ``W_k``, ``h*d_v`` for ``W_v`` and
    the rows of ``W_o``; each bias as wide as its weight's columns."""
    W_q, W_k, W_v, W_o = (params[w] for w in WEIGHTS)
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(f"params['W_q'] has {W_q.shape[1]} columns but params['W_k'] has "
                         f"{W_k.shape[1]}: queries and keys need the same width h*d_k")
    for W in ("W_q", "W_v"):
        if params[W].shape[1] % h:
            raise ValueError(f"params['{W}'] has {params[W].shape[1]} columns, "
                             f"not divisible by num_heads={h}")
    if W_o.ndim != 2 or W_o.shape[0] != W_v.shape[1]:
        raise ValueError(f"params['W_o'] has shape {W_o.shape} but the concatenated heads have "
                         f"{W_v.shape[1]} features (h*d_v)")
    for W, b in zip(WEIGHTS, BIASES, strict=True):
        if b in params and params[b].shape != (params[W].shape[1],):
            raise ValueError(f"params['{b}'] has shape {params[b].shape}, expected ({params[W].shape[1]},)")
