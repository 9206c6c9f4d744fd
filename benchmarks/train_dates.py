"""Time ``python -m attention_np train --task dates``'s default run: steps/s, wall time, accuracy.

The issue's target is >= 99 % held-out exact match in <= 3 minutes on 2 cores. This script runs
the command's default configuration (the same function, the same defaults) and prints

- the machine's load average before and after (other jobs slow a shared machine: report it);
- where one training step's time goes (``--profile``: batching, forward, loss, backward, Adam,
  each summed over a few steps alone);
- the training wall time, steps/s, the wall time of the held-out evaluation (1000 dates, greedy
  decoding with the KV cache) and the held-out exact match.

Not run in CI (a timing on a shared CI runner says little). From the repository root::

    PYTHONPATH=. python benchmarks/train_dates.py                  # the default run, ~2 minutes
    PYTHONPATH=. python benchmarks/train_dates.py --profile 50     # + the per-phase split
    PYTHONPATH=. python benchmarks/train_dates.py --dtype float64 --steps 400
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from attention_np.cli.train_dates import (
    DATES_BATCH,
    DATES_COOLDOWN,
    DATES_DTYPE,
    DATES_LR,
    DATES_STEPS,
    DATES_WARMUP,
)
from attention_np.kernels.threads import blas_threads
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.seq2seq import init_seq2seq, seq2seq_backward, seq2seq_forward
from attention_np.training.adam import adam_init, adam_step, transformer_lr
from attention_np.training.dates import DatesTask
from attention_np.training.seq2seq_trainer import dates_config, train_seq2seq


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def profile(steps: int, *, batch_size: int, dtype, config) -> dict:
    """Seconds per step of each phase of a training step, each phase timed alone."""
    task, rng = DatesTask(), np.random.default_rng(0)
    params = init_seq2seq(config, rng=rng, dtype=dtype)
    state = adam_init(params)
    phases = dict.fromkeys(("batching", "forward", "loss", "backward", "Adam"), 0.0)
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        b = task.train_batch(rng, batch_size)
        t1 = time.perf_counter()
        logits, cache = seq2seq_forward(params, b.src, b.tgt_in, config, src_mask=b.src_mask)
        t2 = time.perf_counter()
        _, ce = cross_entropy_forward(logits, b.tgt_out, label_smoothing=0.1)
        dlogits = cross_entropy_backward(1.0, ce)
        t3 = time.perf_counter()
        grads = seq2seq_backward(dlogits, cache)
        t4 = time.perf_counter()
        adam_step(params, grads, state, lr=transformer_lr(step, config.d_model, 100))
        t5 = time.perf_counter()
        for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            phases[name] += dt / steps
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=DATES_STEPS)
    ap.add_argument("--batch-size", type=int, default=DATES_BATCH)
    ap.add_argument("--dtype", choices=("float32", "float64"), default=DATES_DTYPE)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="first time each phase of N training steps (0: skip)")
    args = ap.parse_args()
    config = dates_config(num_heads=args.heads)
    dtype = np.dtype(args.dtype)
    print(f"before: {load()}")
    with blas_threads(1):
        if args.profile:
            phases = profile(args.profile, batch_size=args.batch_size, dtype=dtype, config=config)
            total = sum(phases.values())
            print(f"one training step ({args.dtype}, batch {args.batch_size}, mean of "
                  f"{args.profile}): {1e3 * total:.1f} ms")
            for name, sec in phases.items():
                print(f"  {name:9} {1e3 * sec:7.2f} ms  {sec / total:6.1%}")
        result = train_seq2seq(config=config, steps=args.steps, batch_size=args.batch_size,
                               warmup=DATES_WARMUP, cooldown=min(DATES_COOLDOWN, args.steps),
                               lr_factor=DATES_LR, seed=args.seed,
                               dtype=dtype)
    print(f"after:  {load()}")
    print(f"training: {args.steps} steps of {args.batch_size} dates ({args.dtype}) in "
          f"{result.train_seconds:.1f} s wall = {args.steps / result.train_seconds:.2f} steps/s")
    print(f"evaluation: {result.heldout_size} held-out dates decoded greedily in "
          f"{result.eval_seconds:.1f} s wall")
    total = result.train_seconds + result.eval_seconds
    print(f"held-out exact match {100 * result.exact_match:.2f}%, training + evaluation "
          f"{total:.1f} s wall")


if __name__ == "__main__":
    main()
