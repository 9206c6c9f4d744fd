"""Claim 6's model: multi-head attention with a pluggable scoring function, and the encoder
built on it. Backward checked by central differences (float64) and against torch autograd."""

from __future__ import annotations

import numpy as np
import pytest

import attention_np as an
from attention_np.studies import scoring_attention as sa
from attention_np.studies import scoring_in_model as sim
from attention_np.studies import scoring_model as sm
from tests.helpers import require


def _mha(scoring, x, params, num_heads=2):
    return sa.scoring_mha_forward(x, params, num_heads=num_heads, scoring=scoring)


@pytest.mark.parametrize("scoring", sa.SCORINGS)
def test_attention_layer_backward_matches_finite_differences(scoring, rng):
    params = sa.init_scoring_mha_params(6, 2, 5, scoring, rng=rng)      # d_k = 5 != d_model / h
    x = rng.standard_normal((3, 4, 6))
    result = an.gradcheck(lambda x, p: _mha(scoring, x, p), sa.scoring_mha_backward,
                          (x, params), names=("x", "params"))
    assert result.ok, str(result)


@pytest.mark.parametrize("scoring", sa.SCORINGS)
def test_model_backward_matches_finite_differences(scoring, rng):
    config = sm.ScoringConfig(scoring=scoring, d_k=3, d_model=8, num_heads=2, d_ff=6,
                              vocab_size=4, max_len=5)
    params = sm.init_scoring_model(config, rng=rng)
    tokens = rng.integers(0, 4, (2, 5))
    result = an.gradcheck(lambda p: sm.scoring_model_forward(p, tokens, config),
                          lambda d, cache: (sm.scoring_model_backward(d, cache),), (params,),
                          names=("params",))
    assert result.ok, str(result)


def _torch_layer(torch, scoring, x, params, num_heads):
    """The same layer written with torch ops (float64), for autograd to differentiate."""
    t = {n: torch.tensor(a, requires_grad=True) for n, a in {"x": x, **params}.items()}
    B, L, _ = x.shape

    def heads(y):                                           # (B, L, h*d) -> (B, h, L, d)
        return y.reshape(B, L, num_heads, -1).transpose(1, 2)

    q, k, v = heads(t["x"] @ t["W_q"]), heads(t["x"] @ t["W_k"]), heads(t["x"] @ t["W_v"])
    if scoring == "additive":
        hidden = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))         # (B, h, L, S, d_k)
        scores = torch.einsum("bhlsd,hd->bhls", hidden, t["w_a"])
    else:
        scores = q @ k.transpose(-1, -2)
        if scoring == "scaled":
            scores = scores / q.shape[-1] ** 0.5
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, L, -1) @ t["W_o"]
    return t, out


@pytest.mark.parametrize("scoring", sa.SCORINGS)
def test_attention_layer_matches_torch_autograd_with_random_upstream_gradient(scoring, rng):
    torch = require("torch")
    params = sa.init_scoring_mha_params(8, 2, 7, scoring, rng=rng)
    x = rng.standard_normal((3, 5, 8))
    out, cache = _mha(scoring, x, params)
    dout = rng.standard_normal(out.shape)
    dx, grads = sa.scoring_mha_backward(dout, cache)
    t, t_out = _torch_layer(torch, scoring, x, params, 2)
    t_out.backward(torch.tensor(dout))
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dx, t["x"].grad.numpy(), rtol=1e-11, atol=1e-12)
    assert sorted(grads) == sorted(params)
    for name in params:
        np.testing.assert_allclose(grads[name], t[name].grad.numpy(), rtol=1e-11, atol=1e-12,
                                   err_msg=name)


def test_scaled_scores_are_unscaled_over_sqrt_d_k(rng):
    q, k = rng.standard_normal((2, 2, 3, 4, 9))
    scaled, _ = sa.scores_forward("scaled", q, k)
    unscaled, _ = sa.scores_forward("unscaled", q, k)
    np.testing.assert_allclose(scaled * 3.0, unscaled, rtol=1e-13)   # sqrt(9) = 3


