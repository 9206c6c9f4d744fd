r"""The position-wise feed-forward network, Eq. (2), §3.3:

.. math:: \mathrm{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2

"applied to each position separately and identically": two linear maps with a nonlinearity
between, ``d_model -> d_ff -> d_model``. BERT uses GELU instead of ReLU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import as_generator
from attention_np.kernels.fast_linear import linear_backward, linear_forward
from attention_np.nn.activations import gelu_backward, gelu_forward, relu_backward, relu_forward
from attention_np.paper.params import glorot_uniform

ACTIVATIONS = {"relu": (relu_forward, relu_backward), "gelu": (gelu_forward, gelu_backward)}


def init_ffn_params(d_model: int, d_ff: int, *, rng=None, dtype=np.float64) -> dict:
    """``W_1 (d_model, d_ff)``, ``b_1 (d_ff,)``, ``W_2 (d_ff, d_model)``, ``b_2 (d_model,)``.

    Glorot-uniform weights and zero biases, as :func:`attention_np.init_mha_params`.
    """
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


def ffn_forward(x: np.ndarray, params: dict, *, activation: str = "relu"):
    """Eq. (2): ``(..., d_model) -> (..., d_model)``; ``activation`` is "relu" or "gelu"."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if x.shape[-1] != params["W_1"].shape[0]:
        raise ValueError(f"x has {x.shape[-1]} features but params['W_1'] has shape "
                         f"{params['W_1'].shape}")
    act_forward, _ = ACTIVATIONS[activation]
    pre = linear_forward(x, params["W_1"], params["b_1"])       # (..., d_ff)
    hidden, _ = act_forward(pre)                                # (..., d_ff)
    out = linear_forward(hidden, params["W_2"], params["b_2"])  # (..., d_model)
    return out, FFNCache(x, pre, hidden, params, activation)


def ffn_backward(dout: np.ndarray, cache: FFNCache):
    """Backward of Eq. (2): ``(dx, grads)`` with ``grads`` keyed as the params."""
    c, p = cache, cache.params
    _, act_backward = ACTIVATIONS[c.activation]
    # forward: out = hidden @ W_2 + b_2  ->  dhidden = dout @ W_2.T
    dhidden, dW_2, db_2 = linear_backward(dout, c.hidden, p["W_2"], True)
    # forward: hidden = act(pre)
    dpre = act_backward(dhidden, c.pre)
    # forward: pre = x @ W_1 + b_1  ->  dx = dpre @ W_1.T
    dx, dW_1, db_1 = linear_backward(dpre, c.x, p["W_1"], True)
    return dx, {"W_1": dW_1, "b_1": db_1, "W_2": dW_2, "b_2": db_2}
