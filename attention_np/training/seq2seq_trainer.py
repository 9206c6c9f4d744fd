"""Training the encoder-decoder on the dates task: teacher forcing, label-smoothed
cross-entropy (§5.4), Adam with the schedule of Eq. (3); held-out exact match by greedy decoding.

Seeded throughout (initial params, batches, held-out set): a seed gives the same losses and the
same accuracy on every run on the same machine and BLAS build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from attention_np._checks import check_count, check_instance, check_number, check_probability
from attention_np.nn.decoding import greedy_decode
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.seq2seq import (
    Seq2SeqConfig,
    check_model,
    init_seq2seq,
    seq2seq_backward,
    seq2seq_forward,
)
from attention_np.training.adam import adam_init, adam_step, cooldown_lr
from attention_np.training.dates import BOS, ISO_LEN, MAX_SRC_LEN, DateBatch, DatesTask, decode_ids
from attention_np.training.trainer import check_run


def dates_config(**overrides) -> Seq2SeqConfig:
    """The default model of ``train --task dates``: shared embeddings, tied output (§3.4)."""
    unknown = sorted(set(overrides) - set(Seq2SeqConfig.__dataclass_fields__))
    if unknown:
        raise TypeError(f"dates_config got unknown fields {unknown}; Seq2SeqConfig has "
                        f"{list(Seq2SeqConfig.__dataclass_fields__)}")
    vocab = DatesTask().vocab_size
    base = dict(src_vocab=vocab, tgt_vocab=vocab, max_src_len=32, max_tgt_len=ISO_LEN + 1,
                d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, num_decoder_layers=2,
                share_embeddings=True, tie_output=True)
    return Seq2SeqConfig(**{**base, **overrides})


@dataclass
class Seq2SeqResult:
    """``params``, ``config``, ``losses`` (steps,), held-out ``exact_match`` (fraction of dates
    decoded exactly, greedy), ``heldout_size``, ``examples`` [(text, iso, decoded)], the wall
    times of training and of the final evaluation in seconds, and ``curve``: ``[(step,
    exact_match)]`` every ``eval_every`` steps (empty without it)."""

    params: dict
    config: Seq2SeqConfig
    losses: np.ndarray
    exact_match: float
    heldout_size: int
    examples: list
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    curve: list = field(default_factory=list)

    def steps_to(self, target: float) -> int | None:
        """The first evaluated step whose held-out exact match is ``>= target`` (None: never)."""
        check_probability(target, "target")
        return next((step for step, acc in self.curve if acc >= target), None)


def decode_texts(params, config, batch: DateBatch, *, chunk: int = 500) -> list[str]:
    """Greedy-decode every source of ``batch`` to a string (cached decoder, chunks bound memory).

    Parameters
    ----------
    params : dict from :func:`attention_np.nn.init_seq2seq` for ``config``
    config : Seq2SeqConfig
    batch : DateBatch
    chunk : int
        Sources decoded at a time.
    """
    check_model(params, config)
    check_instance(batch, DateBatch, "batch", maker="DatesTask.heldout or make_batch")
    check_count(chunk, "chunk")
    out = []
    for s in range(0, len(batch.src), chunk):
        tokens, _ = greedy_decode(params, config, batch.src[s:s + chunk],
                                  batch.src_mask[s:s + chunk], bos=BOS, steps=ISO_LEN + 1)
        out += [decode_ids(row) for row in tokens]
    return out


def exact_match(params, config, batch: DateBatch) -> tuple[float, list[str]]:
    """The fraction of ``batch``'s dates greedy-decoded exactly, and the decoded strings.

    Parameters
    ----------
    params : dict from :func:`attention_np.nn.init_seq2seq` for ``config``
    config : Seq2SeqConfig
    batch : DateBatch
    """
    decoded = decode_texts(params, config, batch)
    return float(np.mean([d == t for d, t in zip(decoded, batch.isos, strict=True)])), decoded


def train_seq2seq(*, config: Seq2SeqConfig | None = None, task: DatesTask | None = None,
                  steps: int = 1600, batch_size: int = 64, warmup: int = 200,
                  lr_factor: float = 1.0, cooldown: int = 0, label_smoothing: float = 0.1, seed: int = 0,
                  dtype=np.float64, eval_every: int | None = None,
                  on_step=None) -> Seq2SeqResult:
    """Train with teacher forcing; return the params and the held-out exact match.

    Parameters
    ----------
    config : Seq2SeqConfig, optional
        Default :func:`dates_config`.
    task : DatesTask, optional
        Default ``DatesTask()`` (1000 held-out dates).
    steps : int >= 0
        Adam steps (0: the initial params, evaluated).
    batch_size : int
        Dates per step.
    warmup : int
        Eq. (3)'s warm-up steps.
    lr_factor : float > 0
        Multiplies Eq. (3)'s rate.
    cooldown : over the last ``cooldown`` steps the rate also falls linearly to 0
        (:func:`cooldown_lr`); 0: Eq. (3) alone
    label_smoothing : §5.4's eps (0.1)
    seed : seeds the params and the batches
    dtype : float64 (exact) or float32 (about twice as fast; the same draws, rounded)
    eval_every : also measure the held-out exact match every this many steps (the ``curve``
        of the result; its time is not counted in ``train_seconds``)
    on_step : callable, optional
        ``on_step(step, loss)`` after every step.
    """
    dtype = check_run(steps=steps, batch_size=batch_size, warmup=warmup, lr_factor=lr_factor,
                      cooldown=cooldown, seed=seed, dtype=dtype, eval_every=eval_every, on_step=on_step)
    check_number(label_smoothing, "label_smoothing", low=0, high=1, high_open=True)
    config = check_instance(config, Seq2SeqConfig, "config", optional=True) or dates_config()
    task = check_instance(task, DatesTask, "task", optional=True) or DatesTask()
    if config.src_vocab < task.vocab_size or config.tgt_vocab < task.vocab_size:
        raise ValueError(f"config (src_vocab {config.src_vocab}, tgt_vocab {config.tgt_vocab}) does "
                         f"not fit the task's vocabulary of {task.vocab_size}")
    if config.max_src_len < MAX_SRC_LEN or config.max_tgt_len < ISO_LEN + 1:
        raise ValueError(f"config (max_src_len {config.max_src_len}, max_tgt_len {config.max_tgt_len}) "
                         f"does not fit the task's sources (up to {MAX_SRC_LEN}) and targets ({ISO_LEN + 1})")
    rng = np.random.default_rng(seed)
    params = init_seq2seq(config, rng=rng, dtype=dtype)
    state = adam_init(params)
    losses = np.empty(steps)
    held = task.heldout()
    curve, eval_time, start = [], 0.0, time.perf_counter()
    for step in range(1, steps + 1):
        b = task.train_batch(rng, batch_size)
        logits, cache = seq2seq_forward(params, b.src, b.tgt_in, config, src_mask=b.src_mask,
                                        rng=rng)
        losses[step - 1], ce = cross_entropy_forward(logits, b.tgt_out,
                                                     label_smoothing=label_smoothing)
        grads = seq2seq_backward(cross_entropy_backward(1.0, ce), cache)
        adam_step(params, grads, state,
                  lr=cooldown_lr(step, steps, cooldown, config.d_model, warmup, lr_factor))
        if on_step is not None:
            on_step(step, losses[step - 1])
        if eval_every and step % eval_every == 0 and step < steps:
            t0 = time.perf_counter()
            curve.append((step, exact_match(params, config, held)[0]))
            eval_time += time.perf_counter() - t0
    train_seconds = time.perf_counter() - start - eval_time
    t0 = time.perf_counter()
    acc, decoded = exact_match(params, config, held)
    eval_seconds = time.perf_counter() - t0
    if eval_every:
        curve.append((steps, acc))
    examples = list(zip(held.texts, held.isos, decoded, strict=True))
    return Seq2SeqResult(params, config, losses, acc, len(held.texts), examples,
                         train_seconds, eval_seconds, curve)


__all__ = ["dates_config", "train_seq2seq", "cooldown_lr", "Seq2SeqResult", "exact_match", "decode_texts"]
