r"""Why scores are divided by :math:`\sqrt{d_k}`: footnote 4 of §3.2.1, measured.

The paper: "To illustrate why the dot products get large, assume that the components of q and
k are independent random variables with mean 0 and variance 1. Then their dot product,
:math:`q \cdot k = \sum_{i=1}^{d_k} q_i k_i`, has mean 0 and variance :math:`d_k`."
Large dot products push the softmax "into regions where it has extremely small gradients".

Three measurements, one function each, every one a sweep over ``d_k``:

1. :func:`dot_product_moments`: the mean and variance of ``q·k`` (analytic: 0 and ``d_k``),
   and the variance after scaling by ``1/sqrt(d_k)`` (analytic: 1).
2. :func:`softmax_saturation`: the largest attention weight and the entropy of each row,
   with and without the scale.
3. :func:`softmax_gradients`: the size of the gradient that reaches the scores and the
   queries through the softmax, computed with this package's own backward.

A loop over the ``d_k`` values of a sweep is a loop over experiments; inside each, every
query, key and sample is processed at once.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_generator, check_count, check_instance, check_str, check_tuple
from attention_np.kernels.fused import sdpa_backward, sdpa_forward
from attention_np.paper.softmax import softmax_backward


def check_d_ks(d_ks) -> np.ndarray:
    """``d_ks`` as a non-empty 1-D int array of positive widths; ``ValueError`` otherwise."""
    d_ks = np.asarray(d_ks)
    if d_ks.ndim != 1 or d_ks.size == 0 or not np.issubdtype(d_ks.dtype, np.integer) \
            or d_ks.min() < 1:
        raise ValueError(f"d_ks must be a non-empty 1-D sequence of positive ints, got {d_ks!r}")
    return d_ks


def dot_product_moments(d_ks, *, n_samples: int = 20_000, rng=None) -> dict:
    r"""Mean and variance of ``q·k`` for ``q, k`` with independent N(0, 1) components.

    Derivation (footnote 4). Each term :math:`q_i k_i` is a product of two independent
    zero-mean variables, so :math:`E[q_i k_i] = E[q_i]E[k_i] = 0` and
    :math:`\mathrm{Var}(q_i k_i) = E[q_i^2]E[k_i^2] - 0 = 1`. The ``d_k`` terms are
    independent, so their variances add:

    .. math:: E[q \cdot k] = 0, \qquad \mathrm{Var}(q \cdot k) = d_k, \qquad
              \mathrm{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = \frac{d_k}{d_k} = 1.

    How precise the measurement is: the fourth moment is
    :math:`E[(q \cdot k)^4] = 3 d_k^2 + 6 d_k`, so the sample variance of ``n`` draws has
    relative standard error :math:`\sqrt{(2 + 6/d_k)/n}` (about 1.0% for ``n = 20000``,
    ``d_k = 64``), returned as ``var_rel_se``.

    Parameters
    ----------
    d_ks : sequence of int
        The widths ``d_k`` to measure.
    n_samples : int
        Independent ``(q, k)`` pairs drawn for each ``d_k``.
    rng : int seed or np.random.Generator, optional

    Returns
    -------
    dict of float64 arrays, each of shape ``(len(d_ks),)``
        ``d_k``; ``mean``, ``var``: the measured moments of ``q·k`` (analytic 0 and ``d_k``);
        ``var_scaled``: the variance of ``q·k / sqrt(d_k)`` on the same draws, i.e.
        ``var / d_k`` (analytic 1);
        ``var_rel_se``: the relative standard error of the variance estimate.
    """
    d_ks = check_d_ks(d_ks)
    n = check_count(n_samples, "n_samples")
    rng = as_generator(rng)
    mean, var = [], []
    for d_k in d_ks:
        q = rng.standard_normal((n, d_k))                   # (n, d_k)
        k = rng.standard_normal((n, d_k))                   # (n, d_k)
        dots = np.einsum("nd,nd->n", q, k)                  # (n,) one q·k per pair
        mean.append(dots.mean())
        var.append(dots.var(ddof=1))
    var = np.array(var)
    # Var(a X) = a^2 Var(X) holds for the sample variance too: on the same draws the scaled
    # variance is exactly var / d_k, so it is computed, not measured again.
    return {"d_k": d_ks.astype(np.float64), "mean": np.array(mean), "var": var,
            "var_scaled": var / d_ks,
            "var_rel_se": np.sqrt((2 + 6 / d_ks) / n)}


def _random_qk(rng, n_queries, n_keys, d_k):
    q = rng.standard_normal((n_queries, 1, d_k))            # (n, L=1, d_k): one query per row
    k = rng.standard_normal((n_queries, n_keys, d_k))       # (n, S, d_k): its own keys
    return q, k


def softmax_saturation(d_ks, *, n_keys: int = 16, n_queries: int = 2_000, rng=None) -> dict:
    r"""How peaked the attention weights get as ``d_k`` grows, with and without the scale.

    Each query attends over ``n_keys`` keys, all with N(0, 1) components. Given ``q``, the
    unscaled scores :math:`q \cdot k_j` are N(0, :math:`\lVert q \rVert^2`) with
    :math:`\lVert q \rVert^2 \approx d_k`: their spread grows like :math:`\sqrt{d_k}`, the gap
    between the largest and the second largest score grows with it, and
    :math:`\mathrm{softmax}` tends to a one-hot vector (largest weight -> 1, entropy -> 0).
    Scaled by :math:`1/\sqrt{d_k}`, the scores are close to N(0, 1) whatever ``d_k``, and so
    are the largest weight and the entropy.

    The entropy of a row is :math:`H = -\sum_j w_j \log w_j` in nats; it is at most
    :math:`\log S` (uniform weights) and 0 for a one-hot row.

    Parameters
    ----------
    d_ks : sequence of int
    n_keys : int
        ``S``, the number of keys each query attends over.
    n_queries : int
        Independent queries (each with its own keys) per ``d_k``.
    rng : int seed or np.random.Generator, optional

    Returns
    -------
    dict of float64 arrays of shape ``(len(d_ks),)``
        ``d_k``; ``max_weight_scaled``, ``max_weight_unscaled``: the mean over queries of the
        largest weight; ``entropy_scaled``, ``entropy_unscaled``: the mean entropy in nats;
        and the scalar ``max_entropy`` = log S for reference.
    """
    d_ks = check_d_ks(d_ks)
    S = check_count(n_keys, "n_keys")
    n = check_count(n_queries, "n_queries")
    rng = as_generator(rng)
    result = {f"{what}_{how}": [] for what in ("max_weight", "entropy")
              for how in ("scaled", "unscaled")}
    for d_k in d_ks:
        q, k = _random_qk(rng, n, S, d_k)
        v = np.zeros((n, S, 1))                              # the weights are all we look at
        for how, scale in (("scaled", None), ("unscaled", 1.0)):
            _, cache = sdpa_forward(q, k, v, scale=scale)
            w = cache.weights[:, 0, :]                       # (n, S)
            # 0 * log 0 = 0: a weight that underflowed to 0 takes log 1 = 0 and adds nothing.
            plogp = w * np.log(np.where(w > 0, w, 1.0))
            result[f"max_weight_{how}"].append(w.max(axis=-1).mean())
            result[f"entropy_{how}"].append(-plogp.sum(axis=-1).mean())
    out = {"d_k": d_ks.astype(np.float64)}
    out.update({name: np.array(vals) for name, vals in result.items()})
    out["max_entropy"] = float(np.log(S))
    return out


def softmax_gradients(d_ks, *, n_keys: int = 16, d_v: int = 16, n_queries: int = 2_000,
                      rng=None) -> dict:
    r"""The size of the gradient that flows back through the softmax, against ``d_k``.

    For random ``q, k, v`` (N(0, 1) components) and a random upstream gradient ``dout``,
    run this package's :func:`~attention_np.sdpa_forward` / :func:`~attention_np.sdpa_backward`
    with ``scale = 1/sqrt(d_k)`` and with ``scale = 1`` and measure

    - the gradient reaching the scores, :math:`\partial \ell / \partial \text{scores}
      = w \odot (dw - \sum_j dw_j w_j)` with :math:`dw = dout\, V^\top`
      (:func:`~attention_np.softmax_backward`). When the softmax saturates (``w`` nearly
      one-hot) every entry is a product of a weight near 0 or of a factor
      :math:`dw_j - dw_{j^*}` near 0 for the winning key: the gradient vanishes;
    - the gradient reaching the queries, ``dq`` from ``sdpa_backward``, which also carries the
      factor ``scale`` of the forward ``scores = q kᵀ · scale``.

    The size of a gradient is its L2 norm for one query (over the ``S`` scores, or over the
    ``d_k`` features of ``dq``), then summarized over queries two ways: the root mean square
    and the median. They tell different stories, and both are true: a nearly one-hot softmax
    gives a tiny gradient to most queries (the median collapses) but a large one to the few
    whose two best scores nearly tie (they keep the root mean square up).

    Parameters
    ----------
    d_ks : sequence of int
    n_keys : int
        ``S``, the number of keys per query.
    d_v : int
        Value width, fixed across the sweep so that only ``d_k`` changes.
    n_queries : int
    rng : int seed or np.random.Generator, optional

    Returns
    -------
    dict of float64 arrays of shape ``(len(d_ks),)``
        ``d_k``; for ``g`` in ``dscores``/``dq``, ``stat`` in ``rms``/``median`` and ``how`` in
        ``scaled``/``unscaled``: ``{g}_{stat}_{how}``, the statistic over queries of the
        per-query gradient norm; and the ratios ``{g}_ratio_{stat}`` = scaled / unscaled.
    """
    d_ks = check_d_ks(d_ks)
    S = check_count(n_keys, "n_keys")
    d_v = check_count(d_v, "d_v")
    n = check_count(n_queries, "n_queries")
    rng = as_generator(rng)
    names = [f"{g}_{stat}_{how}" for g in ("dscores", "dq") for stat in ("rms", "median")
             for how in ("scaled", "unscaled")]
    result = {name: [] for name in names}
    for d_k in d_ks:
        q, k = _random_qk(rng, n, S, d_k)                    # (n, 1, d_k), (n, S, d_k)
        v = rng.standard_normal((n, S, d_v))                 # (n, S, d_v)
        dout = rng.standard_normal((n, 1, d_v))              # (n, 1, d_v) random, never ones
        for how, scale in (("scaled", None), ("unscaled", 1.0)):
            out, cache = sdpa_forward(q, k, v, scale=scale)
            # forward: out = w @ v  ->  dw = dout @ v.T; then back through the softmax
            dw = dout @ np.swapaxes(v, -1, -2)               # (n, 1, S)
            dscores = softmax_backward(dw, cache.weights)    # (n, 1, S)
            dq, _, _ = sdpa_backward(dout, cache)            # (n, 1, d_k)
            for g, name in ((dscores, "dscores"), (dq, "dq")):
                per_query = np.sqrt((g ** 2).sum(axis=(-2, -1)))    # (n,) L2 norm per query
                result[f"{name}_rms_{how}"].append(np.sqrt((per_query ** 2).mean()))
                result[f"{name}_median_{how}"].append(np.median(per_query))
    out = {"d_k": d_ks.astype(np.float64)}
    out.update({name: np.array(vals) for name, vals in result.items()})
    for g in ("dscores", "dq"):
        for stat in ("rms", "median"):
            out[f"{g}_ratio_{stat}"] = out[f"{g}_{stat}_scaled"] / out[f"{g}_{stat}_unscaled"]
    return out


def format_table(result: dict, columns, *, digits: int = 4) -> str:
    """A plain-text table of some columns of a result dict, one row per ``d_k`` (``digits >= 1``)."""
    check_instance(result, dict, "result")
    columns = check_tuple(columns, "columns", item=check_str, nonempty=True, sequence=True)
    check_count(digits, "digits")
    missing = [c for c in columns if c not in result]
    if missing:
        raise ValueError(f"columns {missing} are not in the result (it has {sorted(result)})")
    width = max(12, *(len(c) + 2 for c in columns))
    lines = ["".join(f"{c:>{width}}" for c in columns)]
    for i in range(len(result[columns[0]])):
        lines.append("".join(f"{result[c][i]:>{width}.{digits}g}" for c in columns))
    return "\n".join(lines)