def test_additive_score_is_w_a_dot_tanh_of_q_plus_k(rng):
    q, k = rng.standard_normal((2, 1, 2, 3, 4))                      # (B, h, L, d_k)
    w_a = rng.standard_normal((2, 4))
    scores, _ = sa.scores_forward("additive", q, k, w_a)
    b, h, i, j = 0, 1, 2, 0                                          # one entry, by hand
    assert scores[b, h, i, j] == pytest.approx(w_a[h] @ np.tanh(q[b, h, i] + k[b, h, j]))


@pytest.mark.parametrize("d_k", [4, 256])
def test_init_gives_q_components_of_unit_variance_whatever_d_k(d_k):
    # footnote 4's assumption, which the sweep needs to hold at every d_k
    params = sa.init_scoring_mha_params(64, 2, d_k, "scaled", rng=0)
    x = np.random.default_rng(1).standard_normal((4000, 64))
    assert np.var(x @ params["W_q"]) == pytest.approx(1.0, rel=0.1)


def test_models_differ_only_in_the_scoring_parameters():
    by = {s: sm.init_scoring_model(sm.ScoringConfig(scoring=s, d_k=8), rng=0)
          for s in sa.SCORINGS}
    assert set(by["additive"]) - set(by["scaled"]) == {"layers.0.attn.w_a", "layers.1.attn.w_a"}
    assert set(by["scaled"]) == set(by["unscaled"])
    for name, p in by["scaled"].items():         # same seed: the very same initial weights
        np.testing.assert_array_equal(p, by["unscaled"][name])


@pytest.mark.parametrize("bad, match", [
    (dict(scoring="cosine"), "scoring must be one of"),
    (dict(d_model=30, num_heads=4), "divisible by num_heads"),
])
def test_bad_config_is_refused_by_name(bad, match):
    kwargs = dict(d_model=32, num_heads=2, d_k=4, scoring="scaled") | bad
    with pytest.raises(ValueError, match=match):
        sa.init_scoring_mha_params(kwargs["d_model"], kwargs["num_heads"], kwargs["d_k"],
                                   kwargs["scoring"])


def test_scoring_config_refuses_an_unknown_scoring():
    with pytest.raises(ValueError, match="'dot'"):
        sm.ScoringConfig(scoring="dot")


def test_steps_to_uses_a_running_mean():
    curve = np.r_[np.zeros(10), 1.0, np.zeros(10), np.ones(30)]
    # the lone 1 at step 11 does not count; the mean of 4 reaches 1 at step 25 (1-based)
    assert sim.steps_to(curve, 1.0, window=4) == 25
    assert sim.steps_to(np.zeros(8), 1.0, window=4) is None


def test_peak_lr_rises_to_peak_at_warmup_then_decays_as_inverse_sqrt():
    assert sim.peak_lr(10, 1e-2, 40) == pytest.approx(2.5e-3)
    assert sim.peak_lr(40, 1e-2, 40) == pytest.approx(1e-2)
    assert sim.peak_lr(160, 1e-2, 40) == pytest.approx(5e-3)


def test_validation_and_test_splits_are_disjoint():
    val, test, ids = sim.splits(an.training.ReversalTask())
    val_ids, test_ids = an.training.ReversalTask().ids(val[0]), an.training.ReversalTask().ids(test[0])
    assert len(val_ids) == len(test_ids) == 1000
    assert not np.isin(val_ids, test_ids).any()
    assert np.isin(np.r_[val_ids, test_ids], ids).all()


@pytest.mark.parametrize("change, match", [
    (lambda x, p: (x[..., :5], p), "d_model=5"),
    (lambda x, p: (x, {k: v for k, v in p.items() if k != "w_a"}), "must have keys"),
    (lambda x, p: (x, p | {"w_a": p["w_a"][:, :2]}), "w_a"),
    (lambda x, p: (x.astype(int), p), "float array"),
])
def test_bad_inputs_are_refused_naming_the_argument(change, match, rng):
    params = sa.init_scoring_mha_params(6, 2, 4, "additive", rng=rng)
    x, p = change(rng.standard_normal((2, 3, 6)), params)
    with pytest.raises(ValueError, match=match):
        sa.scoring_mha_forward(x, p, num_heads=2, scoring="additive")
