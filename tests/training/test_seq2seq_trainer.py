"""The dates trainer's options: float32, the cool-down schedule, the held-out curve."""

import numpy as np
import pytest

from attention_np.training.adam import transformer_lr
from attention_np.training.dates import DatesTask
from attention_np.training.seq2seq_trainer import cooldown_lr, dates_config, train_seq2seq

TINY = dict(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1)


def test_cooldown_is_eq3_then_a_linear_fall():
    steps, cooldown, d, warmup = 100, 40, 64, 10
    rates = np.array([cooldown_lr(s, steps, cooldown, d, warmup) for s in range(1, steps + 1)])
    eq3 = np.array([transformer_lr(s, d, warmup) for s in range(1, steps + 1)])
    assert np.array_equal(rates[:60], eq3[:60])                # untouched before the last 40
    ratio = rates[60:] / eq3[60:]                              # 40/40, 39/40, ..., 1/40
    np.testing.assert_allclose(ratio, np.arange(40, 0, -1) / 40, rtol=1e-15)
    assert [cooldown_lr(s, steps, 0, d, warmup) for s in (1, 50, 100)] == \
        [transformer_lr(s, d, warmup) for s in (1, 50, 100)]


def test_float32_training_stays_float32_and_is_deterministic():
    task = DatesTask(heldout_size=20)
    kw = dict(config=dates_config(**TINY), task=task, steps=3, batch_size=4, warmup=2,
              cooldown=2, dtype=np.float32, seed=3)
    a, b = train_seq2seq(**kw), train_seq2seq(**kw)
    assert all(p.dtype == np.float32 for p in a.params.values())
    assert np.array_equal(a.losses, b.losses) and a.exact_match == b.exact_match
    f64 = train_seq2seq(**{**kw, "dtype": np.float64})
    assert not np.array_equal(a.losses, f64.losses)            # the float32 run really is float32
    np.testing.assert_allclose(a.losses, f64.losses, rtol=1e-3)  # the same draws, rounded
    assert a.train_seconds > 0 and a.eval_seconds > 0


def test_curve_every_n_steps_and_steps_to_target():
    task = DatesTask(heldout_size=20)
    r = train_seq2seq(config=dates_config(**TINY), task=task, steps=5, batch_size=4, warmup=2,
                      eval_every=2)
    assert [s for s, _ in r.curve] == [2, 4, 5]
    assert r.curve[-1][1] == r.exact_match
    assert all(0.0 <= acc <= 1.0 for _, acc in r.curve)
    r.curve = [(2, 0.5), (4, 0.995), (5, 0.98)]
    assert r.steps_to(0.99) == 4 and r.steps_to(0.999) is None and r.steps_to(0.0) == 2


@pytest.mark.parametrize("bad", [dict(dtype=np.float16), dict(dtype="int64"),
                                 dict(eval_every=0), dict(eval_every=1.5)])
def test_bad_options_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
        train_seq2seq(config=dates_config(**TINY), task=DatesTask(heldout_size=5), steps=1,
                      batch_size=2, **bad)
