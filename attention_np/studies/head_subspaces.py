r"""Claim 9 measured: one head averages, several heads retrieve (§3.2.2).

"Multi-head attention allows the model to jointly attend to information from different representation
subspaces at different positions. With a single attention head, averaging inhibits this."

**The two-position toy.** A sequence of :math:`S` positions; position :math:`j` carries a random content
vector :math:`c_j \in \mathbb{R}^m` (N(0, 1) components, new in every example) and a one-hot position
code :math:`p_j \in \mathbb{R}^S`, side by side: :math:`x_j = [c_j;\ p_j]`, so
:math:`d_\text{model} = m + S`. The target at position :math:`i` needs **two** other positions:

.. math:: y_i = [\,c_{i-1};\ c_{i+1}\,] \quad (\text{indices mod } S), \qquad y_i \in \mathbb{R}^{2m}.

The model is one multi-head attention layer, ``mha_forward(x, x, x)`` with :math:`h` heads of width
:math:`d_\text{model}/h`, followed by a linear read-out :math:`(d_\text{model}, 2m)`; the loss is the
mean squared error, reported as the **fraction of the target's variance left unexplained**,
:math:`\sum\lVert \hat y - y\rVert^2 / \sum\lVert y\rVert^2` (0: perfect; 1: predicting 0).

**Why one head cannot do it (when its weights do not depend on the contents).** One head gives query
:math:`i` one distribution :math:`w` over positions, and everything after the softmax is linear, so the
first half of the prediction is :math:`\sum_j w_j A c_j + \text{const}` for some matrix :math:`A`.
With independent unit-variance contents its expected squared error is
:math:`\lVert w_{i-1} A - I\rVert_F^2 + \sum_{j \ne i-1} w_j^2 \lVert A\rVert_F^2`, smallest at
:math:`A = w_{i-1} I / \sum_j w_j^2`, where it is :math:`m\,(1 - w_{i-1}^2 / \sum_j w_j^2)`.
The second half likewise leaves :math:`m\,(1 - w_{i+1}^2 / \sum_j w_j^2)`; the sum is at least
:math:`m`, half the target's variance :math:`2m`, **whatever the weights**: attending to both positions
averages their contents, attending to one loses the other. Two heads, each attending to one of the two
positions and writing into its own half, can leave nothing. A head's weights *can* depend on the
contents (the keys carry them), which this bound does not cover; the training below measures what
gradient descent actually finds.

**The control task** needs one position: :math:`y_i = [\,c_{i-1};\ c_{i-1}\,]`. One head suffices.
"""

from __future__ import annotations

import inspect

import numpy as np

from attention_np._checks import check_array, check_choice, check_count, check_number, check_seed, check_tuple
from attention_np.compose.mha import mha_backward, mha_forward
from attention_np.compose.mha_params import init_mha_params
from attention_np.kernels.threads import blas_threads
from attention_np.paper.linear import linear_backward, linear_forward
from attention_np.training.adam import adam_init, adam_step

TASKS = ("two positions", "one position (control)")


def make_batch(rng, batch: int, length: int, m: int, task: str = TASKS[0]):
    """Inputs ``x`` (batch, length, m + length) and targets ``y`` (batch, length, 2 m) of one task."""
    check_choice(task, "task", TASKS)
    for name, n in (("batch", batch), ("length", length), ("m", m)):
        check_count(n, name)
    c = rng.standard_normal((batch, length, m))                          # contents
    p = np.broadcast_to(np.eye(length), (batch, length, length))         # one-hot positions
    x = np.concatenate([c, p], axis=-1)                                  # (B, S, m + S)
    before, after = np.roll(c, 1, axis=1), np.roll(c, -1, axis=1)        # c_{i-1}, c_{i+1}
    y = np.concatenate([before, after if task == TASKS[0] else before], axis=-1)
    return x, y


