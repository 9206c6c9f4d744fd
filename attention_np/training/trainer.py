"""The training loop: sample a batch, forward, loss, backward, Adam step; repeat.

Everything is seeded: the initial params, the batches and the held-out set, so a given seed
gives the same losses and the same accuracy on every run (on the same BLAS build).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention_np._checks import (
    check_callable,
    check_count,
    check_float_dtype,
    check_ids,
    check_instance,
    check_number,
    check_params_shapes,
    check_seed,
    check_tuple,
)
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.model import ModelConfig, init_model, model_backward, model_forward, model_param_shapes
from attention_np.training.adam import adam_init, adam_step, cooldown_lr
from attention_np.training.tasks import ReversalTask


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes
    ----------
    params : the trained params
    config : the ModelConfig
    losses : (steps,) the training loss of every step
    accuracy : fraction of held-out *tokens* predicted right
    sequence_accuracy : fraction of held-out *sequences* with every token right
    snapshots : {step: [per-layer (num_heads, L, L) attention weights on ``probe``]}
    probe : (L,) the sequence whose attention the snapshots record
    heldout_size : how many held-out sequences ``accuracy`` is measured on
    curve : ``[(step, token accuracy, sequence accuracy)]`` on the held-out set every
        ``eval_every`` steps and after the last (empty without ``eval_every``)
    """

    params: dict
    config: ModelConfig
    losses: np.ndarray
    accuracy: float
    sequence_accuracy: float
    snapshots: dict = field(default_factory=dict)
    probe: np.ndarray | None = None
    heldout_size: int = 0
    curve: list = field(default_factory=list)


def check_run(*, steps, batch_size, warmup, lr_factor, cooldown, seed, dtype, eval_every,
              on_step) -> np.dtype:
    """The arguments both trainers share, checked before any work; returns the dtype."""
    check_count(steps, "steps", minimum=0)       # 0: the initial params, evaluated
    check_count(batch_size, "batch_size")
    check_count(warmup, "warmup")
    check_number(lr_factor, "lr_factor", low=0, low_open=True)
    check_count(cooldown, "cooldown", minimum=0, maximum=steps)
    check_seed(seed)
    check_count(eval_every, "eval_every", optional=True)
    check_callable(on_step, "on_step", optional=True, what="a callable on_step(step, loss)", arity=2)
    dtype = check_float_dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be np.float32 or np.float64, got {dtype}")
    return dtype


def evaluate(params: dict, config: ModelConfig, tokens, targets, *, batch_size: int = 256):
    """``(token accuracy, sequence accuracy)`` of the argmax predictions.

    Parameters
    ----------
    params : dict from :func:`attention_np.nn.init_model` for ``config``
    config : ModelConfig
    tokens, targets : int array (N, L)
        Ids of ``config``'s vocabulary, ``N >= 1``.
    batch_size : int
        Sequences per forward pass (bounds the memory).
    """
    check_instance(config, ModelConfig, "config")
    check_params_shapes(params, model_param_shapes(config), against="config")
    tokens = check_ids(tokens, "tokens", config.vocab_size, ndim=2, layout="(N, L)")
    targets = check_ids(targets, "targets", config.vocab_size, ndim=2, layout="(N, L)")
    if targets.shape != tokens.shape or len(tokens) < 1:
        raise ValueError(f"targets {targets.shape} must have the shape of tokens {tokens.shape}, "
                         f"with at least one row")
    check_count(batch_size, "batch_size")
    right = []
    # batches bound the memory; small ones also run faster (2000 reversals: 1000 at a time took
    # 1.5x as long as 256 at a time, float32, one BLAS thread)
    for start in range(0, len(tokens), batch_size):
        logits, _ = model_forward(params, tokens[start:start + batch_size], config)
        right.append(logits.argmax(axis=-1) == targets[start:start + batch_size])
    right = np.concatenate(right)                       # (N, L) bool
    return float(right.mean()), float(right.all(axis=-1).mean())


