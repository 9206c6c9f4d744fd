r"""Additive vs dot-product attention as ``d_k`` grows: the comparison of §3.2.1, measured.

The paper: "While for small values of :math:`d_k` the two mechanisms perform similarly,
additive attention outperforms dot product attention without scaling for larger values of
:math:`d_k`. We suspect that for large values of :math:`d_k`, the dot products grow large in
magnitude, pushing the softmax function into regions where it has extremely small gradients."

Three scoring functions, each with learned projections of the same inputs:

- ``"scaled"``: :math:`\text{score} = (x_q W_q) \cdot (x_k W_k) / \sqrt{d_k}` (Eq. (1));
- ``"unscaled"``: the same without :math:`1/\sqrt{d_k}`;
- ``"additive"``: :math:`\text{score} = w_v^\top \tanh(x_q W_q + x_k W_k)` with a hidden
  layer of width ``d_k`` (:mod:`attention_np.studies.additive`).

A small **retrieval task** exercises them. Each example has ``S`` keys :math:`x_{k,j}` and values
:math:`v_j` with N(0, 1) components; the query is a rotated, noisy copy of one key,
:math:`x_q = R\,(x_{k,j^*} + \sigma \varepsilon)` with a fixed random rotation ``R`` the model
must learn to undo, and the loss asks the attention output for that key's value,
:math:`\ell = \tfrac12 \lVert \text{out} - v_{j^*} \rVert^2`. The loss reaches the scores only
through the softmax, which is where footnote 4's saturation bites. All three models start
from Glorot-uniform weights (so projected queries and keys have components of variance
about 1, footnote 4's assumption), see the same examples in the same order and train with
the same Adam settings for the same number of steps. Whatever comes out is reported.

A loop over steps (training) and over the ``d_k`` of a sweep are the only Python loops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_generator,
    check_array,
    check_choice,
    check_count,
    check_number,
    check_seed,
    check_tuple,
)
from attention_np.kernels.fused import SDPACache, sdpa_backward, sdpa_forward
from attention_np.kernels.threads import blas_threads
from attention_np.paper.linear import linear_backward
from attention_np.paper.params import glorot_uniform
from attention_np.studies.additive import (
    additive_attention_backward,
    additive_attention_forward,
    init_additive_params,
)
from attention_np.studies.scaling import check_d_ks
from attention_np.training.adam import adam_init, adam_step

SCORINGS = ("additive", "unscaled", "scaled")


def init_scoring_params(scoring: str, d_model: int, d_k: int, rng, d_hidden: int | None = None) -> dict:
    """Parameters of one scoring function: ``W_q, W_k (d_model, d_k)`` for dot products;
    ``W_q, W_k (d_model, d_hidden)`` and ``w_v (d_hidden,)`` for additive (``d_hidden`` default ``d_k``)."""
    rng = as_generator(rng)
    check_count(d_model, "d_model")
    check_count(d_k, "d_k")
    check_count(d_hidden, "d_hidden", optional=True)
    if scoring == "additive":
        return init_additive_params(d_model, d_model, d_k if d_hidden is None else d_hidden, rng=rng)
    if scoring in ("scaled", "unscaled"):
        return {"W_q": glorot_uniform(rng, d_model, d_k), "W_k": glorot_uniform(rng, d_model, d_k)}
    raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")


@dataclass(frozen=True)
class DotScoringCache:
    """What :func:`scoring_backward` needs for a dot-product scoring: the projections' inputs
    and the attention's own cache. ``weights`` as on :class:`~attention_np.AdditiveCache`."""

    x_q: np.ndarray        # (..., L, d_model)
    x_k: np.ndarray        # (..., S, d_model)
    params: dict           # W_q, W_k (d_model, d_k)
    attention: SDPACache

    @property
    def weights(self) -> np.ndarray:
        return self.attention.weights                            # (..., L, S)


def scoring_forward(scoring: str, params: dict, x_q, x_k, v):
    """``out, cache`` of attention with the given scoring; ``cache.weights`` is (..., L, S)
    (an :class:`~attention_np.AdditiveCache` or a :class:`DotScoringCache`)."""
    check_choice(scoring, "scoring", SCORINGS)     # any other string would score as "scaled"
    if scoring == "additive":
        return additive_attention_forward(x_q, x_k, v, params)
    q = x_q @ params["W_q"]                                 # (..., L, d_k)
    k = x_k @ params["W_k"]                                 # (..., S, d_k)
    scale = None if scoring == "scaled" else 1.0
    out, cache = sdpa_forward(q, k, v, scale=scale)
    return out, DotScoringCache(x_q, x_k, params, cache)