def unexplained(y_hat, y) -> float:
    """Fraction of the target's variance a prediction leaves: sum |y_hat - y|^2 / sum |y|^2
    (``y_hat`` and ``y`` of one shape)."""
    y_hat, y = check_array(y_hat, "y_hat", kind="number"), check_array(y, "y", kind="number")
    if y_hat.shape != y.shape:
        raise ValueError(f"y_hat has shape {y_hat.shape} but y has shape {y.shape}: expected the same")
    return float(np.sum((y_hat - y) ** 2) / np.sum(y ** 2))


def init_params(d_model: int, num_heads: int, d_out: int, rng) -> dict:
    """The attention layer's parameters plus the read-out ``W_r`` (d_model, d_out), ``b_r``."""
    check_count(d_out, "d_out")
    params = init_mha_params(d_model, num_heads, rng=rng)
    params["W_r"] = rng.standard_normal((d_model, d_out)) * np.sqrt(1.0 / d_model)
    params["b_r"] = np.zeros(d_out)
    return params


def forward(params: dict, x, num_heads: int):
    """Prediction (B, S, d_out) and the caches of the two layers."""
    attn = {k: v for k, v in params.items() if not k.endswith("_r")}
    h, cache_a = mha_forward(x, x, x, attn, num_heads=num_heads)
    y_hat = linear_forward(h, params["W_r"], params["b_r"])
    return y_hat, (cache_a, h)


def loss_and_grads(params: dict, x, y, num_heads: int):
    """Mean over examples and positions of |y_hat - y|^2 / 2, and its gradient w.r.t. every parameter."""
    y_hat, (cache_a, h) = forward(params, x, num_heads)
    n = y.shape[0] * y.shape[1]
    diff = y_hat - y
    dh, dW_r, db_r = linear_backward(diff / n, h, params["W_r"], True)
    _, _, _, grads = mha_backward(dh, cache_a)
    grads = dict(grads, W_r=dW_r, b_r=db_r)
    return 0.5 * float(np.sum(diff ** 2)) / n, grads


def _check_run(num_heads, seed, *, task, length, m, steps, batch, lr, eval_size) -> None:
    """Every argument of :func:`train_one`, before any work."""
    check_count(num_heads, "num_heads")
    check_seed(seed)
    check_choice(task, "task", TASKS)
    for name, n in (("length", length), ("m", m), ("batch", batch), ("eval_size", eval_size)):
        check_count(n, name)
    check_count(steps, "steps", minimum=0)
    check_number(lr, "lr", low=0, low_open=True)
    if (m + length) % num_heads:
        raise ValueError(f"num_heads must divide d_model = m + length = {m + length}, got {num_heads}")


def train_one(num_heads: int, seed: int, *, task: str = TASKS[0], length: int = 8, m: int = 8,
              steps: int = 1500, batch: int = 32, lr: float = 1e-2, eval_size: int = 512) -> dict:
    """Train the one-layer model on a task; return the held-out unexplained fraction and the curve.

    Adam (§5.3's betas), a constant learning rate with a linear decay over the last half of the
    steps; fresh random batches every step (no example is seen twice); a held-out set of
    ``eval_size`` sequences drawn from a separate generator.
    """
    _check_run(num_heads, seed, task=task, length=length, m=m, steps=steps, batch=batch, lr=lr,
               eval_size=eval_size)
    d_model = m + length
    if d_model % num_heads:
        raise ValueError(f"num_heads must divide d_model = {d_model}, got {num_heads}")
    rng = np.random.default_rng(seed)
    params = init_params(d_model, num_heads, 2 * m, rng)
    state = adam_init(params)
    curve = []
    with blas_threads(1):
        for step in range(steps):
            x, y = make_batch(rng, batch, length, m, task)
            loss, grads = loss_and_grads(params, x, y, num_heads)
            curve.append(loss)
            decay = min(1.0, 2.0 * (steps - step) / steps)
            adam_step(params, grads, state, lr=lr * decay)
        x, y = make_batch(np.random.default_rng(10_000 + seed), eval_size, length, m, task)
        y_hat, (cache_a, _) = forward(params, x, num_heads)
    return {"num_heads": num_heads, "seed": seed, "task": task,
            "unexplained": unexplained(y_hat, y), "curve": np.asarray(curve),
            "weights": cache_a.weights.mean(axis=0), "params": params}


