r"""Adam (Kingma & Ba, 2015) and the learning-rate schedule of §5.3, Eq. (3).

The paper trains with :math:`\beta_1 = 0.9, \beta_2 = 0.98, \epsilon = 10^{-9}` and

.. math:: lrate = d_{model}^{-0.5} \cdot \min(step^{-0.5},\ step \cdot warmup^{-1.5})

Adam keeps, for every parameter, running means of the gradient (``m``) and of its square
(``v``); the step is ``m̂ / (sqrt(v̂) + eps)`` where the hats undo the bias of starting at 0.
It is the same update as ``torch.optim.Adam`` (no weight decay, no amsgrad).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class AdamState:
    """Moment estimates ``m`` and ``v`` (dicts keyed like the params) and the step count ``t``."""

    m: dict = field(default_factory=dict)
    v: dict = field(default_factory=dict)
    t: int = 0


def adam_init(params: dict) -> AdamState:
    """Zero moments for every parameter array."""
    return AdamState({k: np.zeros_like(p) for k, p in params.items()},
                     {k: np.zeros_like(p) for k, p in params.items()}, 0)


def adam_step(params: dict, grads: dict, state: AdamState, *, lr: float, beta1: float = 0.9,
              beta2: float = 0.98, eps: float = 1e-9) -> None:
    """One Adam update of every array in ``params``, in place (defaults: the paper's, §5.3)."""
    missing = set(params) - set(grads)
    if missing:
        raise ValueError(f"grads is missing {sorted(missing)}")
    state.t += 1
    t = state.t
    bias1 = 1.0 - beta1 ** t            # m starts at 0, so early m underestimates E[g] by this
    bias2 = 1.0 - beta2 ** t
    for name, p in params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m *= beta1
        m += (1.0 - beta1) * g                                  # m = b1 m + (1 - b1) g
        v *= beta2
        v += (1.0 - beta2) * (g * g)                            # v = b2 v + (1 - b2) g²
        p -= (lr / bias1) * m / (np.sqrt(v) / np.sqrt(bias2) + eps)


def transformer_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    """Eq. (3): linear warm-up for ``warmup`` steps, then decay as ``1/sqrt(step)``.

    ``step`` counts from 1; ``factor`` multiplies the whole schedule.
    """
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def cooldown_lr(step: int, steps: int, cooldown: int, d_model: int, warmup: int,
                factor: float = 1.0) -> float:
    """Eq. (3)'s rate, times ``(steps - step + 1) / cooldown`` over the last ``cooldown`` steps.

    Eq. (3) still takes large steps at the end of a short run, and the held-out accuracy
    jumps by a few percent from one evaluation to the next (the dates task, and the reversal
    task: ``docs/training.md``); letting the rate fall to 0 over the last steps settles it (the
    last step's rate is ``1 / cooldown`` of Eq. (3)'s). ``cooldown=0``: Eq. (3) alone.
    """
    rate = transformer_lr(step, d_model, warmup, factor)
    if cooldown:
        rate *= min(1.0, (steps - step + 1) / cooldown)
    return rate
