r"""Claim 6 of §3.2.1 inside a trainable model: additive vs scaled vs unscaled dot-product scoring.

The paper: "While for small values of :math:`d_k` the two mechanisms perform similarly, additive
attention outperforms dot product attention without scaling for larger values of :math:`d_k`
[3]" ([3]: Britz et al., 2017, "Massive exploration of neural machine translation
architectures").

The test: the encoder of :mod:`attention_np.studies.scoring_model` learns to reverse sequences
(:class:`attention_np.training.ReversalTask`), once per scoring function and ``d_k``. Everything else
is equal: the model, the data stream of a seed, the number of steps and the batch size. The
learning rate is the only setting tuned, per scoring function and ``d_k``, from a small grid,
on a validation split (seed 0); then every seed trains with the chosen rate and is scored on a
test split that neither training nor tuning saw. Run it as::

    nice -n 10 python -m attention_np.studies.scoring_in_model --out notebooks/results/claim6.json

The loops over steps, seeds, learning rates and ``d_k`` are the only Python loops.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

import numpy as np

from attention_np._args import output_file, positive_int
from attention_np._checks import (
    check_array,
    check_count,
    check_instance,
    check_keys,
    check_number,
    check_seed,
    check_tuple,
)
from attention_np.kernels.threads import blas_threads
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.studies.scoring_attention import SCORINGS
from attention_np.studies.scoring_model import (
    ScoringConfig,
    init_scoring_model,
    scoring_model_backward,
    scoring_model_forward,
)
from attention_np.training.adam import adam_init, adam_step
from attention_np.training.tasks import ReversalTask


def peak_lr(step: int, peak: float, warmup: int) -> float:
    """Eq. (3)'s shape, scaled so that its maximum (at ``step == warmup``) is ``peak``
    (``step >= 0``, read as at least 1; ``peak > 0``; ``warmup >= 1``)."""
    step = max(check_count(step, "step", minimum=0), 1)
    check_number(peak, "peak", low=0, low_open=True)
    check_count(warmup, "warmup")
    return peak * min(step / warmup, (warmup / step) ** 0.5)


def splits(task: ReversalTask):
    """``(validation, test)`` token/target pairs: the two halves of the task's held-out set."""
    tokens, targets = task.heldout()
    half = len(tokens) // 2
    return (tokens[:half], targets[:half]), (tokens[half:], targets[half:]), task.ids(tokens)


def evaluate(params, config, tokens, targets):
    """``(mean cross-entropy per token, token accuracy)`` on a held-out split."""
    logits, _ = scoring_model_forward(params, tokens, config)
    loss, _ = cross_entropy_forward(logits, targets)
    return float(loss), float((logits.argmax(axis=-1) == targets).mean())


def _check_training(config, *, lr, steps, batch_size, warmup) -> None:
    check_instance(config, ScoringConfig, "config", maker="ScoringConfig(...)")
    check_number(lr, "lr", low=0, low_open=True)
    check_count(steps, "steps")
    check_count(batch_size, "batch_size")
    check_count(warmup, "warmup")


