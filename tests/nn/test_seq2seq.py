"""The decoder layer and the encoder-decoder model: finite differences (float64), and diffs
against torch.nn.TransformerDecoderLayer and torch.nn.Transformer with mapped weights; label
smoothing against torch.nn.CrossEntropyLoss."""

from __future__ import annotations

import numpy as np
import pytest

from attention_np import gradcheck
from attention_np.nn.decoder import (
    decoder_layer_backward,
    decoder_layer_forward,
    init_decoder_layer_params,
)
from attention_np.nn.encoder import sub
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.nn.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_backward, seq2seq_forward
from tests.helpers import max_abs_diff, randn, require


def _perturbed(params, rng, scale=0.1):
    # Non-trivial biases and norms, so that a dropped term would show.
    return {k: v + scale * randn(rng, *v.shape) for k, v in params.items()}


def _mha_torch(prefix, p):
    return {
        f"{prefix}.in_proj_weight": np.concatenate([p["W_q"].T, p["W_k"].T, p["W_v"].T]),
        f"{prefix}.in_proj_bias": np.concatenate([p["b_q"], p["b_k"], p["b_v"]]),
        f"{prefix}.out_proj.weight": p["W_o"].T, f"{prefix}.out_proj.bias": p["b_o"],
    }


def _decoder_torch(p):
    """Our decoder-layer params under torch.nn.TransformerDecoderLayer's names (Linear: W.T)."""
    m = {**_mha_torch("self_attn", sub(p, "self_attn")),
         **_mha_torch("multihead_attn", sub(p, "cross_attn")),
         "linear1.weight": p["ffn.W_1"].T, "linear1.bias": p["ffn.b_1"],
         "linear2.weight": p["ffn.W_2"].T, "linear2.bias": p["ffn.b_2"]}
    for n in (1, 2, 3):
        m[f"norm{n}.weight"], m[f"norm{n}.bias"] = p[f"ln{n}.gamma"], p[f"ln{n}.beta"]
    return m


def _encoder_torch(p):
    m = {**_mha_torch("self_attn", sub(p, "attn")),
         "linear1.weight": p["ffn.W_1"].T, "linear1.bias": p["ffn.b_1"],
         "linear2.weight": p["ffn.W_2"].T, "linear2.bias": p["ffn.b_2"]}
    for n in (1, 2):
        m[f"norm{n}.weight"], m[f"norm{n}.bias"] = p[f"ln{n}.gamma"], p[f"ln{n}.beta"]
    return m


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_decoder_layer_backward_matches_finite_differences(rng, dropout_p):
    y, memory = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4)
    mmask = np.array([[True] * 4 + [False], [True] * 5])[:, None, None, :]
    p = _perturbed(init_decoder_layer_params(4, 2, 6, rng=rng), rng)
    # rng=7 reseeds every call: the same dropout masks in each finite-difference evaluation
    result = gradcheck(
        lambda y, m, p: decoder_layer_forward(y, m, p, num_heads=2, memory_mask=mmask,
                                              dropout_p=dropout_p, rng=7),
        lambda dy, c: decoder_layer_backward(dy, c), (y, memory, p))
    assert result.ok, str(result)


