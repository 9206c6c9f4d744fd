"""Training the encoder-decoder on the dates task: teacher forcing, label-smoothed
cross-entropy (§5.4), Adam with the schedule of Eq. (3); held-out exact match by greedy decoding.

Seeded throughout (initial params, batches, held-out set): a seed gives the same losses and the
same accuracy on every run on the same machine and BLAS build.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.nn.adam import adam_init, adam_step, transformer_lr
from attention_np.nn.dates import BOS, ISO_LEN, DateBatch, DatesTask, decode_ids
from attention_np.nn.decoding import greedy_decode
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_backward, seq2seq_forward


def dates_config(**overrides) -> Seq2SeqConfig:
    """The default model of ``train --task dates``: shared embeddings, tied output (§3.4)."""
    vocab = DatesTask().vocab_size
    base = dict(src_vocab=vocab, tgt_vocab=vocab, max_src_len=32, max_tgt_len=ISO_LEN + 1,
                d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, num_decoder_layers=2,
                share_embeddings=True, tie_output=True)
    return Seq2SeqConfig(**{**base, **overrides})


@dataclass
class Seq2SeqResult:
    """``params``, ``config``, ``losses`` (steps,), held-out ``exact_match`` (fraction of dates
    decoded exactly, greedy), ``heldout_size``, and ``examples`` [(text, iso, decoded)]."""

    params: dict
    config: Seq2SeqConfig
    losses: np.ndarray
    exact_match: float
    heldout_size: int
    examples: list


def decode_texts(params, config, batch: DateBatch, *, chunk: int = 500) -> list[str]:
    """Greedy-decode every source of ``batch`` to a string (cached decoder, chunks bound memory)."""
    out = []
    for s in range(0, len(batch.src), chunk):
        tokens, _ = greedy_decode(params, config, batch.src[s:s + chunk],
                                  batch.src_mask[s:s + chunk], bos=BOS, steps=ISO_LEN + 1)
        out += [decode_ids(row) for row in tokens]
    return out


def exact_match(params, config, batch: DateBatch) -> tuple[float, list[str]]:
    decoded = decode_texts(params, config, batch)
    return float(np.mean([d == t for d, t in zip(decoded, batch.isos, strict=True)])), decoded


def train_seq2seq(*, config: Seq2SeqConfig | None = None, task: DatesTask | None = None,
                  steps: int = 1600, batch_size: int = 64, warmup: int = 200,
                  lr_factor: float = 1.0, label_smoothing: float = 0.1, seed: int = 0,
                  on_step=None) -> Seq2SeqResult:
    """Train with teacher forcing; return the params and the held-out exact match.

    Parameters
    ----------
    config : default :func:`dates_config`
    task : default ``DatesTask()`` (1000 held-out dates)
    steps, batch_size, warmup, lr_factor : Adam steps, dates per step, Eq. (3)'s schedule times
        ``lr_factor``
    label_smoothing : §5.4's eps (0.1)
    seed : seeds the params and the batches
    on_step : callable ``on_step(step, loss)``
    """
    config = config or dates_config()
    task = task or DatesTask()
    rng = np.random.default_rng(seed)
    params = init_seq2seq(config, rng=rng)
    state = adam_init(params)
    losses = np.empty(steps)
    for step in range(1, steps + 1):
        b = task.train_batch(rng, batch_size)
        logits, cache = seq2seq_forward(params, b.src, b.tgt_in, config, src_mask=b.src_mask,
                                        rng=rng)
        losses[step - 1], ce = cross_entropy_forward(logits, b.tgt_out,
                                                     label_smoothing=label_smoothing)
        grads = seq2seq_backward(cross_entropy_backward(1.0, ce), cache)
        adam_step(params, grads, state, lr=lr_factor * transformer_lr(step, config.d_model, warmup))
        if on_step is not None:
            on_step(step, losses[step - 1])
    held = task.heldout()
    acc, decoded = exact_match(params, config, held)
    examples = list(zip(held.texts, held.isos, decoded, strict=True))
    return Seq2SeqResult(params, config, losses, acc, len(held.texts), examples)


__all__ = ["dates_config", "train_seq2seq", "Seq2SeqResult", "exact_match", "decode_texts"]