def best_single_head_readout(weights: np.ndarray, length: int = 8, m: int = 8, *, n: int = 4096,
                             seed: int = 0) -> float:
    """Unexplained fraction of the best linear read-out of one head with fixed ``weights`` (S, S).

    Fits the read-out by least squares on ``n`` sequences of the two-position task, where the head
    outputs ``weights @ c`` (every value projection and read-out folded into one matrix, fitted per
    query position), and scores it on ``n`` others. The bound in the module docstring says >= 0.5.
    """
    for name, value in (("length", length), ("m", m), ("n", n)):
        check_count(value, name)
    check_seed(seed)
    weights = check_array(weights, "weights", shape=(length, length), layout="(S, S)")
    def features(rng):
        x, y = make_batch(rng, n, length, m)
        mixed = weights @ x[..., :m]                                      # (n, S, m): one average per query
        return mixed, y

    def with_ones(a):                                                    # (S, n, m + 1): a bias column
        a = np.swapaxes(a, 0, 1)
        return np.concatenate([a, np.ones(a.shape[:-1] + (1,))], axis=-1)

    train_x, train_y = features(np.random.default_rng(seed))
    test_x, test_y = features(np.random.default_rng(seed + 1))
    coef = np.linalg.pinv(with_ones(train_x)) @ np.swapaxes(train_y, 0, 1)   # (S, m + 1, 2m): a fit per query
    pred = np.swapaxes(with_ones(test_x) @ coef, 0, 1)                         # (n, S, 2m)
    return unexplained(pred, test_y)


def run_study(heads=(1, 2, 4), seeds=(0, 1, 2, 3, 4), tasks=TASKS, **kwargs) -> dict:
    """Every (task, h, seed) of :func:`train_one`: the numbers notebook 3 reads (JSON-ready).

    Every setting is checked before the first run (``kwargs`` are :func:`train_one`'s)."""
    heads = check_tuple(heads, "heads", item=check_count, nonempty=True, sequence=True)
    seeds = check_tuple(seeds, "seeds", item=check_seed, nonempty=True, sequence=True)
    tasks = check_tuple(tasks, "tasks", item=lambda t, name: check_choice(t, name, TASKS), nonempty=True,
                        sequence=True)
    known = inspect.signature(train_one).parameters
    unknown = sorted(set(kwargs) - set(known) | set(kwargs) & {"num_heads", "seed", "task"})
    if unknown:
        raise TypeError(f"run_study got {unknown}, which are not train_one's keywords "
                        f"(length, m, steps, batch, lr, eval_size)")
    settings = {k: v.default for k, v in known.items() if k not in ("num_heads", "seed")} | kwargs
    for h in heads:
        for task in tasks:
            _check_run(h, seeds[0], **{**settings, "task": task})
    runs = []
    for task in tasks:
        for h in heads:
            results = [train_one(h, s, task=task, **kwargs) for s in seeds]
            runs.append({"task": task, "num_heads": h, "seeds": list(seeds),
                         "unexplained": [r["unexplained"] for r in results],
                         "curve": np.mean([r["curve"] for r in results], axis=0)[::10].tolist(),
                         "weights_seed0": results[0]["weights"].tolist()})

    defaults = {k: v.default for k, v in inspect.signature(train_one).parameters.items()
                if v.default is not inspect.Parameter.empty and k != "task"}
    return {"setup": {"heads": list(heads), "seeds": list(seeds), **defaults, **kwargs}, "runs": runs}


def main(argv=None) -> None:
    """``python -m attention_np.studies.head_subspaces --out notebooks/results/claim9.json``."""
    import argparse
    import json
    import time
    from pathlib import Path

    from attention_np._args import output_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=output_file(".json"), required=True,
                        help="where to write the JSON results (checked before the run)")
    args = parser.parse_args(argv)
    args.out = Path(args.out)
    start = time.perf_counter()
    result = run_study()
    result["setup"]["command"] = "python -m attention_np.studies.head_subspaces --out " + str(args.out)
    result["setup"]["seconds"] = round(time.perf_counter() - start)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} in {result['setup']['seconds']} s")


if __name__ == "__main__":
    main()
