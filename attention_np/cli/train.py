"""``python -m attention_np train``: train a small Transformer encoder to reverse digits, in NumPy
(``--task reverse``, the default), or the paper's encoder-decoder to rewrite dates in ISO format
(``--task dates``).

Prints the loss as it goes (with a progress bar on stderr) and ends with the held-out
accuracy and the training time. Exits with status 1 if the held-out token accuracy is below
``--target``. Only NumPy is imported here.

The reversal run's defaults (below) were chosen on a validation set, not on the held-out
sequences the command reports (:mod:`attention_np.lessons.reversal_schedule`,
``docs/training.md``): float32, as frameworks train (about twice as fast as float64 here; the
float64 checks of every backward live in the tests), and Eq. (3) with a short warm-up and a
linear cool-down, which ends every seed of 0-9 at 100 % of the validation sequences where Eq. (3)
alone, even at 600 steps, left them jumping by a few percent from one evaluation to the next.
"""

from __future__ import annotations

import os
import time

import numpy as np

from attention_np._args import (
    check_heads,
    fraction,
    int_between,
    nonnegative_int,
    output_file,
    positive_float,
    positive_int,
    smoothing,
)
from attention_np.cli.progress import ProgressBar
from attention_np.cli.train_dates import (
    DATES_COOLDOWN,
    DATES_DTYPE,
    DATES_LR,
    DATES_STEPS,
    DATES_WARMUP,
    run_dates,
)
from attention_np.kernels.threads import blas_threads
from attention_np.nn.model import ModelConfig
from attention_np.training.tasks import ReversalTask
from attention_np.training.trainer import train

# The reversal run's defaults. notebooks/results/reversal_schedule.json (validation sequences, seeds
# 0-9): with warm-up 100 and a cool-down over the last half, 300 steps were the fewest at which every
# seed ended at 100 % of them; the default takes 400 for margin (another CPU rounds differently).
REVERSE_DTYPE = "float32"
REVERSE_STEPS = 400
REVERSE_BATCH = 64
REVERSE_WARMUP = 100
REVERSE_COOLDOWN = 200
REVERSE_LR = 1.0
# What a run can do on a laptop: 10**5 steps is about 12 minutes of the reversal run and hours of the
# dates run (benchmarks/train_reverse.py, train_dates.py); a batch of 4096 is 64 times the default.
MAX_STEPS = 100_000
MAX_BATCH = 4096
REVERSE_LENGTH = 10
DATES_LABEL_SMOOTHING = 0.1


def add_arguments(parser) -> None:
    parser.add_argument("--task", choices=("reverse", "dates"), default="reverse",
                        help="reverse digits with an encoder (default), or dates -> ISO with the "
                             "encoder-decoder")
    parser.add_argument("--length", type=int_between(2, 18), default=None,
                        help="reverse: digits per sequence, 2 to 18 (default 10; one digit is its own "
                             "reverse, and the held-out sequence's digit would never be trained on)")
    parser.add_argument("--steps", type=int_between(1, MAX_STEPS), default=None,
                        help=f"Adam steps, 1 to {MAX_STEPS} (default {REVERSE_STEPS} for reverse, "
                             f"{DATES_STEPS} for dates)")
    parser.add_argument("--batch-size", type=int_between(1, MAX_BATCH), default=None,
                        help=f"sequences per step, 1 to {MAX_BATCH} (default 64)")
    parser.add_argument("--layers", type=positive_int, default=2, help="encoder layers (default 2)")
    parser.add_argument("--heads", type=positive_int, default=4, help="attention heads (default 4)")
    parser.add_argument("--d-model", type=positive_int, default=64, help="model width (default 64)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the params and batches")
    parser.add_argument("--target", type=fraction, default=0.99,
                        help="exit 1 if held-out token accuracy (dates: exact match) is below this "
                             "(default 0.99)")
    parser.add_argument("--blas-threads", type=nonnegative_int, default=1,
                        help="BLAS threads; 1 is fastest for these tiny matrices (0: leave as is)")
    parser.add_argument("--label-smoothing", type=smoothing, default=None,
                        help=f"dates: label smoothing eps of §5.4 (default {DATES_LABEL_SMOOTHING})")
    parser.add_argument("--save", type=output_file(".npz"), default=None,
                        help="dates: save the trained params to this .npz file")
    parser.add_argument("--dtype", choices=("float32", "float64"), default=None,
                        help=f"the params' and activations' dtype "
                             f"({_default(REVERSE_DTYPE, DATES_DTYPE)}; a float64 step takes about 1.7x "
                             f"as long: benchmarks/train_reverse.py)")
    parser.add_argument("--warmup", type=positive_int, default=None,
                        help=f"Eq. (3)'s warm-up steps ({_default(REVERSE_WARMUP, DATES_WARMUP)})")
    parser.add_argument("--cooldown", type=nonnegative_int, default=None,
                        help=f"the rate falls linearly to 0 over the last this many steps "
                             f"({_default(REVERSE_COOLDOWN, DATES_COOLDOWN)}; 0: Eq. (3) alone)")
    parser.add_argument("--lr-factor", type=positive_float, default=None,
                        help=f"multiplies Eq. (3)'s rate ({_default(REVERSE_LR, DATES_LR)})")