def scoring_backward(scoring: str, dout, cache) -> dict:
    """Gradients w.r.t. the parameters of :func:`scoring_forward`."""
    check_choice(scoring, "scoring", SCORINGS)
    if scoring == "additive":
        return additive_attention_backward(dout, cache)[3]
    dq, dk, _ = sdpa_backward(dout, cache.attention)
    # forward: q = x_q @ W_q, k = x_k @ W_k  ->  dW_q = x_q.T @ dq, dW_k = x_k.T @ dk
    _, dW_q, _ = linear_backward(dq, cache.x_q, cache.params["W_q"], False)
    _, dW_k, _ = linear_backward(dk, cache.x_k, cache.params["W_k"], False)
    return {"W_q": dW_q, "W_k": dW_k}


def retrieval_batch(rng, rotation, batch: int, n_keys: int, d_v: int, noise: float):
    """One batch of the retrieval task.

    Returns
    -------
    x_q : (batch, 1, d_model)   a rotated noisy copy of key ``target``
    x_k : (batch, S, d_model)
    v : (batch, S, d_v)
    target : (batch,) int, the index of the key the query came from
    """
    rotation = check_array(rotation, "rotation", ndim=2, layout="(d_model, d_model)")
    for name, n in (("batch", batch), ("n_keys", n_keys), ("d_v", d_v)):
        check_count(n, name)
    check_number(noise, "noise", low=0)
    d_model = rotation.shape[0]
    x_k = rng.standard_normal((batch, n_keys, d_model))
    v = rng.standard_normal((batch, n_keys, d_v))
    target = rng.integers(n_keys, size=batch)
    chosen = x_k[np.arange(batch), target]                           # (batch, d_model)
    x_q = (chosen + noise * rng.standard_normal(chosen.shape)) @ rotation.T
    return x_q[:, None, :], x_k, v, target


def _loss_and_grad(out, v, target):
    wanted = v[np.arange(len(target)), target][:, None, :]          # (batch, 1, d_v)
    diff = out - wanted
    # loss = mean over the batch of 1/2 |out - v_target|^2  ->  dout = diff / batch
    return 0.5 * float((diff ** 2).sum()) / len(target), diff / len(target)