def train_one(config: ScoringConfig, *, lr: float, steps: int, batch_size: int, warmup: int,
              seed: int, task: ReversalTask | None = None) -> dict:
    """Train one model; returns its per-step training loss and batch accuracy and its
    validation and test ``(loss, accuracy)``. The seed fixes the initial params and batches."""
    _check_training(config, lr=lr, steps=steps, batch_size=batch_size, warmup=warmup)
    check_seed(seed)
    check_instance(task, ReversalTask, "task", optional=True)
    task = task or ReversalTask(length=config.max_len, vocab_size=config.vocab_size)
    val, test, heldout_ids = splits(task)
    rng = np.random.default_rng(seed)
    params = init_scoring_model(config, rng=rng)
    state = adam_init(params)
    losses, accuracy = np.empty(steps), np.empty(steps)
    # Many small matmuls: one BLAS thread is faster on a busy machine and gives the same numbers.
    with blas_threads(1):
        for step in range(1, steps + 1):
            tokens, targets = task.train_batch(rng, batch_size, heldout_ids)
            logits, cache = scoring_model_forward(params, tokens, config)
            losses[step - 1], ce = cross_entropy_forward(logits, targets)
            accuracy[step - 1] = (logits.argmax(axis=-1) == targets).mean()
            grads = scoring_model_backward(cross_entropy_backward(1.0, ce), cache)
            adam_step(params, grads, state, lr=peak_lr(step, lr, warmup))   # §5.3's betas
            if not np.isfinite(losses[step - 1]):
                losses[step:], accuracy[step:] = np.nan, 0.0     # diverged: stop, report it
                break
        return {"losses": losses, "batch_accuracy": accuracy,
                "val": evaluate(params, config, *val), "test": evaluate(params, config, *test)}


def steps_to(curve, threshold: float, window: int = 20) -> int | None:
    """First step (1-based) at which the mean of the last ``window`` values of ``curve``
    reaches ``threshold``; None when it never does (``curve`` 1-d, ``window >= 1``)."""
    curve = check_array(curve, "curve", kind="number", ndim=1, layout="(steps,)")
    threshold = check_number(threshold, "threshold")
    window = check_count(window, "window")
    curve = np.nan_to_num(curve.astype(np.float64), nan=0.0)
    running = np.convolve(curve, np.ones(window) / window, mode="valid")
    hit = np.flatnonzero(running >= threshold)
    return int(hit[0] + window) if hit.size else None


def _check_study(base, *, d_ks, scorings, lrs, seeds, steps, batch_size, warmup, threshold) -> None:
    """Every setting of :func:`run_study`, before its first run."""
    check_instance(base, ScoringConfig, "config", maker="ScoringConfig(...)")
    for name, values, item in (("d_ks", d_ks, check_count), ("scorings", scorings, None),
                               ("lrs", lrs, None), ("seeds", seeds, check_seed)):
        check_tuple(values, name, item=item, nonempty=True, sequence=True)
    for scoring in scorings:
        ScoringConfig(**{**asdict(base), "scoring": scoring})     # refuses an unknown scoring
    for lr in lrs:
        _check_training(base, lr=lr, steps=steps, batch_size=batch_size, warmup=warmup)
    check_number(threshold, "threshold")


