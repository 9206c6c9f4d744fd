r"""Multi-head self-attention whose scoring function is the only thing that changes (§3.2.1).

Every head projects the same input ``x`` to queries, keys and values, then scores each
(query, key) pair with one of three functions of the *projected* ``q_i, k_j`` (width ``d_k``):

- ``"scaled"``:   :math:`s_{ij} = q_i \cdot k_j / \sqrt{d_k}`  (Eq. (1));
- ``"unscaled"``: :math:`s_{ij} = q_i \cdot k_j`  (dot-product attention without the scale);
- ``"additive"``: :math:`s_{ij} = w_a^\top \tanh(q_i + k_j)`  (Bahdanau et al., 2015).

Bahdanau's :math:`v_a^\top \tanh(W_a s + U_a h)` projects each side before adding; here the
head's own ``W_q`` and ``W_k`` are those projections, so the three heads have the same
parameters apart from additive attention's ``w_a`` (``d_k`` numbers per head) and everything
after the scores (softmax, ``weights @ v``, Concat, ``W_o``) is shared code.

``d_k`` is a free width, not ``d_model / num_heads``: ``W_q, W_k`` are
``(d_model, num_heads * d_k)`` while values keep ``d_v = d_model / num_heads``, so a sweep over
``d_k`` changes the width of what is scored and nothing else in the model.

Params: ``W_q, W_k (d_model, h*d_k)``, ``W_v, W_o (d_model, d_model)``, and ``w_a (h, d_k)``
for ``"additive"``. No biases, as in the paper's equations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_generator,
    check_cache,
    check_choice,
    check_dout,
    check_int,
    check_params_dict,
)
from attention_np.kernels.softmax_inplace import softmax_
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.linear import linear_backward
from attention_np.paper.softmax import softmax_backward

SCORINGS = ("scaled", "unscaled", "additive")


def check_scoring(scoring) -> str:
    """``scoring`` if it is one of :data:`SCORINGS`, else a ValueError naming it."""
    check_choice(scoring, "scoring", SCORINGS)
    return scoring


def init_scoring_mha_params(d_model: int, num_heads: int, d_k: int, scoring: str, *,
                            rng=None) -> dict:
    r"""Random params: every matrix :math:`\mathcal{N}(0, 1/\text{fan\_in})`, ``w_a`` too.

    With unit-variance inputs this gives ``q`` and ``k`` components of variance about 1
    whatever ``d_k`` is: footnote 4's assumption, under which :math:`\mathrm{Var}(q \cdot k)
    = d_k`. (Glorot's :math:`2 / (\text{fan\_in} + \text{fan\_out})` would shrink ``q`` and
    ``k`` as ``d_k`` grows and hide the very effect the sweep measures.)
    """
    check_scoring(scoring)
    for name, n in (("d_model", d_model), ("num_heads", num_heads), ("d_k", d_k)):
        check_int(n, name)
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads} "
                         f"(values have d_v = d_model / num_heads)")
    rng = as_generator(rng)
    hk = num_heads * d_k
    params = {"W_q": rng.normal(0.0, d_model ** -0.5, (d_model, hk)),
              "W_k": rng.normal(0.0, d_model ** -0.5, (d_model, hk)),
              "W_v": rng.normal(0.0, d_model ** -0.5, (d_model, d_model)),
              "W_o": rng.normal(0.0, d_model ** -0.5, (d_model, d_model))}
    if scoring == "additive":
        params["w_a"] = rng.normal(0.0, d_k ** -0.5, (num_heads, d_k))
    return params


def check_scoring_inputs(x, params, num_heads: int, scoring: str) -> np.ndarray:
    """``x`` as a float array, after checking it and ``params`` against each other."""
    check_int(num_heads, "num_heads")
    check_scoring(scoring)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating) or x.ndim < 2:
        raise ValueError(f"x must be a float array (..., L, d_model), got {x.dtype} {x.shape}")
    want = ["W_q", "W_k", "W_v", "W_o"] + (["w_a"] if scoring == "additive" else [])
    if not isinstance(params, dict) or sorted(params) != sorted(want):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params for scoring={scoring!r} must have keys {want} "
                         f"(init_scoring_mha_params makes them), got {got}")
    check_params_dict(params, maker="init_scoring_mha_params")
    d_model, hk = params["W_q"].shape
    if x.shape[-1] != d_model or params["W_k"].shape != (d_model, hk) or hk % num_heads:
        raise ValueError(f"x has d_model={x.shape[-1]}; params['W_q'] {params['W_q'].shape} and "
                         f"params['W_k'] {params['W_k'].shape} must both be (d_model, "
                         f"num_heads*d_k) with num_heads={num_heads}")
    if scoring == "additive" and params["w_a"].shape != (num_heads, hk // num_heads):
        raise ValueError(f"params['w_a'] has shape {params['w_a'].shape}, expected "
                         f"(num_heads, d_k) = ({num_heads}, {hk // num_heads})")
    return x


def scores_forward(scoring: str, q, k, w_a=None):
    """``q (..., h, L, d_k), k (..., h, S, d_k) -> scores (..., h, L, S)``, and the tanh
    hidden layer ``(..., h, L, S, d_k)`` for ``"additive"`` (None otherwise)."""
    check_scoring(scoring)             # any other string would silently score as "unscaled"
    if scoring == "additive":
        hidden = np.tanh(q[..., :, None, :] + k[..., None, :, :])        # (..., h, L, S, d_k)
        scores = (hidden @ w_a[:, None, :, None])[..., 0]                # (..., h, L, S)
        return scores, hidden
    scores = q @ np.swapaxes(k, -1, -2)                                  # (..., h, L, S)
    if scoring == "scaled":
        scores *= q.shape[-1] ** -0.5                                    # Eq. (1)
    return scores, None


def scores_backward(scoring: str, dscores, q, k, w_a=None, hidden=None):
    """Backward of :func:`scores_forward`: ``(dq, dk, dw_a)``, ``dw_a`` None unless additive."""
    check_scoring(scoring)
    if scoring == "additive":
        # forward: scores = hidden @ w_a  ->  dhidden = dscores * w_a, dw_a = sum dscores * hidden
        h, L, S, d_k = hidden.shape[-4:]                                 # summed over batch:
        dw_a = (dscores.reshape(-1, h, 1, L * S)
                @ hidden.reshape(-1, h, L * S, d_k)).sum(axis=0)[:, 0]   # (h, d_k)
        dhidden = dscores[..., None] * w_a[:, None, None, :]             # (..., h, L, S, d_k)
        # forward: hidden = tanh(q_i + k_j)  ->  dpre = dhidden * (1 - hidden**2); q_i is
        # broadcast over keys j and k_j over queries i, so each sums over the other's axis
        dpre = dhidden * (1.0 - hidden * hidden)
        return dpre.sum(axis=-2), dpre.sum(axis=-3), dw_a               # (..., h, L|S, d_k)
    if scoring == "scaled":
        dscores = dscores * q.shape[-1] ** -0.5                          # forward: * 1/sqrt(d_k)
    # forward: scores = q @ k.T  ->  dq = dscores @ k, dk = dscores.T @ q
    return dscores @ k, np.swapaxes(dscores, -1, -2) @ q, None


@dataclass(frozen=True)
class ScoringMHACache:
    """What :func:`scoring_mha_backward` needs; ``weights`` is (..., h, L, L)."""

    scoring: str
    x: np.ndarray          # (..., L, d_model)
    q: np.ndarray          # (..., h, L, d_k)
    k: np.ndarray          # (..., h, L, d_k)
    v: np.ndarray          # (..., h, L, d_v)
    hidden: np.ndarray | None
    weights: np.ndarray    # (..., h, L, L)
    heads: np.ndarray      # (..., L, d_model), Concat(head_1, ..., head_h)
    params: dict


def scoring_mha_forward(x, params: dict, *, num_heads: int, scoring: str):
    """Self-attention ``(..., L, d_model) -> (..., L, d_model)`` with the given scoring.

    1) project, 2) split heads, 3) score, softmax, weight the values, 4) concat, 5) project.

    Parameters
    ----------
    x : (..., L, d_model) float array
    params : dict from :func:`init_scoring_mha_params`
    num_heads : int
    scoring : {"scaled", "unscaled", "additive"}
    """
    check_scoring(scoring)
    x = check_scoring_inputs(x, params, num_heads, scoring)
    h = num_heads
    q = split_heads(x @ params["W_q"], h)                   # (..., h, L, d_k)
    k = split_heads(x @ params["W_k"], h)                   # (..., h, L, d_k)
    v = split_heads(x @ params["W_v"], h)                   # (..., h, L, d_v)
    scores, hidden = scores_forward(scoring, q, k, params.get("w_a"))   # (..., h, L, L)
    weights = softmax_(scores)                              # (..., h, L, L)
    heads = merge_heads(weights @ v)                        # (..., L, h*d_v)
    out = heads @ params["W_o"]                             # (..., L, d_model)
    return out, ScoringMHACache(scoring, x, q, k, v, hidden, weights, heads, params)


def scoring_mha_backward(dout, cache: ScoringMHACache):
    """Backward of :func:`scoring_mha_forward`: ``(dx, grads)``, grads keyed as the params.

    Parameters
    ----------
    dout : (..., L, d_model) float array, the gradient of the output
    cache : ScoringMHACache from :func:`scoring_mha_forward`
    """
    check_cache(cache, ScoringMHACache, "scoring_mha_forward")
    dout = check_dout(dout, cache.x.shape[:-1] + (cache.params["W_o"].shape[1],), cache.x.dtype)
    c, p, h = cache, cache.params, cache.q.shape[-3]
    # forward: out = heads @ W_o
    dheads, dW_o, _ = linear_backward(dout, c.heads, p["W_o"], False)    # (..., L, h*d_v)
    # forward: heads = Concat(weights @ v)  ->  split the gradient back into heads
    dattn = split_heads(dheads, h)                                       # (..., h, L, d_v)
    dweights = dattn @ np.swapaxes(c.v, -1, -2)                          # (..., h, L, L)
    dv = np.swapaxes(c.weights, -1, -2) @ dattn                          # (..., h, L, d_v)
    # forward: weights = softmax(scores)
    dscores = softmax_backward(dweights, c.weights)                      # (..., h, L, L)
    dq, dk, dw_a = scores_backward(c.scoring, dscores, c.q, c.k, p.get("w_a"), c.hidden)
    # forward: q = x @ W_q, k = x @ W_k, v = x @ W_v (per head: split_heads of each)
    dx_q, dW_q, _ = linear_backward(merge_heads(dq), c.x, p["W_q"], False)
    dx_k, dW_k, _ = linear_backward(merge_heads(dk), c.x, p["W_k"], False)
    dx_v, dW_v, _ = linear_backward(merge_heads(dv), c.x, p["W_v"], False)
    grads = {"W_q": dW_q, "W_k": dW_k, "W_v": dW_v, "W_o": dW_o}
    if dw_a is not None:
        grads["w_a"] = dw_a
    return dx_q + dx_k + dx_v, grads                    # x feeds q, k and v: three paths add
