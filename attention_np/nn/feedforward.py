r"""The position-wise feed-forward network, Eq. (2), §3.3:

.. math:: \mathrm{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2

"applied to each position separately and identically": two linear maps with a nonlinearity
between, ``d_model -> d_ff -> d_model``. BERT uses GELU instead of ReLU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_generator,
    check_array,
    check_cache,
    check_choice,
    check_count,
    check_dout,
    check_float_dtype,
    check_params_dict,
    check_rng,
)
from attention_np.kernels.fast_linear import linear_backward, linear_forward
from attention_np.nn.activations import gelu_backward, gelu_forward, relu_backward, relu_forward
from attention_np.paper.params import glorot_uniform

ACTIVATIONS = {"relu": (relu_forward, relu_backward), "gelu": (gelu_forward, gelu_backward)}


def init_ffn_params(d_model: int, d_ff: int, *, rng=None, dtype=np.float64) -> dict:
    """``W_1 (d_model, d_ff)``, ``b_1 (d_ff,)``, ``W_2 (d_ff, d_model)``, ``b_2 (d_model,)``.

    Glorot-uniform weights and zero biases, as :func:`attention_np.init_mha_params`.
    """
    check_count(d_model, "d_model")
    check_count(d_ff, "d_ff")
    check_rng(rng)
    dtype = check_float_dtype(dtype)
    rng = as_generator(rng)
    return {"W_1": glorot_uniform(rng, d_model, d_ff).astype(dtype), "b_1": np.zeros(d_ff, dtype),
            "W_2": glorot_uniform(rng, d_ff, d_model).astype(dtype), "b_2": np.zeros(d_model, dtype)}


@dataclass(frozen=True)
class FFNCache:
    x: np.ndarray          # (..., d_model) input
    pre: np.ndarray        # (..., d_ff) x @ W_1 + b_1, before the nonlinearity
    hidden: np.ndarray     # (..., d_ff) after it
    params: dict
    activation: str


def check_ffn_params(params, d_model: int, dtype, name: str = "params") -> None:
    """``params`` holds ``W_1 (d_model, d_ff)``, ``b_1 (d_ff,)``, ``W_2 (d_ff, d_model)``,
    ``b_2 (d_model,)`` of ``dtype`` (the input's): a ``ValueError`` or ``TypeError`` naming the key."""
    check_params_dict(params, name, maker="init_ffn_params")
    for key in ("W_1", "b_1", "W_2", "b_2"):
        if key not in params:
            raise ValueError(f"{name} is missing {key!r} (init_ffn_params makes W_1, b_1, W_2, b_2)")
    d_ff = params["W_1"].shape[-1]
    for key, shape in (("W_1", (d_model, d_ff)), ("b_1", (d_ff,)), ("W_2", (d_ff, d_model)),
                       ("b_2", (d_model,))):
        if params[key].shape != shape:
            raise ValueError(f"{name}[{key!r}] has shape {params[key].shape}, expected {shape} "
                             f"(d_model={d_model} from x, d_ff={d_ff} from W_1)")
        if params[key].dtype != dtype:
            raise TypeError(f"{name}[{key!r}] has dtype {params[key].dtype} but x has dtype {dtype}")


def ffn_forward(x: np.ndarray, params: dict, *, activation: str = "relu"):
    """Eq. (2): ``(..., d_model) -> (..., d_model)``.

    Parameters
    ----------
    x : (..., d_model) float array
    params : dict from :func:`init_ffn_params`, of ``x``'s dtype
    activation : {"relu", "gelu"}
    """
    check_choice(activation, "activation", sorted(ACTIVATIONS))
    x = check_array(x, "x", min_ndim=1, layout="(..., d_model)")
    check_ffn_params(params, x.shape[-1], x.dtype)
    act_forward, _ = ACTIVATIONS[activation]
    pre = linear_forward(x, params["W_1"], params["b_1"])       # (..., d_ff)
    hidden, _ = act_forward(pre)                                # (..., d_ff)
    out = linear_forward(hidden, params["W_2"], params["b_2"])  # (..., d_model)
    return out, FFNCache(x, pre, hidden, params, activation)


def ffn_backward(dout: np.ndarray, cache: FFNCache):
    """Backward of Eq. (2): ``(dx, grads)`` with ``grads`` keyed as the params.

    Parameters
    ----------
    dout : (..., d_model) float array, the gradient of the output
    cache : FFNCache from :func:`ffn_forward`
    """
    check_cache(cache, FFNCache, "ffn_forward")
    c, p = cache, cache.params
    dout = check_dout(dout, c.x.shape, c.x.dtype, out="the output of ffn_forward")
    _, act_backward = ACTIVATIONS[c.activation]
    # forward: out = hidden @ W_2 + b_2  ->  dhidden = dout @ W_2.T
    dhidden, dW_2, db_2 = linear_backward(dout, c.hidden, p["W_2"], True)
    # forward: hidden = act(pre)
    dpre = act_backward(dhidden, c.pre)
    # forward: pre = x @ W_1 + b_1  ->  dx = dpre @ W_1.T
    dx, dW_1, db_1 = linear_backward(dpre, c.x, p["W_1"], True)
    return dx, {"W_1": dW_1, "b_1": db_1, "W_2": dW_2, "b_2": db_2}
