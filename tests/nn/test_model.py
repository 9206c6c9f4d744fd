"""The encoder layer against torch.nn.TransformerEncoderLayer, the whole model against finite
differences, and the reversal task's held-out set."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np import gradcheck
from attention_np.nn import ModelConfig, init_model, model_backward, model_forward
from attention_np.nn.encoder import encoder_layer_backward, encoder_layer_forward, sub
from attention_np.training import ReversalTask
from tests.helpers import max_abs_diff, randn, require


def _layer_params(rng, d, d_ff):
    cfg = ModelConfig(d_model=d, num_heads=2, d_ff=d_ff, num_layers=1)
    p = sub(init_model(cfg, rng=rng), "layers.0")
    # Non-trivial biases and norms, so that a dropped term would show.
    return {k: v + 0.1 * randn(rng, *v.shape) for k, v in p.items()}


def test_encoder_layer_backward_matches_finite_differences(rng):
    x = randn(rng, 2, 3, 4)
    mask = np.array([[True, True, False], [True, True, True]])[:, None, None, :]
    result = gradcheck(lambda x, p: encoder_layer_forward(x, p, num_heads=2, mask=mask),
                       lambda dy, c: encoder_layer_backward(dy, c), (x, _layer_params(rng, 4, 6)))
    assert result.ok, str(result)


def test_encoder_layer_matches_torch_transformer_encoder_layer(rng):
    torch = require("torch")
    d, h, d_ff = 8, 2, 16
    p = _layer_params(rng, d, d_ff)
    x, dy = randn(rng, 3, 5, d), randn(rng, 3, 5, d)
    y, cache = encoder_layer_forward(x, p, num_heads=h)
    dx, grads = encoder_layer_backward(dy, cache)

    layer = torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True,
                                             norm_first=False, dtype=torch.float64)
    T = torch.tensor
    mapping = {  # torch name -> ours (nn.Linear weights are (out, in): W.T)
        "self_attn.in_proj_weight": np.concatenate([p["attn.W_q"].T, p["attn.W_k"].T, p["attn.W_v"].T]),
        "self_attn.in_proj_bias": np.concatenate([p["attn.b_q"], p["attn.b_k"], p["attn.b_v"]]),
        "self_attn.out_proj.weight": p["attn.W_o"].T, "self_attn.out_proj.bias": p["attn.b_o"],
        "linear1.weight": p["ffn.W_1"].T, "linear1.bias": p["ffn.b_1"],
        "linear2.weight": p["ffn.W_2"].T, "linear2.bias": p["ffn.b_2"],
        "norm1.weight": p["ln1.gamma"], "norm1.bias": p["ln1.beta"],
        "norm2.weight": p["ln2.gamma"], "norm2.bias": p["ln2.beta"],
    }
    layer.load_state_dict({k: T(v) for k, v in mapping.items()})
    tx = T(x, requires_grad=True)
    ty = layer(tx)
    ty.backward(T(dy))
    named = dict(layer.named_parameters())
    assert max_abs_diff(y, ty.detach()) < 1e-13
    assert max_abs_diff(dx, tx.grad) < 1e-12
    assert max_abs_diff(grads["ffn.W_1"].T, named["linear1.weight"].grad) < 1e-12
    assert max_abs_diff(grads["ln1.gamma"], named["norm1.weight"].grad) < 1e-12
    in_proj = np.concatenate([grads["attn.W_q"].T, grads["attn.W_k"].T, grads["attn.W_v"].T])
    assert max_abs_diff(in_proj, named["self_attn.in_proj_weight"].grad) < 1e-12


def test_whole_model_backward_matches_finite_differences(rng):
    cfg = ModelConfig(vocab_size=5, max_len=4, d_model=4, num_heads=2, d_ff=6, num_layers=2)
    params = {k: v + 0.05 * randn(rng, *v.shape) for k, v in init_model(cfg, rng=0).items()}
    tokens = np.array([[0, 3, 3, 1], [4, 2, 0, 1]])
    result = gradcheck(lambda p: model_forward(p, tokens, cfg),
                       lambda dlogits, c: (model_backward(dlogits, c),), (params,))
    assert result.ok, str(result)


def test_model_output_depends_on_order_only_through_positional_encoding(monkeypatch):
    # With §3.5, reversing the input changes the prediction at a position; without it the
    # model is permutation-equivariant: the reversed input gives the reversed logits.
    cfg = ModelConfig(max_len=6)
    params = init_model(cfg, rng=1)
    tokens = np.array([[1, 2, 3, 4, 5, 6]])
    logits, _ = model_forward(params, tokens, cfg)
    logits_rev, _ = model_forward(params, tokens[:, ::-1], cfg)
    assert max_abs_diff(logits[:, ::-1], logits_rev) > 1e-3

    import attention_np.nn.model as model_module

    monkeypatch.setattr(model_module, "sinusoidal_encoding",
                        lambda L, d_model, dtype: np.zeros((L, d_model), dtype))
    logits, _ = model_forward(params, tokens, cfg)
    logits_rev, _ = model_forward(params, tokens[:, ::-1], cfg)
    np.testing.assert_allclose(logits_rev, logits[:, ::-1], rtol=0, atol=1e-12)


def test_reversal_heldout_sequences_never_appear_in_training_batches():
    task = ReversalTask(length=3, vocab_size=4)            # only 64 sequences: collisions certain
    held, held_targets = task.heldout(n=20, seed=1)
    assert len(np.unique(task.ids(held))) == 20
    np.testing.assert_array_equal(held_targets, held[:, ::-1])
    tokens, targets = task.train_batch(np.random.default_rng(0), 500, task.ids(held))
    assert 0 < len(tokens) < 500
    assert not np.isin(task.ids(tokens), task.ids(held)).any()
    np.testing.assert_array_equal(targets, tokens[:, ::-1])


def test_reversal_train_batch_drops_the_same_sequences_for_sorted_and_unsorted_ids():
    """train_batch searches the held-out ids by bisection (sorting them unless they are sorted):
    it drops exactly what np.isin drops, whatever their order."""
    task = ReversalTask(length=3, vocab_size=4)
    held, _ = task.heldout(n=20, seed=1)
    ids = task.ids(held)
    assert np.any(np.diff(ids) < 0)                        # the test needs unsorted ids
    batches = [task.train_batch(np.random.default_rng(0), 500, x)[0]
               for x in (ids, np.sort(ids), np.sort(ids)[::-1])]
    for b in batches[1:]:
        np.testing.assert_array_equal(b, batches[0])
    drawn, _ = task.sample(np.random.default_rng(0), 500)   # the same draws, filtered by np.isin
    np.testing.assert_array_equal(batches[0], drawn[~np.isin(task.ids(drawn), ids)])
    assert len(task.train_batch(np.random.default_rng(0), 50, np.array([], np.int64))[0]) == 50


def test_reversal_heldout_is_a_tenth_of_a_small_sequence_space_and_batches_keep_the_rest():
    task = ReversalTask(length=3)                          # 1000 sequences
    held, _ = task.heldout()
    assert len(held) == 100 == len(np.unique(task.ids(held)))
    assert len(ReversalTask().heldout()[0]) == 2000        # the default task is unchanged
    kept = [len(task.train_batch(np.random.default_rng(s), 64, task.ids(held))[0])
            for s in range(5)]
    assert min(kept) >= 48                                 # ~90% of 64, not ~1


def test_reversal_task_refuses_lengths_whose_ids_overflow_int64():
    task = ReversalTask(length=18)                         # 10**18 - 1 fits an int64
    assert task.ids(np.full((1, 18), 9))[0] == 10 ** 18 - 1
    with pytest.raises(ValueError, match="int64"):
        ReversalTask(length=19)                            # 10**19 - 1 does not
