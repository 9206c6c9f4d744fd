"""Adam and the schedule of Eq. (3), against torch.optim.Adam and the formula."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np.training import adam_init, adam_step, transformer_lr
from tests.helpers import max_abs_diff, randn, require


def test_adam_matches_torch_adam_over_many_steps(rng):
    torch = require("torch")
    params = {"a": randn(rng, 3, 4), "b": randn(rng, 5)}
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = torch.optim.Adam(list(tparams.values()), lr=0.01, betas=(0.9, 0.98), eps=1e-9)
    state = adam_init(params)
    for _ in range(20):
        grads = {k: randn(rng, *v.shape) for k, v in params.items()}
        for k, t in tparams.items():
            t.grad = torch.tensor(grads[k])
        opt.step()
        adam_step(params, grads, state, lr=0.01, beta1=0.9, beta2=0.98, eps=1e-9)
    for k in params:
        assert max_abs_diff(params[k], tparams[k].detach()) < 1e-13, k


def test_first_adam_step_moves_every_weight_by_lr_against_its_gradient_sign(rng):
    # With zero moments, m̂ = g and v̂ = g², so the first step is lr * sign(g) (eps aside).
    params = {"w": randn(rng, 10)}
    before = params["w"].copy()
    g = randn(rng, 10)
    adam_step(params, {"w": g}, adam_init(params), lr=0.1)
    np.testing.assert_allclose(before - params["w"], 0.1 * np.sign(g), rtol=1e-7)


def test_adam_rejects_missing_gradient(rng):
    params = {"w": randn(rng, 2), "b": randn(rng, 2)}
    with pytest.raises(ValueError, match=r"grads is missing \['b'\]"):
        adam_step(params, {"w": np.ones(2)}, adam_init(params), lr=0.1)


def test_transformer_lr_warms_up_linearly_then_decays_as_inverse_sqrt():
    d, warmup = 512, 4000
    peak = transformer_lr(warmup, d, warmup)
    assert peak == pytest.approx(d ** -0.5 * warmup ** -0.5)          # the two branches meet
    assert transformer_lr(warmup // 2, d, warmup) == pytest.approx(peak / 2)
    assert transformer_lr(4 * warmup, d, warmup) == pytest.approx(peak / 2)