def train(*, config: ModelConfig | None = None, task: ReversalTask | None = None,
          steps: int = 600, batch_size: int = 64, warmup: int = 200, lr_factor: float = 1.0,
          cooldown: int = 0, seed: int = 0, snapshot_at=(), on_step=None, dtype=np.float64,
          eval_every: int | None = None) -> TrainResult:
    """Train a :class:`ModelConfig` model on ``task`` with Adam and the schedule of Eq. (3).

    Parameters
    ----------
    config : ModelConfig, optional
        Default ``ModelConfig()``.
    task : ReversalTask, optional
        Default ``ReversalTask()`` of the config's length and vocabulary (10 digits).
    steps, batch_size : optimizer steps (>= 0; 0: the initial params, evaluated) and sequences
        per step (>= 1)
    warmup, lr_factor : the learning rate is ``lr_factor * transformer_lr(step, d_model, warmup)``
    cooldown : over the last ``cooldown`` steps the rate also falls linearly to 0
        (:func:`attention_np.training.adam.cooldown_lr`); 0: Eq. (3) alone
    seed : seeds the initial params and the batches
    snapshot_at : tuple of int
        Steps after which to record the attention weights on a probe sequence (step 0 = before
        training); a list or range is taken too.
    on_step : callable, optional
        ``on_step(step, loss)`` after every step, e.g. a progress bar.
    dtype : the params' float dtype (``np.float64``, or ``np.float32``, the dtype of
        ``python -m attention_np train``: about 1.7x faster a step on the reversal task, which it
        also learns to 100 %)
    eval_every : also measure the held-out accuracy every this many steps (``curve``); the
        batches and params are the same as without it, so (without a cool-down, which depends
        on ``steps``) step ``s`` of the curve is what a run of ``steps=s`` ends with

    Returns
    -------
    TrainResult
    """
    dtype = check_run(steps=steps, batch_size=batch_size, warmup=warmup, lr_factor=lr_factor,
                      cooldown=cooldown, seed=seed, dtype=dtype, eval_every=eval_every, on_step=on_step)
    config = check_instance(config, ModelConfig, "config", optional=True) or ModelConfig()
    task = (check_instance(task, ReversalTask, "task", optional=True)
            or ReversalTask(length=config.max_len, vocab_size=config.vocab_size))
    snapshot_at = check_tuple(snapshot_at, "snapshot_at", sequence=True, item=lambda s, name: check_count(
        s, name, minimum=0, maximum=steps))
    if task.length > config.max_len or task.vocab_size > config.vocab_size:
        raise ValueError(f"task (length {task.length}, vocab {task.vocab_size}) does not fit "
                         f"config (max_len {config.max_len}, vocab {config.vocab_size})")
    rng = np.random.default_rng(seed)
    params = init_model(config, rng=rng, dtype=dtype)
    state = adam_init(params)
    held_tokens, held_targets = task.heldout()
    held_ids = np.sort(task.ids(held_tokens))        # sorted once: train_batch searches it
    probe = held_tokens[0]
    snapshot_at = set(snapshot_at)
    snapshots = {}

    def snapshot(step):
        _, cache = model_forward(params, probe[None], config)
        snapshots[step] = [w[0].copy() for w in cache.attention_weights]

    if 0 in snapshot_at:
        snapshot(0)
    losses, curve = np.empty(steps), []
    for step in range(1, steps + 1):
        tokens, targets = task.train_batch(rng, batch_size, held_ids)
        logits, cache = model_forward(params, tokens, config)
        losses[step - 1], ce = cross_entropy_forward(logits, targets)
        grads = model_backward(cross_entropy_backward(1.0, ce), cache)
        lr = lr_factor * cooldown_lr(step, steps, cooldown, config.d_model, warmup)
        adam_step(params, grads, state, lr=lr)
        if step in snapshot_at:
            snapshot(step)
        if on_step is not None:
            on_step(step, losses[step - 1])
        if eval_every and step % eval_every == 0 and step < steps:
            curve.append((step, *evaluate(params, config, held_tokens, held_targets)))
    accuracy, sequence_accuracy = evaluate(params, config, held_tokens, held_targets)
    if eval_every:
        curve.append((steps, accuracy, sequence_accuracy))
    return TrainResult(params, config, losses, accuracy, sequence_accuracy, snapshots, probe,
                       heldout_size=len(held_tokens), curve=curve)
