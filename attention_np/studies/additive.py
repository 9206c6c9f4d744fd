r"""Additive attention (Bahdanau et al., 2015): the alternative §3.2.1 compares against.

The paper: "The two most commonly used attention functions are additive attention, and
dot-product (multiplicative) attention. [...] Additive attention computes the compatibility
function using a feed-forward network with a single hidden layer." For query ``i`` and key ``j``:

.. math:: \text{scores}_{ij} = w_v^\top \tanh(q_i W_q + k_j W_k), \qquad
          \text{weights} = \mathrm{softmax}(\text{scores}), \qquad \text{out} = \text{weights}\, V

The hidden layer is evaluated for every (query, key) pair, so the forward holds an
``(..., L, S, d_hidden)`` array where dot-product attention holds ``(..., L, S)``: that is the
"much faster and more space-efficient in practice" of §3.2.1. There is no scale: the ``tanh``
bounds every hidden unit to (-1, 1), so ``|score| <= sum |w_v|`` whatever the input width.

Masks follow the package's conventions (bool, True = may attend; ``is_causal`` top-left; a
fully masked query row gives output 0, weights 0 and gradients 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_float_array,
    as_generator,
    check_cache,
    check_count,
    check_d_v,
    check_dout,
    check_float_dtype,
    check_min_ndim,
    check_params_dict,
    check_rng,
    check_same_dtype,
    sum_to_shape,
)
from attention_np.kernels.guard import (
    all_finite,
    drop_masked,
    mask_and_bias,
    masked_matmul,
    transpose_mask,
    zero_masked,
)
from attention_np.kernels.softmax_inplace import softmax_
from attention_np.paper.linear import linear_backward
from attention_np.paper.params import glorot_uniform

PARAMS = ("W_q", "W_k", "w_v")


def init_additive_params(d_q: int, kdim: int | None = None, d_hidden: int | None = None, *,
                         rng=None, dtype=np.float64) -> dict:
    """Parameters of additive attention.

    Parameters
    ----------
    d_q : int
        Width of the queries.
    kdim : int, optional
        Width of the key inputs (default ``d_q``), the same name as in :func:`init_mha_params`.
        Unlike dot-product attention, queries and keys may have different widths: each has its
        own projection into the hidden layer.
    d_hidden : int, optional
        Width of the hidden layer (default ``d_q``).
    rng : int seed or np.random.Generator, optional
    dtype : float dtype of every array

    Returns
    -------
    params : dict
        ``W_q (d_q, d_hidden)``, ``W_k (kdim, d_hidden)``, ``w_v (d_hidden,)``, Glorot-uniform.
    """
    kdim = d_q if kdim is None else kdim
    d_hidden = d_q if d_hidden is None else d_hidden
    for name, n in (("d_q", d_q), ("kdim", kdim), ("d_hidden", d_hidden)):
        check_count(n, name)
    check_rng(rng)
    dtype = check_float_dtype(dtype)
    rng = as_generator(rng)
    return {"W_q": glorot_uniform(rng, d_q, d_hidden).astype(dtype),
            "W_k": glorot_uniform(rng, kdim, d_hidden).astype(dtype),
            "w_v": glorot_uniform(rng, d_hidden, 1, shape=(d_hidden,)).astype(dtype)}


@dataclass(frozen=True)
class AdditiveCache:
    """What :func:`additive_attention_backward` needs.

    Attributes
    ----------
    q, k, v : the inputs
    params : the parameter dict
    hidden : (..., L, S, d_hidden) ``tanh(q W_q + k W_k)`` for every (query, key) pair
    weights : (..., L, S) the attention weights
    out : (..., L, d_v)
    mask : bool (..., L, S), True = attended, kept only when an input is NaN or inf (else None):
        then every sum runs over the attended pairs alone (see :func:`masked_matmul`)
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    params: dict
    hidden: np.ndarray
    weights: np.ndarray
    out: np.ndarray
    mask: np.ndarray | None = None

    made_by = "attention_np.studies.additive.additive_attention_forward"


def _check(q, k, v, params):
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    v = as_float_array(v, "v")
    check_min_ndim(q, "q", 2, "(..., L, d_q)")
    check_min_ndim(k, "k", 2, "(..., S, d_k)")
    check_min_ndim(v, "v", 2, "(..., S, d_v)")
    check_d_v(v)
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has S={k.shape[-2]} positions but v has S={v.shape[-2]} "
                         f"(k {k.shape}, v {v.shape})")
    check_params_dict(params, maker="init_additive_params")
    if sorted(params) != sorted(PARAMS):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params must be a dict with keys {list(PARAMS)} "
                         f"(init_additive_params makes one), got {got}")
    W_q, W_k, w_v = (params[n] for n in PARAMS)
    check_same_dtype(q=q, k=k, v=v, W_q=W_q, W_k=W_k, w_v=w_v)
    if W_q.ndim != 2 or W_q.shape[0] != q.shape[-1]:
        raise ValueError(f"q has d_q={q.shape[-1]} features but params['W_q'] has shape "
                         f"{W_q.shape}; expected (d_q, d_hidden)")
    if W_k.ndim != 2 or W_k.shape[0] != k.shape[-1]:
        raise ValueError(f"k has d_k={k.shape[-1]} features but params['W_k'] has shape "
                         f"{W_k.shape}; expected (d_k, d_hidden)")
    if W_k.shape[1] != W_q.shape[1] or w_v.shape != (W_q.shape[1],):
        raise ValueError(f"hidden widths disagree: params['W_q'] {W_q.shape}, "
                         f"params['W_k'] {W_k.shape}, params['w_v'] {w_v.shape}")
    return q, k, v


