"""One head against several on the dates task, at the same d_model and the same budget.

§3.2.2: "Multi-head attention allows the model to jointly attend to information from different
representation subspaces at different positions. With a single attention head, averaging
inhibits this." Every run here is ``python -m attention_np train --task dates``'s default run
(the same steps, batch, warm-up, cool-down, learning rate and dtype) with only ``num_heads``
and the seed changed: d_model, d_ff, layers and the parameter count are the same for every h
(h heads of width d_model / h). The held-out exact match (greedy, 1000 dates never seen in
training) is measured every ``--eval-every`` steps, which gives the steps to 99 %.

Writes a small JSON (one record per run, rewritten after each run so that a partial sweep is
kept) that notebook 08 loads, and the params of each h's first seed as
``dates_h{h}.npz`` (float32, with the training losses) for the notebook's maps. Not run in CI
(minutes per run). From the repository root::

    PYTHONPATH=. nice -n 10 python benchmarks/dates_heads.py --heads 1 4 --seeds 0 1 \\
        --out notebooks/weights/dates_heads.json --weights notebooks/weights
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

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
from attention_np.training.seq2seq_trainer import dates_config, train_seq2seq

TARGET = 0.99


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=DATES_STEPS)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("dates_heads.json"))
    ap.add_argument("--weights", type=Path, default=None,
                    help="save the params of each h's first seed here as dates_h{h}.npz")
    args = ap.parse_args()
    budget = dict(steps=args.steps, batch_size=DATES_BATCH, warmup=DATES_WARMUP,
                  cooldown=min(DATES_COOLDOWN, args.steps), lr_factor=DATES_LR, dtype=DATES_DTYPE)
    record = {"budget": budget, "eval_every": args.eval_every, "target": TARGET,
              "command": "python benchmarks/dates_heads.py " + " ".join(
                  [f"--heads {' '.join(map(str, args.heads))}",
                   f"--seeds {' '.join(map(str, args.seeds))}", f"--steps {args.steps}",
                   f"--eval-every {args.eval_every}"]),
              "runs": []}
    for h in args.heads:
        for seed in args.seeds:
            config = dates_config(num_heads=h)
            with blas_threads(1):
                r = train_seq2seq(config=config, seed=seed, eval_every=args.eval_every,
                                  **{**budget, "dtype": np.dtype(DATES_DTYPE)})
            run = {"heads": h, "seed": seed, "d_model": config.d_model,
                   "params": int(sum(p.size for p in r.params.values())),
                   "exact_match": r.exact_match, "steps_to_target": r.steps_to(TARGET),
                   "curve": [[s, a] for s, a in r.curve],
                   "loss_last_100": float(np.mean(r.losses[-100:])),
                   "train_seconds": round(r.train_seconds, 1),
                   "load_average": [round(x, 2) for x in os.getloadavg()]}
            record["runs"].append(run)
            args.out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"h={h} seed={seed}: held-out exact match {100 * r.exact_match:.2f}%, steps to "
                  f"{TARGET:.0%}: {run['steps_to_target'] or f'not reached in {args.steps}'}, "
                  f"{r.train_seconds:.1f} s training (load {run['load_average'][0]})", flush=True)
            if args.weights is not None and seed == args.seeds[0]:
                np.savez_compressed(args.weights / f"dates_h{h}.npz", **r.params, losses=r.losses)


if __name__ == "__main__":
    main()
