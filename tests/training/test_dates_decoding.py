"""The dates task (deterministic, disjoint splits, correct ISO targets) and decoding: cached
greedy decoding equals the uncached definition to float64 rounding; beam search is consistent."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from attention_np.nn.decoding import beam_search, greedy_decode, length_penalty, log_softmax
from attention_np.nn.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_forward
from attention_np.training.dates import (
    BOS,
    EOS,
    FORMATS,
    ISO_LEN,
    NUM_DATES,
    DatesTask,
    decode_ids,
    make_batch,
    ordinal,
)


def test_formats_write_the_examples_of_the_issue():
    d = dt.date(1999, 3, 3)
    texts = {f(d) for f in FORMATS}
    assert {"3rd of March 1999", "March 3, 99", "03.03.1999"} <= texts
    assert len(texts) == len(FORMATS)            # every format writes the date differently


def test_ordinal_suffixes():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]


def test_targets_are_the_iso_date_and_parse_back_from_every_format():
    batch = make_batch([dt.date(2031, 12, 9)] * len(FORMATS), range(len(FORMATS)))
    assert batch.isos == ["2031-12-09"] * len(FORMATS)
    assert all(decode_ids(row) == "2031-12-09" for row in batch.tgt_out)
    assert (batch.tgt_in[:, 0] == BOS).all() and (batch.tgt_out[:, -1] == EOS).all()
    assert (batch.tgt_in[:, 1:] == batch.tgt_out[:, :-1]).all()     # shifted right by one
    for text, f in zip(batch.texts, range(len(FORMATS)), strict=True):
        assert decode_ids(batch.src[f][batch.src_mask[f]]) == text


def test_two_digit_years_follow_the_1950_pivot():
    for year in (1950, 1999, 2000, 2049):
        text = FORMATS[1](dt.date(year, 5, 17))                  # "May 17, yy"
        yy = int(text[-2:])
        assert (1900 if yy >= 50 else 2000) + yy == year


def test_split_is_disjoint_covers_every_date_and_is_deterministic():
    task = DatesTask(heldout_size=500, seed=3)
    train, held = task.split()
    assert len(np.intersect1d(train, held)) == 0
    assert len(train) + len(held) == NUM_DATES and len(held) == 500
    assert np.array_equal(held, DatesTask(heldout_size=500, seed=3).split()[1])
    assert not np.array_equal(held, DatesTask(heldout_size=500, seed=4).split()[1])


def test_training_batches_never_contain_a_heldout_date():
    task = DatesTask(heldout_size=3000)
    held = set(task.heldout().isos)
    seen = set()
    rng = np.random.default_rng(0)
    for _ in range(20):
        seen |= set(task.train_batch(rng, 500).isos)
    assert len(seen) > 5000 and not seen & held


def test_batches_are_deterministic_for_a_seed():
    a, b = DatesTask().train_batch(5, 32), DatesTask().train_batch(5, 32)
    assert a.texts == b.texts and np.array_equal(a.src, b.src)
    assert DatesTask().train_batch(6, 32).texts != a.texts


def test_heldout_size_is_checked():
    with pytest.raises(ValueError, match="heldout_size"):
        DatesTask(heldout_size=0)


def _model(rng, **kw):
    task = DatesTask()
    cfg = Seq2SeqConfig(src_vocab=task.vocab_size, tgt_vocab=task.vocab_size, max_src_len=32,
                        max_tgt_len=ISO_LEN + 1, d_model=16, num_heads=2, d_ff=24,
                        num_encoder_layers=2, num_decoder_layers=2, **kw)
    # Random (untrained) params, perturbed so that every sub-layer matters.
    params = {k: v + 0.3 * rng.standard_normal(v.shape)
              for k, v in init_seq2seq(cfg, rng=rng).items()}
    return cfg, params, task.train_batch(1, 6)


@pytest.mark.parametrize("shared", [False, True])
def test_cached_greedy_decoding_equals_uncached_to_float64_rounding(rng, shared):
    cfg, params, b = _model(rng, share_embeddings=shared, tie_output=shared)
    tok_c, logits_c = greedy_decode(params, cfg, b.src, b.src_mask, bos=BOS, steps=ISO_LEN + 1)
    tok_u, logits_u = greedy_decode(params, cfg, b.src, b.src_mask, bos=BOS, steps=ISO_LEN + 1,
                                    cached=False)
    assert np.array_equal(tok_c, tok_u)
    assert np.max(np.abs(logits_c - logits_u)) <= 1e-12 * max(1.0, np.max(np.abs(logits_u)))
    # and each step's logits are those of the full teacher-forced forward on the decoded prefix
    prefix = np.concatenate([np.full((len(b.src), 1), BOS), tok_c[:, :-1]], axis=1)
    full, _ = seq2seq_forward(params, b.src, prefix, cfg, src_mask=b.src_mask)
    assert np.max(np.abs(full - logits_c)) <= 1e-12 * max(1.0, np.max(np.abs(full)))


def test_source_padding_does_not_change_the_decoding(rng):
    cfg, params, b = _model(rng)
    padded = np.concatenate([b.src, np.zeros((len(b.src), 5), b.src.dtype)], axis=1)
    pmask = np.concatenate([b.src_mask, np.zeros((len(b.src), 5), bool)], axis=1)
    _, a = greedy_decode(params, cfg, b.src, b.src_mask, bos=BOS, steps=4)
    _, c = greedy_decode(params, cfg, padded, pmask, bos=BOS, steps=4)
    assert np.max(np.abs(a - c)) <= 1e-12


def _sequence_logprob(params, cfg, b, tokens):
    tgt_in = np.concatenate([np.full((len(tokens), 1), BOS), tokens[:, :-1]], axis=1)
    logits, _ = seq2seq_forward(params, b.src, tgt_in, cfg, src_mask=b.src_mask)
    lp = np.take_along_axis(log_softmax(logits), tokens[..., None], axis=-1)[..., 0]
    return lp.sum(axis=-1)


def test_beam_of_width_one_is_greedy(rng):
    cfg, params, b = _model(rng)
    greedy, _ = greedy_decode(params, cfg, b.src, b.src_mask, bos=BOS, steps=6)
    beam, _ = beam_search(params, cfg, b.src, b.src_mask, bos=BOS, eos=EOS, steps=6,
                          beam_size=1, alpha=0.0)
    for g, s in zip(greedy, beam, strict=True):     # equal up to the first eos
        n = int(np.argmax(g == EOS)) + 1 if (g == EOS).any() else len(g)
        assert np.array_equal(g[:n], s[:n])


def test_wider_beam_finds_a_sequence_at_least_as_likely_as_greedy(rng):
    cfg, params, b = _model(rng)
    steps = 5      # fixed length without eos so the scores compare directly: mask eos out
    params = dict(params)
    params["b_out"] = params["b_out"].copy()
    params["b_out"][EOS] = -1e9
    greedy, _ = greedy_decode(params, cfg, b.src, b.src_mask, bos=BOS, steps=steps)
    beam, score = beam_search(params, cfg, b.src, b.src_mask, bos=BOS, eos=EOS, steps=steps,
                              beam_size=4, alpha=0.0)
    lp_g = _sequence_logprob(params, cfg, b, greedy)
    lp_b = _sequence_logprob(params, cfg, b, beam)
    assert np.allclose(score, lp_b, atol=1e-9)       # the reported score is the true log p
    assert (lp_b >= lp_g - 1e-9).all()


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