def test_decoder_layer_matches_torch_transformer_decoder_layer(rng):
    torch = require("torch")
    d, h, d_ff, T, S = 8, 2, 16, 5, 7
    p = _perturbed(init_decoder_layer_params(d, h, d_ff, rng=rng), rng)
    y, memory, dout = randn(rng, 3, T, d), randn(rng, 3, S, d), randn(rng, 3, T, d)
    out, cache = decoder_layer_forward(y, memory, p, num_heads=h)
    dy, dmemory, grads = decoder_layer_backward(dout, cache)

    layer = torch.nn.TransformerDecoderLayer(d, h, d_ff, dropout=0.0, activation="relu",
                                             batch_first=True, norm_first=False,
                                             dtype=torch.float64)
    mapping = _decoder_torch(p)
    layer.load_state_dict({k: torch.tensor(v) for k, v in mapping.items()})
    ty, tm = torch.tensor(y, requires_grad=True), torch.tensor(memory, requires_grad=True)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    tout = layer(ty, tm, tgt_mask=causal)
    tout.backward(torch.tensor(dout))
    assert max_abs_diff(out, tout.detach()) <= 1e-10
    assert max_abs_diff(dy, ty.grad) <= 1e-10
    assert max_abs_diff(dmemory, tm.grad) <= 1e-10
    ours = _decoder_torch(grads)
    named = dict(layer.named_parameters())
    assert set(ours) == set(named)
    worst = max(max_abs_diff(ours[k], named[k].grad) for k in named)
    assert worst <= 1e-10, worst


@pytest.mark.parametrize("shared", [False, True])
def test_seq2seq_backward_matches_finite_differences(rng, shared):
    cfg = Seq2SeqConfig(src_vocab=6, tgt_vocab=6, max_src_len=5, max_tgt_len=4, d_model=4,
                        num_heads=2, d_ff=6, num_encoder_layers=2, num_decoder_layers=2,
                        share_embeddings=shared, tie_output=shared)
    params = _perturbed(init_seq2seq(cfg, rng=0), rng, 0.05)
    src = np.array([[1, 2, 3, 4, 5], [5, 0, 2, 2, 0]])
    tgt = np.array([[0, 3, 1], [0, 5, 5]])
    src_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    result = gradcheck(lambda p: seq2seq_forward(p, src, tgt, cfg, src_mask=src_mask),
                       lambda dl, c: (seq2seq_backward(dl, c),), (params,))
    assert result.ok, str(result)


