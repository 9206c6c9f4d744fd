"""Time ``python -m attention_np train`` (the reversal task) at its defaults, and one step per dtype.

The issue's target is the default run at 100 % of held-out sequences in <= 5 s on this machine.
This script prints

- the machine's load average before and after (other jobs slow a shared machine: report it);
- the cost of one training step in float32 and in float64 (``training.train`` with the command's
  schedule, batch 64, one BLAS thread), measured in the same run: short runs per dtype, the dtypes
  alternating, the median reported, so that a burst of load hits both alike; wall and CPU time;
  and the split of a float32 step into batching, forward, loss, backward, Adam (each phase timed
  alone);
- the default command itself, run ``--runs`` times as a user runs it (a fresh interpreter):
  the training + evaluation time it prints, the whole process's wall time (interpreter start and
  imports included) and its held-out accuracy;
- with ``--seeds N``: the default command with ``--seed 0 .. N-1``, how many reach 100 % of the
  held-out sequences.

Not run in CI (a timing on a shared CI runner says little). From the repository root::

    PYTHONPATH=. python benchmarks/train_reverse.py                 # about half a minute
    PYTHONPATH=. python benchmarks/train_reverse.py --seeds 10      # + seeds 0-9, ~40 s more
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attention_np.cli.train import (
    REVERSE_COOLDOWN,
    REVERSE_DTYPE,
    REVERSE_LR,
    REVERSE_STEPS,
    REVERSE_WARMUP,
)
from attention_np.kernels.threads import blas_threads
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.model import ModelConfig, init_model, model_backward, model_forward
from attention_np.training.adam import adam_init, adam_step, cooldown_lr
from attention_np.training.tasks import ReversalTask
from attention_np.training.trainer import train

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("batching", "forward", "loss", "backward", "Adam")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


class Trainer:
    """The loop of :func:`attention_np.training.train` at the command's defaults, one step at a time,
    with the seconds of each phase added up in ``phases``."""

    def __init__(self, dtype, batch_size: int = 64, seed: int = 0):
        self.config, self.task = ModelConfig(), ReversalTask()
        self.rng = np.random.default_rng(seed)
        self.params = init_model(self.config, rng=self.rng, dtype=dtype)
        self.state = adam_init(self.params)
        self.held_ids = np.sort(self.task.ids(self.task.heldout()[0]))
        self.batch_size, self.step_count = batch_size, 0
        self.phases = dict.fromkeys(PHASES, 0.0)

    def step(self) -> None:
        self.step_count += 1
        t0 = time.perf_counter()
        tokens, targets = self.task.train_batch(self.rng, self.batch_size, self.held_ids)
        t1 = time.perf_counter()
        logits, cache = model_forward(self.params, tokens, self.config)
        t2 = time.perf_counter()
        _, ce = cross_entropy_forward(logits, targets)
        dlogits = cross_entropy_backward(1.0, ce)
        t3 = time.perf_counter()
        grads = model_backward(dlogits, cache)
        t4 = time.perf_counter()
        step = (self.step_count - 1) % REVERSE_STEPS + 1        # the command's schedule, repeated
        lr = REVERSE_LR * cooldown_lr(step, REVERSE_STEPS, REVERSE_COOLDOWN, self.config.d_model,
                                      REVERSE_WARMUP)
        adam_step(self.params, grads, self.state, lr=lr)
        t5 = time.perf_counter()
        for name, sec in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            self.phases[name] += sec


def step_costs(rounds: int, block: int) -> dict:
    """Median (wall, CPU) seconds per step of each dtype: ``rounds`` alternating runs of
    :func:`attention_np.training.train` (the command's function and schedule) of ``block`` steps, timed
    from the end of step 1 to the end of the last (no set-up, no evaluation). One thread: the CPU
    time hardly moves with other processes' load, the wall time does."""
    times = {dt: [] for dt in ("float32", "float64")}
    for _ in range(rounds):
        for dt, ts in times.items():
            marks = []

            def on_step(step, loss, marks=marks):
                if step in (1, block):
                    marks.append((time.perf_counter(), time.process_time()))

            train(steps=block, dtype=np.dtype(dt), warmup=REVERSE_WARMUP,
                  cooldown=min(REVERSE_COOLDOWN, block), lr_factor=REVERSE_LR, on_step=on_step)
            (w0, c0), (w1, c1) = marks
            ts.append(((w1 - w0) / (block - 1), (c1 - c0) / (block - 1)))
    return {dt: tuple(statistics.median(x) for x in zip(*ts, strict=True)) for dt, ts in times.items()}


def phases(steps: int) -> dict:
    """Mean seconds of each phase of a float32 step over ``steps`` steps.

    Run after :func:`step_costs` in the same process: in a fresh process this loop's arrays were
    page-faulted in again on every step until a first large array was freed (glibc's dynamic mmap
    threshold, measured here: ~3000 minor faults a step, float64 steps 1.5x slower), which the
    command's run does not show."""
    t = Trainer(np.float32)
    for _ in range(steps):
        t.step()
    return {name: sec / steps for name, sec in t.phases.items()}


def run_command(*extra: str) -> dict:
    """``python -m attention_np train [extra]`` in a fresh interpreter: its numbers."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "attention_np", "train", *extra], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    process = time.perf_counter() - start
    last = proc.stdout.strip().splitlines()[-1]
    m = re.search(r"([\d.]+)% of tokens, ([\d.]+)% of sequences.*trained in ([\d.]+) s wall, "
                  r"([\d.]+) s CPU", last)
    if proc.returncode not in (0, 1) or m is None:
        raise RuntimeError(f"train failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    tokens, sequences, wall, cpu = (float(x) for x in m.groups())
    return dict(tokens=tokens, sequences=sequences, wall=wall, cpu=cpu, process=process)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds per dtype (default 7)")
    ap.add_argument("--block", type=int, default=40, help="steps per run (default 40)")
    ap.add_argument("--runs", type=int, default=3, help="runs of the default command (default 3)")
    ap.add_argument("--seeds", type=int, default=0, metavar="N",
                    help="also run the default command with seeds 0 .. N-1 (default: skip)")
    args = ap.parse_args(argv)
    print(f"before: {load()}")
    with blas_threads(1):
        per_step = step_costs(args.rounds, args.block)
        split = phases(args.rounds * args.block)
    print(f"one training step (training.train, the command's schedule, batch 64, one BLAS thread; median of "
          f"{args.rounds} alternating runs of {args.block} steps):")
    for i, clock in enumerate(("wall", "CPU")):
        t32, t64 = per_step["float32"][i], per_step["float64"][i]
        print(f"  {clock:4} float32 {1e3 * t32:.2f} ms, float64 {1e3 * t64:.2f} ms; "
              f"float64 / float32 = {t64 / t32:.2f}x")
    total = sum(split.values())
    print(f"a float32 step split into its phases (mean of {args.rounds * args.block} steps, "
          f"{1e3 * total:.2f} ms in all):")
    for name, sec in split.items():
        print(f"  {name:9} {1e3 * sec:6.2f} ms  {sec / total:6.1%}")
    print(f"default command: {REVERSE_STEPS} steps, {REVERSE_DTYPE}, warm-up {REVERSE_WARMUP}, "
          f"cool-down {REVERSE_COOLDOWN}, lr x{REVERSE_LR}")
    for i in range(args.runs):
        r = run_command()
        print(f"  run {i + 1}: trained + evaluated in {r['wall']:.2f} s wall ({r['cpu']:.2f} s CPU), "
              f"the whole process {r['process']:.2f} s; held-out {r['tokens']:.2f}% of tokens, "
              f"{r['sequences']:.2f}% of sequences")
    if args.seeds:
        runs = [run_command("--seed", str(s), "--target", "0") for s in range(args.seeds)]
        perfect = [s for s, r in enumerate(runs) if r["sequences"] == 100.0]
        print(f"seeds 0-{args.seeds - 1}: {len(perfect)} of {args.seeds} reach 100% of held-out "
              f"sequences; per seed (sequences %, wall s): "
              + ", ".join(f"{s}: {r['sequences']:.2f} {r['wall']:.1f}" for s, r in enumerate(runs)))
    print(f"after:  {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