def additive_attention_forward(q, k, v, params: dict, mask=None, *, is_causal: bool = False):
    r"""Additive attention, forward pass.

    .. math:: \text{scores}_{ij} = w_v^\top \tanh(q_i W_q + k_j W_k)

    Parameters
    ----------
    q : (..., L, d_q) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    params : dict from :func:`init_additive_params`
    mask : bool, broadcastable to (..., L, S), optional
        True = this query may attend to this key.
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (top-left aligned); ANDed with ``mask``.

    Returns
    -------
    out : (..., L, d_v)
    cache : AdditiveCache, with ``cache.weights`` of shape (..., L, S)
    """
    q, k, v = _check(q, k, v, params)
    mask, _ = mask_and_bias(q, k, v, mask, None, is_causal)
    q, k, v = drop_masked(q, k, v, mask)     # masked keys never reach the answer (0 * NaN)

    # Project queries and keys once each, then pair them up by broadcasting.
    hq = q @ params["W_q"]                                           # (..., L, d_hidden)
    hk = k @ params["W_k"]                                           # (..., S, d_hidden)
    hidden = np.tanh(hq[..., :, None, :] + hk[..., None, :, :])      # (..., L, S, d_hidden)
    scores = hidden @ params["w_v"]                                  # (..., L, S)
    if mask is not None:                                             # as sdpa_forward
        scores = np.where(mask, scores, -np.inf)                     # -inf: weight exactly 0
    weights = softmax_(scores)                                       # (..., L, S), in place
    # A NaN or inf in a key masked for some rows only: sum over the attended pairs alone,
    # else 0 * NaN reaches the rows that do not see it (as in sdpa_forward).
    garbage = None if mask is None or all_finite(q, k, v) else np.reshape(
        mask, (1,) * (2 - mask.ndim) + mask.shape)                     # (..., L, S)
    out = masked_matmul(weights, v, garbage)                         # (..., L, d_v)
    # the cache keeps its own out: a caller who edits the returned array cannot change the backward
    return out, AdditiveCache(q, k, v, params, hidden, weights, out.copy(), garbage)


def additive_attention_backward(dout, cache: AdditiveCache):
    """Backward of :func:`additive_attention_forward`.

    Parameters
    ----------
    dout : (..., L, d_v) gradient w.r.t. ``out``
    cache : AdditiveCache

    Returns
    -------
    dq, dk, dv : gradients with the shapes of ``q``, ``k``, ``v``
    grads : dict with ``W_q``, ``W_k``, ``w_v``
    """
    check_cache(cache, AdditiveCache, AdditiveCache.made_by)
    c = cache
    dout = check_dout(dout, c.out.shape, c.out.dtype)
    P, t, m = c.weights, c.hidden, c.mask                            # (..., L, S), (..., L, S, a)
    if m is not None:                        # a NaN or inf input: masked pairs add exactly 0
        t = zero_masked(t, m[..., None])

    # forward: out = P @ v  ->  dP = dout @ v.T,  dv = P.T @ dout
    dv = masked_matmul(np.swapaxes(P, -1, -2), dout, transpose_mask(m))  # (..., S, d_v)
    dP = zero_masked(dout @ np.swapaxes(c.v, -1, -2), m)             # (..., L, S)
    # forward: P = softmax(scores)  ->  dscores = P * (dP - rowsum(dP * P)); rowsum(dP * P)
    # equals rowsum(dout * out) since out = P @ v. Masked entries have P = 0, so dscores = 0.
    dscores = zero_masked(P * (dP - (dout * c.out).sum(axis=-1, keepdims=True)), m)  # (..., L, S)
    # forward: scores = hidden @ w_v  ->  dhidden = dscores[..., None] * w_v,
    #                                     dw_v = sum over pairs of dscores * hidden
    dw_v = np.einsum("...ls,...lsa->...a", dscores, t)               # (..., a)
    dw_v = dw_v.reshape(-1, t.shape[-1]).sum(axis=0)                 # (a,): summed over batch
    dhidden = dscores[..., None] * c.params["w_v"]                   # (..., L, S, a)
    # forward: hidden = tanh(pre)  ->  dpre = dhidden * (1 - hidden**2)
    dpre = dhidden * (1 - t * t)                                     # (..., L, S, a)
    # forward: pre = hq[..., :, None, :] + hk[..., None, :, :]  ->  sum over the broadcast axis
    hq_shape = c.q.shape[:-1] + (t.shape[-1],)
    hk_shape = c.k.shape[:-1] + (t.shape[-1],)
    dhq = sum_to_shape(dpre.sum(axis=-2), hq_shape)                  # (..., L, a): over keys
    dhk = sum_to_shape(dpre.sum(axis=-3), hk_shape)                  # (..., S, a): over queries
    # forward: hq = q @ W_q, hk = k @ W_k  ->  dq = dhq @ W_q.T, dW_q = q.T @ dhq (same for k)
    dq, dW_q, _ = linear_backward(dhq, c.q, c.params["W_q"], False)
    dk, dW_k, _ = linear_backward(dhk, c.k, c.params["W_k"], False)
    grads = {"W_q": dW_q, "W_k": dW_k, "w_v": dw_v}
    return dq, dk, sum_to_shape(dv, c.v.shape), grads


def additive_attention(q, k, v, params: dict, mask=None, *, is_causal: bool = False):
    """Additive attention without the backward bookkeeping: returns ``(out, weights)``.

    Parameters
    ----------
    q, k, v, params, mask, is_causal : as in :func:`additive_attention_forward`
    """
    out, cache = additive_attention_forward(q, k, v, params, mask, is_causal=is_causal)
    return out, cache.weights
