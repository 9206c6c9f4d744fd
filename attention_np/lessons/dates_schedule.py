"""The dates task's learning-rate schedule, chosen on a validation split (docs/training.md).

The default run of ``python -m attention_np train --task dates`` (1200 steps, Eq. (3) with a linear
cool-down over the last 400) was first picked by comparing two runs on the *held-out* dates, the
same dates its accuracy is then reported on. This module redoes the choice on a **validation**
split instead: 1000 further dates, taken out of training as well, disjoint from the 1000 held-out
(test) dates. Both candidate schedules train on the remaining dates only and are compared on the
validation dates alone; the test dates play no part in the choice.

The split: ``DatesTask(heldout_size=2000)`` holds out the first 2000 dates of the task's seeded
permutation; the first 1000 of those are exactly ``DatesTask()``'s held-out dates (the same
permutation), so the validation dates are the other 1000.

``python -m attention_np.lessons.dates_schedule --out notebooks/results/dates_schedule.json``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.training.dates import FORMATS, DatesTask, date_of, make_batch

# The two schedules that were compared: Eq. (3) alone for 1600 steps, and 1200 steps with a
# linear cool-down to 0 over the last 400 (the default run). float32, batch 64, seed 0 for both.
CANDIDATES = {"Eq. (3) alone, 1600 steps": dict(steps=1600, cooldown=0),
              "Eq. (3) + cool-down 400, 1200 steps": dict(steps=1200, cooldown=400)}


def validation_dates(test: DatesTask | None = None) -> np.ndarray:
    """Indices of the 1000 validation dates: held out with the test dates, disjoint from them."""
    test = test or DatesTask()
    both = DatesTask(heldout_size=2 * test.heldout_size, seed=test.seed).split()[1]
    return np.setdiff1d(both, test.split()[1])


@dataclass(frozen=True)
class ValidationTask(DatesTask):
    """Trains on the dates that are neither test nor validation; ``heldout()`` is the validation set."""

    heldout_size: int = 2000

    def heldout(self):
        """The validation dates, each in a format drawn from ``seed + 2``."""
        val = validation_dates(DatesTask(heldout_size=self.heldout_size // 2, seed=self.seed))
        formats = np.random.default_rng(self.seed + 2).integers(0, len(FORMATS), len(val))
        return make_batch([date_of(i) for i in val], formats)


def run(seed: int = 0) -> dict:
    """Train both candidates on the training dates; validation exact match every 100 steps."""
    from attention_np.kernels.threads import blas_threads
    from attention_np.training.seq2seq_trainer import train_seq2seq

    task, runs = ValidationTask(), {}
    with blas_threads(1):
        for name, kwargs in CANDIDATES.items():
            r = train_seq2seq(task=task, seed=seed, dtype=np.float32, eval_every=100, **kwargs)
            runs[name] = {**kwargs, "curve": [[int(s), float(a)] for s, a in r.curve],
                          "final": float(r.exact_match), "train_seconds": round(r.train_seconds, 1)}
    return {"seed": seed, "validation_size": len(task.heldout().isos), "runs": runs}


def main(argv=None) -> None:
    import argparse
    import json
    from pathlib import Path

    from attention_np._args import output_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=output_file(".json"), required=True,
                        help="where to write the JSON results (checked before the run)")
    args = parser.parse_args(argv)
    args.out = Path(args.out)
    result = run()
    result["command"] = "python -m attention_np.lessons.dates_schedule --out " + str(args.out)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, r in result["runs"].items():
        print(f"{name}: validation exact match {r['final']:.2%}; curve {r['curve']}")


if __name__ == "__main__":
    main()