def run_study(*, d_ks=(4, 16, 64, 128), scorings=SCORINGS, lrs=(1e-3, 3e-3, 1e-2),
              seeds=(0, 1, 2), steps: int = 400, batch_size: int = 32, warmup: int = 40,
              threshold: float = 0.99, config: ScoringConfig | None = None,
              log=print, on_config=None) -> dict:
    """Tune the learning rate per (scoring, d_k) on the validation split with ``seeds[0]``,
    then train every seed with it.

    Returns
    -------
    dict
        ``"setup"`` (every setting above) and ``"runs"``: one entry per (d_k, scoring) with the
        chosen ``lr``, ``val_loss_by_lr`` (the tuning), per seed ``test_loss``,
        ``test_accuracy`` (held-out token accuracy) and ``steps_to_threshold`` (the first step
        at which the batch token accuracy, averaged over 20 steps, reaches ``threshold``; None:
        not within the budget), and ``loss_curve`` (training loss, mean over seeds).
        ``on_config(result)`` is called after each (d_k, scoring), e.g. to save partial results.
    """
    base = config or ScoringConfig()
    _check_study(base, d_ks=d_ks, scorings=scorings, lrs=lrs, seeds=seeds, steps=steps,
                 batch_size=batch_size, warmup=warmup, threshold=threshold)
    out = {"setup": {"d_ks": list(d_ks), "scorings": list(scorings), "lrs": list(lrs),
                     "seeds": list(seeds), "steps": steps, "batch_size": batch_size,
                     "warmup": warmup, "threshold": threshold,
                     "model": {k: v for k, v in asdict(base).items()
                               if k not in ("scoring", "d_k")}},
           "runs": []}
    for d_k in d_ks:
        for scoring in scorings:
            config = ScoringConfig(**{**asdict(base), "scoring": scoring, "d_k": int(d_k)})
            t0 = time.perf_counter()
            tuning = {lr: train_one(config, lr=lr, steps=steps, batch_size=batch_size,
                                    warmup=warmup, seed=seeds[0]) for lr in lrs}
            val_loss = {lr: r["val"][0] if np.isfinite(r["val"][0]) else np.inf
                        for lr, r in tuning.items()}
            best = min(lrs, key=val_loss.get)
            runs = [tuning[best]] + [train_one(config, lr=best, steps=steps,
                                               batch_size=batch_size, warmup=warmup, seed=s)
                                     for s in seeds[1:]]
            out["runs"].append({
                "scoring": scoring, "d_k": int(d_k), "lr": best,
                "val_loss_by_lr": {str(lr): val_loss[lr] for lr in lrs},
                "test_loss": [r["test"][0] for r in runs],
                "test_accuracy": [r["test"][1] for r in runs],
                "steps_to_threshold": [steps_to(r["batch_accuracy"], threshold) for r in runs],
                "loss_curve": np.nanmean([r["losses"] for r in runs], axis=0).round(5).tolist(),
            })
            log(f"d_k={d_k:4d} {scoring:9s} lr={best:g} test acc "
                f"{np.round(out['runs'][-1]['test_accuracy'], 4)} steps "
                f"{out['runs'][-1]['steps_to_threshold']} ({time.perf_counter() - t0:.0f} s)")
            if on_config is not None:
                on_config(out)
    return out


def summary_table(result: dict) -> str:
    """One line per (d_k, scoring): the tuned lr, then mean [min, max] over seeds of the test
    token accuracy and loss, and each seed's steps to the threshold ("-": never)."""
    check_keys(result, "result", ("setup", "runs"), maker="run_study")
    check_keys(result["setup"], "result['setup']", ("threshold",), maker="run_study")
    lines = [f"{'d_k':>4} {'scoring':>9} {'lr':>6}  {'test accuracy: mean [min, max]':>30}  "
             f"{'test loss: mean [min, max]':>27}  steps to {result['setup']['threshold']:.0%}"]
    for r in result["runs"]:
        acc, loss = np.array(r["test_accuracy"]), np.array(r["test_loss"])
        steps = ", ".join("-" if s is None else str(s) for s in r["steps_to_threshold"])
        lines.append(f"{r['d_k']:4d} {r['scoring']:>9} {r['lr']:6g}  "
                     f"{acc.mean():10.4f} [{acc.min():.4f}, {acc.max():.4f}]  "
                     f"{loss.mean():9.4f} [{loss.min():.4f}, {loss.max():.4f}]  {steps}")
    return "\n".join(lines)


def load(path) -> dict:
    """The JSON that ``main`` wrote."""
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m attention_np.studies.scoring_in_model",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=output_file(".json"),
                        help="where to write the JSON results, e.g. notebooks/results/claim6.json "
                             "(rewritten after each configuration; 'complete' says when it is done)")
    parser.add_argument("--d-ks", type=positive_int, nargs="+", default=[4, 16, 64, 128],
                        help="the d_k values (default 4 16 64 128)")
    parser.add_argument("--steps", type=positive_int, default=400, help="Adam steps (default 400)")
    parser.add_argument("--seeds", type=positive_int, default=3, help="seeds 0..N-1 (default 3)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    command = "python -m attention_np.studies.scoring_in_model " + " ".join(argv or [])

    def save(result, done=False):
        result["setup"].update(command=command, complete=done,
                               seconds=round(time.perf_counter() - t0))
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    save(run_study(d_ks=args.d_ks, steps=args.steps, seeds=tuple(range(args.seeds)),
                   on_config=save), done=True)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