def train_retrieval(d_ks, *, scorings=SCORINGS, steps: int = 200, batch: int = 32,
                    n_keys: int = 8, d_v: int = 8, noise: float = 0.5, lr: float = 3e-3,
                    n_eval: int = 512, threshold: float = 1.0, d_hidden: int | None = None,
                    seed: int = 0) -> dict:
    r"""Train each scoring function on the retrieval task for a fixed number of steps.

    The input width is ``d_model = d_k``, so a larger ``d_k`` means larger dot products at
    initialization (footnote 4) but also keys that are easier to tell apart.

    Parameters
    ----------
    d_ks : sequence of int
    scorings : sequence of str
        A non-empty subset of ``("additive", "unscaled", "scaled")`` (a tuple or a list).
    steps, batch : Adam steps, and fresh examples per step
    n_keys, d_v : keys per example and value width
    noise : float >= 0
        ``sigma``, the standard deviation of the noise added to the query's key.
    lr : float > 0
        Adam learning rate, the same for every model.
    n_eval : held-out examples for the final accuracy and loss
    threshold : float > 0
        The training loss (a running mean over 20 steps) that counts as "learned";
        a model attending uniformly has expected loss ``d_v / 2 * (1 - 1/S)`` (3.5 by default)
    d_hidden : int, optional
        Hidden width of additive attention; default ``d_k`` (the paper compares at equal ``d_k``).
    seed : int; the task, the data and the initial weights all follow from it

    Returns
    -------
    dict
        ``d_k`` (float array), ``n_keys`` and ``steps`` (ints), and for each scoring ``s``:
        ``accuracy_{s}`` (fraction of held-out queries whose largest weight is on the right
        key; chance is 1/S), ``loss_{s}`` (held-out loss),
        ``accuracy_init_{s}`` (before training), ``curve_{s}`` (``(len(d_ks), steps)`` training
        losses), ``steps_to_threshold_{s}`` (the first step whose running-mean loss is below
        ``threshold``; ``steps`` when never), and ``grad_init_{s}`` (norm of the first step's
        gradient w.r.t. ``W_q``).
    """
    d_ks = [int(d) for d in check_d_ks(d_ks)]          # 2.5 is refused, not cut to 2
    check_tuple(scorings, "scorings", nonempty=True, sequence=True)
    unknown = [s for s in scorings if s not in SCORINGS]
    if unknown:
        raise ValueError(f"scorings {unknown} are not among {SCORINGS}")
    for name, n in (("steps", steps), ("batch", batch), ("n_keys", n_keys), ("d_v", d_v),
                    ("n_eval", n_eval)):
        check_count(n, name)
    check_number(noise, "noise", low=0)
    check_number(lr, "lr", low=0, low_open=True)
    check_number(threshold, "threshold", low=0, low_open=True)
    check_count(d_hidden, "d_hidden", optional=True)
    check_seed(seed)
    result = {"d_k": np.array(d_ks, dtype=np.float64), "n_keys": n_keys, "steps": steps}
    for s in scorings:
        for key in ("accuracy", "loss", "accuracy_init", "grad_init", "steps_to_threshold"):
            result[f"{key}_{s}"] = np.zeros(len(d_ks))
        result[f"curve_{s}"] = np.zeros((len(d_ks), steps))
    for i, d_k in enumerate(d_ks):
        task_rng = np.random.default_rng([seed, d_k])
        rotation, _ = np.linalg.qr(task_rng.standard_normal((d_k, d_k)))   # a random rotation R
        held_out = retrieval_batch(task_rng, rotation, n_eval, n_keys, d_v, noise)
        for s in scorings:
            # Same data stream and same initial-weight stream for every scoring function.
            data_rng = np.random.default_rng([seed, d_k, 1])
            params = init_scoring_params(s, d_k, d_k, np.random.default_rng([seed, d_k, 2]),
                                         d_hidden)
            result[f"accuracy_init_{s}"][i] = _evaluate(s, params, held_out)[0]
            state = adam_init(params)
            # Thousands of tiny matmuls: one BLAS thread is several times faster on a busy
            # machine (see nn/threads.py), and gives the same numbers.
            with blas_threads(1):
                for step in range(steps):
                    x_q, x_k, v, target = retrieval_batch(data_rng, rotation, batch, n_keys, d_v,
                                                          noise)
                    out, cache = scoring_forward(s, params, x_q, x_k, v)
                    loss, dout = _loss_and_grad(out, v, target)
                    grads = scoring_backward(s, dout, cache)
                    if step == 0:
                        result[f"grad_init_{s}"][i] = np.linalg.norm(grads["W_q"])
                    result[f"curve_{s}"][i, step] = loss
                    adam_step(params, grads, state, lr=lr)   # the paper's betas, §5.3
            result[f"accuracy_{s}"][i], result[f"loss_{s}"][i] = _evaluate(s, params, held_out)
            result[f"steps_to_threshold_{s}"][i] = steps_to_threshold(
                result[f"curve_{s}"][i], threshold)
    return result


def steps_to_threshold(curve, threshold: float, window: int = 20) -> int:
    """The first step at which the mean of the last ``window`` losses is below ``threshold``.

    Returns ``len(curve)`` when that never happens. The running mean keeps one lucky batch
    from counting as learned. ``curve`` is 1-d, ``window >= 1``.
    """
    curve = check_array(curve, "curve", kind="number", ndim=1, layout="(steps,)").astype(np.float64)
    check_number(threshold, "threshold")
    check_count(window, "window")
    window = min(window, len(curve))
    running = np.convolve(curve, np.ones(window) / window, mode="valid")   # ends at step window-1
    below = np.flatnonzero(running < threshold)
    return int(below[0] + window - 1) if below.size else len(curve)


def _evaluate(scoring, params, data):
    x_q, x_k, v, target = data
    out, cache = scoring_forward(scoring, params, x_q, x_k, v)
    weights = cache.weights                                          # (n, 1, S)
    accuracy = float(np.mean(weights[:, 0].argmax(axis=-1) == target))
    return accuracy, _loss_and_grad(out, v, target)[0]
