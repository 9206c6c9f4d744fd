"""The reversal task's schedule and step count, chosen on a validation set (docs/training.md).

``python -m attention_np train`` reports its accuracy on 2000 held-out (test) sequences. Its
defaults (float32, the step count, the warm-up and the cool-down of the rate) are chosen here on
**2000 other sequences**, a validation set drawn from another seed, disjoint from the test
sequences and, like them, never trained on: the test sequences play no part in the choice. Every
candidate trains seeds 0-9 (float32, batch 64, one BLAS thread) and is judged by the fraction of
validation sequences each seed reverses exactly at its last step.

The candidates: Eq. (3) alone (the 0.1 default: warm-up 200, 600 steps; its validation accuracy
every 50 steps is recorded as well, since without a cool-down step ``s`` of one run is what a run
of ``s`` steps ends with), and Eq. (3) with warm-up 100 and a linear cool-down to 0 over the last
half of the run (:func:`attention_np.training.adam.cooldown_lr`) at several step counts.

``python -m attention_np.lessons.reversal_schedule --out notebooks/results/reversal_schedule.json``
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attention_np._checks import check_keys
from attention_np.training.tasks import ReversalTask

#: Candidate schedules: ``train``'s ``steps``, ``warmup``, ``cooldown`` (and ``eval_every``).
CANDIDATES = {"Eq. (3) alone, warm-up 200, 600 steps (0.1)": dict(steps=600, warmup=200, cooldown=0,
                                                                  eval_every=50),
              **{f"warm-up 100, cool-down {n // 2}, {n} steps": dict(steps=n, warmup=100, cooldown=n // 2)
                 for n in (200, 250, 300, 350, 400)}}
SEEDS = tuple(range(10))
#: The seed the validation sequences are drawn from (the test set's is ``heldout``'s 12345).
VALIDATION_SEED = 54321


@dataclass(frozen=True)
class ValidationReversal(ReversalTask):
    """:class:`ReversalTask` whose ``heldout()`` is the validation set; its training batches drop
    the test sequences too."""

    def heldout(self, n: int | None = None, seed: int = VALIDATION_SEED):
        """Up to 2000 sequences drawn from ``seed``, none of them a test sequence."""
        tokens, _ = super().heldout(n, seed=seed)
        tokens = tokens[~np.isin(self.ids(tokens), self.test_ids)]
        return tokens, self.targets(tokens)

    @cached_property
    def test_ids(self) -> np.ndarray:
        """Sorted ids of the test sequences (``ReversalTask.heldout()``)."""
        return np.sort(self.ids(ReversalTask.heldout(self)[0]))

    def train_batch(self, rng, n: int, heldout_ids: np.ndarray):
        return super().train_batch(rng, n, np.union1d(heldout_ids, self.test_ids))


def run(seeds=SEEDS, candidates=None) -> dict:
    """Train every candidate on every seed (float32, one BLAS thread): validation accuracies."""
    from attention_np.kernels.threads import blas_threads
    from attention_np.training.trainer import train

    task, runs = ValidationReversal(), {}
    with blas_threads(1):
        for name, kwargs in (candidates or CANDIDATES).items():
            final, curves = {}, {}
            for seed in seeds:
                r = train(task=task, seed=seed, dtype=np.float32, **kwargs)
                final[str(seed)] = [round(r.accuracy, 5), round(r.sequence_accuracy, 5)]
                if r.curve:
                    curves[str(seed)] = [[s, round(tok, 5), round(seq, 5)] for s, tok, seq in r.curve]
            runs[name] = {**kwargs, "final": final, **({"curves": curves} if curves else {})}
    return {"validation_size": len(task.heldout()[0]), "validation_seed": VALIDATION_SEED,
            "dtype": "float32", "batch_size": 64, "runs": runs}


def perfect_seeds(run: dict) -> int:
    """How many seeds end at 100 % of the validation sequences."""
    check_keys(run, "run", ("final",), maker="reversal_schedule.run")
    return sum(seq == 1.0 for _, seq in run["final"].values())


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
    result["command"] = "python -m attention_np.lessons.reversal_schedule --out " + str(args.out)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, r in result["runs"].items():
        worst = min(seq for _, seq in r["final"].values())
        print(f"{name}: {perfect_seeds(r)} of {len(r['final'])} seeds end at 100 % of the validation "
              f"sequences (worst {100 * worst:.2f} %)")


if __name__ == "__main__":
    main()