def test_seq2seq_matches_torch_transformer_with_tied_embeddings(rng):
    torch = require("torch")
    d, h, d_ff, V, S, T = 8, 2, 16, 11, 7, 5
    cfg = Seq2SeqConfig(src_vocab=V, tgt_vocab=V, max_src_len=S, max_tgt_len=T, d_model=d,
                        num_heads=h, d_ff=d_ff, num_encoder_layers=2, num_decoder_layers=2,
                        share_embeddings=True, tie_output=True)
    params = _perturbed(init_seq2seq(cfg, rng=1), rng)
    src, tgt = rng.integers(0, V, (3, S)), rng.integers(0, V, (3, T))
    src_mask = np.ones((3, S), bool)
    src_mask[1, 5:] = False
    logits, cache = seq2seq_forward(params, src, tgt, cfg, src_mask=src_mask)
    dlogits = randn(rng, *logits.shape)
    grads = seq2seq_backward(dlogits, cache)

    model = torch.nn.Transformer(d, h, 2, 2, d_ff, dropout=0.0, activation="relu",
                                 batch_first=True, norm_first=False, dtype=torch.float64)
    # torch.nn.Transformer ends each stack with an extra LayerNorm that the paper's post-LN
    # model does not have (each sub-layer is already followed by one): remove them.
    model.encoder.norm = None
    model.decoder.norm = None
    mapping = {}
    for n in range(2):
        mapping.update({f"encoder.layers.{n}.{k}": v
                        for k, v in _encoder_torch(sub(params, f"encoder.{n}")).items()})
        mapping.update({f"decoder.layers.{n}.{k}": v
                        for k, v in _decoder_torch(sub(params, f"decoder.{n}")).items()})
    model.load_state_dict({k: torch.tensor(v) for k, v in mapping.items()})
    E = torch.tensor(params["embed"], requires_grad=True)
    b_out = torch.tensor(params["b_out"], requires_grad=True)
    pe = torch.tensor(sinusoidal_encoding(max(S, T), d))
    x = E[torch.tensor(src)] * d ** 0.5 + pe[:S]
    y = E[torch.tensor(tgt)] * d ** 0.5 + pe[:T]
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    pad = torch.tensor(~src_mask)                                  # torch: True = padding
    out = model(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    tlogits = out @ E.T + b_out
    tlogits.backward(torch.tensor(dlogits))
    assert max_abs_diff(logits, tlogits.detach()) <= 1e-10
    ours = {"embed": grads["embed"], "b_out": grads["b_out"]}
    theirs = {"embed": E.grad, "b_out": b_out.grad}
    for n in range(2):
        ours.update({f"encoder.layers.{n}.{k}": v
                     for k, v in _encoder_torch(sub(grads, f"encoder.{n}")).items()})
        ours.update({f"decoder.layers.{n}.{k}": v
                     for k, v in _decoder_torch(sub(grads, f"decoder.{n}")).items()})
    theirs.update({k: t.grad for k, t in model.named_parameters()})
    assert set(ours) == set(theirs)
    worst = max(max_abs_diff(ours[k], theirs[k]) for k in theirs)
    assert worst <= 1e-10, worst


def test_label_smoothing_matches_torch_cross_entropy(rng):
    torch = require("torch")
    logits, targets = 3 * randn(rng, 4, 6, 9), rng.integers(0, 9, (4, 6))
    loss, cache = cross_entropy_forward(logits, targets, label_smoothing=0.1)
    dlogits = cross_entropy_backward(2.5, cache)
    t = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(t.reshape(-1, 9),
                                                           torch.tensor(targets).reshape(-1))
    (2.5 * tloss).backward()
    assert abs(loss - tloss.item()) <= 1e-12
    assert max_abs_diff(dlogits, t.grad) <= 1e-12


def test_label_smoothing_gradient_matches_finite_differences(rng):
    logits, targets = randn(rng, 3, 5), np.array([0, 4, 2])
    result = gradcheck(lambda z: cross_entropy_forward(z, targets, label_smoothing=0.1),
                       lambda d, c: cross_entropy_backward(d, c), (logits,))
    assert result.ok, str(result)


def test_label_smoothing_rejects_values_outside_0_1():
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy_forward(np.zeros((2, 3)), np.array([0, 1]), label_smoothing=1.5)


def test_label_smoothing_loss_is_minimal_at_the_smoothed_target_with_its_entropy_as_floor():
    V, eps = 70, 0.1                       # the dates vocabulary (docs/training.md: ~0.74 nats)
    q = np.full(V, eps / V)
    q[3] += 1 - eps
    loss, cache = cross_entropy_forward(np.log(q)[None], np.array([3]), label_smoothing=eps)
    entropy = -(q * np.log(q)).sum()
    assert loss == pytest.approx(entropy, abs=1e-12)
    assert round(entropy, 2) == 0.74
    assert np.abs(cross_entropy_backward(1.0, cache)).max() <= 1e-12   # the gradient vanishes


def test_seq2seq_rejects_bad_tokens_and_masks():
    cfg = Seq2SeqConfig(src_vocab=5, tgt_vocab=5, max_src_len=4, max_tgt_len=3, d_model=4,
                        num_heads=2, d_ff=6)
    p = init_seq2seq(cfg, rng=0)
    src, tgt = np.array([[1, 2, 3]]), np.array([[0, 1]])
    with pytest.raises(ValueError, match="src_mask must have the shape"):
        seq2seq_forward(p, src, tgt, cfg, src_mask=np.ones((1, 4), bool))
    with pytest.raises(ValueError, match=r"tgt_in must be in \[0, 5\)"):
        seq2seq_forward(p, src, np.array([[0, 7]]), cfg)
    with pytest.raises(ValueError, match="src has length 5 > max length 4"):
        seq2seq_forward(p, np.zeros((1, 5), int), tgt, cfg)
    with pytest.raises(ValueError, match="share_embeddings needs src_vocab == tgt_vocab"):
        Seq2SeqConfig(src_vocab=5, tgt_vocab=6, share_embeddings=True)
