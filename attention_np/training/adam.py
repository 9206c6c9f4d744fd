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

from attention_np._checks import check_count, check_instance, check_number, check_params_dict


@dataclass
class AdamState:
    """Moment estimates ``m`` and ``v`` (dicts keyed like the params) and the step count ``t``."""

    m: dict = field(default_factory=dict)
    v: dict = field(default_factory=dict)
    t: int = 0

    def __setattr__(self, name, value):
        # the step count is checked whenever it is set: a wrong t gives wrong bias corrections
        if name == "t":
            value = check_count(value, "AdamState.t", minimum=0)
        elif name in ("m", "v"):
            check_params_dict(value, f"AdamState.{name}", maker="adam_init")
        object.__setattr__(self, name, value)


def adam_init(params: dict) -> AdamState:
    """Zero moments for every parameter array.

    Parameters
    ----------
    params : dict of float arrays
    """
    check_params_dict(params)
    return AdamState({k: np.zeros_like(p) for k, p in params.items()},
                     {k: np.zeros_like(p) for k, p in params.items()}, 0)


def _check_step(params, grads, state, *, lr, beta1, beta2, eps) -> None:
    check_params_dict(params)
    check_params_dict(grads, "grads", maker="the backward")
    check_instance(state, AdamState, "state", maker="adam_init makes one")
    check_number(lr, "lr", low=0, low_open=True)
    check_number(beta1, "beta1", low=0, high=1, high_open=True)
    check_number(beta2, "beta2", low=0, high=1, high_open=True)
    check_number(eps, "eps", low=0, low_open=True)
    check_count(state.t, "state.t", minimum=0)
    missing = sorted(set(params) - set(grads))
    if missing:
        raise ValueError(f"grads is missing {missing}, which params has")
    extra = sorted(set(grads) - set(params), key=str)
    if extra:
        raise ValueError(f"grads has {extra}, which params has not: the gradients of other params "
                         f"(expected the keys {sorted(params, key=str)})")
    for name, p in params.items():
        if not p.flags.writeable:
            raise ValueError(f"params[{name!r}] is read-only; adam_step updates params in place")
        for label, a in (("grads", grads[name]), ("state.m", state.m.get(name)),
                         ("state.v", state.v.get(name))):
            if a is None:
                raise ValueError(f"{label} has no {name!r}: make the state with adam_init(params)")
            if a.shape != p.shape:
                raise ValueError(f"{label}[{name!r}] has shape {a.shape} but params[{name!r}] has "
                                 f"shape {p.shape}")
            if a.dtype != p.dtype:
                raise TypeError(f"{label}[{name!r}] has dtype {a.dtype} but params[{name!r}] has "
                                f"dtype {p.dtype}")
        for label, a in (("state.m", state.m[name]), ("state.v", state.v[name])):
            if not a.flags.writeable:
                raise ValueError(f"{label}[{name!r}] is read-only; adam_step updates it in place")


def adam_step(params: dict, grads: dict, state: AdamState, *, lr: float, beta1: float = 0.9,
              beta2: float = 0.98, eps: float = 1e-9) -> None:
    """One Adam update of every array in ``params``, in place (defaults: the paper's, §5.3).

    Every argument is checked before anything changes: ``lr > 0``, ``beta1`` and ``beta2`` in
    ``[0, 1)``, ``eps > 0`` (finite), and each gradient and moment has its parameter's shape and
    dtype, so a refused call leaves ``params`` and ``state`` (``state.t`` too) as they were.

    Parameters
    ----------
    params : dict of float arrays, updated in place
    grads : dict of float arrays
        One per parameter (no other keys), of its shape and dtype.
    state : AdamState from :func:`adam_init`, updated in place
    lr : float > 0
    beta1, beta2 : float in [0, 1)
    eps : float > 0
    """
    _check_step(params, grads, state, lr=lr, beta1=beta1, beta2=beta2, eps=eps)
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

    Parameters
    ----------
    step : int >= 1
        The optimizer step, counting from 1.
    d_model : int
    warmup : int
    factor : float > 0
        Multiplies the whole schedule.
    """
    step = check_count(step, "step")
    check_count(d_model, "d_model")
    check_count(warmup, "warmup")
    check_number(factor, "factor", low=0, low_open=True)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def cooldown_lr(step: int, steps: int, cooldown: int, d_model: int, warmup: int,
                factor: float = 1.0) -> float:
    """Eq. (3)'s rate, times ``(steps - step + 1) / cooldown`` over the last ``cooldown`` steps.

    Eq. (3) still takes large steps at the end of a short run, and the held-out accuracy
    jumps by a few percent from one evaluation to the next (the dates task, and the reversal
    task: ``docs/training.md``); letting the rate fall to 0 over the last steps settles it (the
    last step's rate is ``1 / cooldown`` of Eq. (3)'s). ``cooldown=0``: Eq. (3) alone.

    Parameters
    ----------
    step : int
        The optimizer step, from 1 to ``steps``.
    steps : int
        The run's last step.
    cooldown : int >= 0
        Steps over which the rate falls to 0 (0: none), at most ``steps``.
    d_model, warmup : int
    factor : float > 0
    """
    steps = check_count(steps, "steps")
    check_count(step, "step", maximum=steps)
    check_count(cooldown, "cooldown", minimum=0, maximum=steps)
    rate = transformer_lr(step, d_model, warmup, factor)
    if cooldown:
        rate *= min(1.0, (steps - step + 1) / cooldown)
    return rate
