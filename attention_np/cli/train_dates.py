"""``python -m attention_np train --task dates``: the paper's encoder-decoder learns to rewrite
dates in a dozen formats as ISO 8601, in NumPy.

Prints the loss (with a progress bar on stderr), a few decoded held-out examples, and ends with
the held-out exact-match accuracy (greedy decoding) and the wall time. Exits with status 1 if
the exact match is below ``--target``.
"""

from __future__ import annotations

import time

import numpy as np

from attention_np.cli.progress import ProgressBar
from attention_np.nn.dates import DatesTask
from attention_np.nn.seq2seq_trainer import dates_config, train_seq2seq
from attention_np.nn.threads import blas_threads

DATES_STEPS = 1600


def run_dates(args) -> int:
    steps = DATES_STEPS if args.steps is None else args.steps
    config = dates_config(d_model=args.d_model, num_heads=args.heads, d_ff=2 * args.d_model,
                          num_encoder_layers=args.layers, num_decoder_layers=args.layers)
    task = DatesTask()
    print(f"Training a {args.layers}+{args.layers}-layer, {args.heads}-head encoder-decoder "
          f"(d_model={args.d_model}, shared embeddings, tied output) to write dates in ISO "
          f"format: {steps} steps of {args.batch_size} dates, label smoothing "
          f"{args.label_smoothing}, seed {args.seed}")
    bar = ProgressBar(steps)
    log_every = max(steps // 10, 1)

    def on_step(step, loss):
        bar.update(step, loss)
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {loss:.5f}", flush=True)

    wall = time.perf_counter()
    with blas_threads(args.blas_threads or None):
        result = train_seq2seq(config=config, task=task, steps=steps, batch_size=args.batch_size,
                               label_smoothing=args.label_smoothing, seed=args.seed,
                               on_step=on_step)
    wall = time.perf_counter() - wall
    for text, iso, decoded in result.examples[:: max(len(result.examples) // 6, 1)][:6]:
        mark = "ok" if decoded == iso else "WRONG"
        print(f"  {text!r:32} -> {decoded!r}  ({mark}, expected {iso!r})")
    if args.save:
        np.savez_compressed(args.save, **result.params, losses=result.losses)
        print(f"saved params and losses to {args.save}")
    print(f"held-out exact match: {100 * result.exact_match:.2f}% of {result.heldout_size} dates "
          f"never seen in training (greedy decoding); trained in {wall:.1f} s wall")
    return 0 if result.exact_match >= args.target else 1