def _default(reverse, dates) -> str:
    """The help text's default of a flag both tasks read."""
    return f"default {reverse}" if reverse == dates else f"default {reverse} for reverse, {dates} for dates"


def check_args(parser, args) -> None:
    """The checks that need two arguments, before any work (``parser.error`` exits with 2)."""
    if args.d_model % 2:
        parser.error(f"argument --d-model: got {args.d_model}, expected an even number (the "
                     f"positional encoding of §3.5 pairs sines and cosines)")
    check_heads(parser, args.d_model, args.heads)
    if args.save is not None and args.task != "dates":
        parser.error(f"argument --save: got {args.save!r} with --task {args.task}, expected "
                     f"--task dates (only the dates model is saved)")
    if args.save is not None:        # the path is written after training: try it now
        probe = f"{args.save}.partial.npz"
        try:
            open(probe, "wb").close()
            os.remove(probe)
        except OSError as e:
            parser.error(f"argument --save: got {args.save!r}, which cannot be written "
                         f"({e.strerror}); expected a writable .npz path")
    steps = args.steps if args.steps is not None else (DATES_STEPS if args.task == "dates" else REVERSE_STEPS)
    if args.cooldown is not None and args.cooldown > steps:
        parser.error(f"argument --cooldown: got {args.cooldown} with {steps} steps, expected at most "
                     f"the number of steps (the rate falls to 0 over the last --cooldown steps)")
    if args.task == "dates" and args.length is not None:
        parser.error(f"argument --length: got {args.length} with --task dates, expected "
                     f"--task reverse (the dates task has its own lengths)")
    if args.task != "dates" and args.label_smoothing is not None:
        parser.error(f"argument --label-smoothing: got {args.label_smoothing} with --task {args.task}, "
                     f"expected --task dates (the reversal model is trained without smoothing)")
    if args.length is None:
        args.length = REVERSE_LENGTH
    if args.label_smoothing is None:
        args.label_smoothing = DATES_LABEL_SMOOTHING


def run(args) -> int:
    if args.task == "dates":
        return run_dates(args)
    for name, default in (("steps", REVERSE_STEPS), ("batch_size", REVERSE_BATCH),
                          ("dtype", REVERSE_DTYPE), ("warmup", REVERSE_WARMUP),
                          ("cooldown", REVERSE_COOLDOWN), ("lr_factor", REVERSE_LR)):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.cooldown = min(args.cooldown, args.steps)   # the default's cool-down, in a shorter run: all of it
    return run_reverse(args)


def run_reverse(args) -> int:
    config = ModelConfig(max_len=args.length, d_model=args.d_model, num_heads=args.heads,
                         d_ff=2 * args.d_model, num_layers=args.layers)
    task = ReversalTask(length=args.length, vocab_size=config.vocab_size)
    print(f"Training a {args.layers}-layer, {args.heads}-head encoder (d_model={args.d_model}) "
          f"to reverse {args.length} digits: {args.steps} steps of {args.batch_size} sequences "
          f"({args.dtype}, warm-up {args.warmup}, cool-down {args.cooldown}), "
          f"seed {args.seed}")
    bar = ProgressBar(args.steps)
    log_every = max(args.steps // 10, 1)

    def on_step(step, loss):
        if step % log_every == 0 or step == 1:
            bar.log(f"step {step:5d}  loss {loss:.5f}")
        bar.update(step, loss)

    wall, cpu = time.perf_counter(), time.process_time()
    with blas_threads(args.blas_threads or None):
        result = train(config=config, task=task, steps=args.steps, batch_size=args.batch_size,
                       warmup=args.warmup, cooldown=args.cooldown,
                       lr_factor=args.lr_factor, seed=args.seed, on_step=on_step,
                       dtype=np.dtype(args.dtype))
    bar.close()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"held-out accuracy: {100 * result.accuracy:.2f}% of tokens, "
          f"{100 * result.sequence_accuracy:.2f}% of sequences exactly reversed "
          f"({result.heldout_size} sequences never seen in training); trained in {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU")
    return 0 if result.accuracy >= args.target else 1
