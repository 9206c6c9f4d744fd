"""Autoregressive decoding of the encoder-decoder: greedy and beam search.

The encoder runs once. Each decoder step feeds one new target position through every decoder
layer, with

- the **KV cache** (:class:`attention_np.compose.decode.KVCache`) for masked self-attention:
  the keys and values of earlier positions never change, so only the new one is computed;
- the **encoder's keys and values for cross-attention computed once**: ``memory @ W_k`` and
  ``memory @ W_v`` of every decoder layer do not depend on the step
  (:func:`~attention_np.compose.cross_decode.cross_kv_cache`,
  :func:`~attention_np.compose.cross_decode.mha_cross_decode_step`).

``cached=False`` recomputes the whole prefix each step with :func:`seq2seq_forward` (the
definition); the tests hold the two equal to float64 rounding.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_array, check_count, check_flag, check_ids, check_number
from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step
from attention_np.compose.decode import KVCache, mha_decode_step
from attention_np.nn.encoder import sub
from attention_np.nn.feedforward import ffn_forward
from attention_np.nn.layernorm import layernorm_forward
from attention_np.nn.seq2seq import (
    Seq2SeqConfig,
    check_model,
    check_src_mask,
    embed,
    embed_names,
    encode,
    seq2seq_forward,
)
from attention_np.paper.linear import linear_forward


def log_softmax(z: np.ndarray) -> np.ndarray:
    """``log softmax(z)`` over the last axis, ``(..., V) -> (..., V)``, stable for any finite ``z``."""
    z = check_array(z, "z", min_ndim=1, layout="(..., V)")
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class IncrementalDecoder:
    """The decoder run one position at a time for a batch of sources.

    Parameters
    ----------
    params, config : the model
    src : (B, S) int, src_mask : (B, S) bool or None
    max_len : how many target positions the KV caches hold
    """

    def __init__(self, params: dict, config: Seq2SeqConfig, src, src_mask=None, *,
                 max_len: int | None = None):
        c = self.config = check_model(params, config)
        self.params = params
        self.max_len = check_count(max_len, "max_len", optional=True) or c.max_tgt_len
        memory, _ = encode(params, src, c, src_mask=src_mask)                  # (B, S, d)
        self.batch = memory.shape[0]
        self.mask = check_src_mask(src_mask, np.asarray(src))
        # per layer: the keys and values of memory, projected once, (B, h, S, d_k)
        self.cross = [cross_kv_cache(memory, sub(params, f"decoder.{n}.cross_attn"),
                                     num_heads=c.num_heads)
                      for n in range(c.num_decoder_layers)]
        self.caches = [KVCache(self.max_len) for _ in range(c.num_decoder_layers)]
        self.t = 0

    def reorder(self, index: np.ndarray) -> None:
        """Keep batch rows ``index`` (beam search: each new beam's parent), in every cache."""
        index = check_ids(index, "index", self.batch, ndim=1, layout="(B,)", what="batch rows")
        if index.shape != (self.batch,):
            raise ValueError(f"index must have shape ({self.batch},), one row per batch row, "
                             f"got {index.shape}")
        if self.t == 0:
            return
        for cache in self.caches:
            cache.reorder(index)

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """``tokens (B,)`` at position ``t`` -> logits ``(B, V)`` predicting position ``t + 1``."""
        c, p = self.config, self.params
        tokens = check_ids(tokens, "tokens", c.tgt_vocab, ndim=1, layout="(B,)",
                           what=f"target vocabulary of {c.tgt_vocab}")
        if tokens.shape != (self.batch,):
            raise ValueError(f"tokens must have shape ({self.batch},), one per source, got {tokens.shape}")
        if self.t >= self.max_len:
            raise ValueError(f"the decoder holds max_len={self.max_len} positions, all decoded; "
                             f"make it with a larger max_len")
        y, _ = embed(p, tokens[:, None], embed_names(c)[1], c, offset=self.t)   # (B, 1, d)
        for n in range(c.num_decoder_layers):
            q = sub(p, f"decoder.{n}")
            # 1) masked self-attention: this position's key and value join the cache
            a1 = mha_decode_step(y, sub(q, "self_attn"), self.caches[n], num_heads=c.num_heads)
            y1, _ = layernorm_forward(y + a1, q["ln1.gamma"], q["ln1.beta"])
            # 2) cross-attention against the keys and values computed once
            a2 = mha_cross_decode_step(y1, sub(q, "cross_attn"), self.cross[n],
                                       num_heads=c.num_heads, mask=self.mask)  # (B, 1, d)
            y2, _ = layernorm_forward(y1 + a2, q["ln2.gamma"], q["ln2.beta"])
            # 3) feed-forward
            f, _ = ffn_forward(y2, sub(q, "ffn"), activation=c.activation)
            y, _ = layernorm_forward(y2 + f, q["ln3.gamma"], q["ln3.beta"])
        self.t += 1
        W_out = p[embed_names(c)[1]].T if c.tie_output else p["W_out"]
        return linear_forward(y[:, 0], W_out, p["b_out"])                     # (B, V)


def _check_src(src, config: Seq2SeqConfig) -> np.ndarray:
    src = check_ids(src, "src", config.src_vocab, ndim=2, layout="(B, S)",
                    what=f"source vocabulary of {config.src_vocab}")
    if not 1 <= src.shape[1] <= config.max_src_len:
        raise ValueError(f"src has length {src.shape[1]}, expected 1 to max_src_len={config.max_src_len}")
    return src


def greedy_decode(params: dict, config: Seq2SeqConfig, src, src_mask=None, *, bos: int,
                  steps: int, cached: bool = True):
    """Pick the most likely token at each of ``steps`` positions.

    Returns
    -------
    tokens : (B, steps) int, the decoded target (without ``<bos>``)
    logits : (B, steps, V), the logits each token was picked from
    """
    c = check_model(params, config)
    bos = check_count(bos, "bos", minimum=0, maximum=c.tgt_vocab - 1)
    steps = check_count(steps, "steps", maximum=c.max_tgt_len)
    check_flag(cached, "cached")
    src = _check_src(src, c)
    check_src_mask(src_mask, src)
    B = src.shape[0]
    out = np.full((B, steps + 1), bos, dtype=np.int64)          # column 0: <bos>
    all_logits = []
    dec = IncrementalDecoder(params, config, src, src_mask, max_len=steps) if cached else None
    for t in range(steps):
        if cached:
            logits = dec.step(out[:, t])                                        # (B, V)
        else:   # the definition: the whole prefix through the whole model
            logits = seq2seq_forward(params, src, out[:, :t + 1], config, src_mask=src_mask)[0][:, -1]
        out[:, t + 1] = logits.argmax(axis=-1)
        all_logits.append(logits)
    return out[:, 1:], np.stack(all_logits, axis=1)


def length_penalty(length, alpha: float):
    """GNMT's ``((5 + length) / 6) ** alpha`` (Wu et al., 2016); ``alpha = 0``: none."""
    length = check_array(length, "length", kind="number")
    if length.size and length.min() < 0:
        raise ValueError(f"length must be >= 0, got a minimum of {length.min()}")
    alpha = check_number(alpha, "alpha", low=0)
    return ((5.0 + np.asarray(length, dtype=np.float64)) / 6.0) ** alpha


def beam_search(params: dict, config: Seq2SeqConfig, src, src_mask=None, *, bos: int, eos: int,
                steps: int, beam_size: int = 4, alpha: float = 0.6):
    """Beam search of width ``beam_size``; hypotheses ranked by ``log p / length_penalty``.

    A hypothesis that emits ``eos`` is finished: it keeps its score and length. Every batch
    row's ``beam_size`` beams run as one batch of ``B * beam_size`` through the cached decoder.

    Returns
    -------
    tokens : (B, steps) int, the best hypothesis of each source (after ``eos``: ``eos``)
    scores : (B,) its length-normalized log-probability
    """
    c = check_model(params, config)
    bos = check_count(bos, "bos", minimum=0, maximum=c.tgt_vocab - 1)
    eos = check_count(eos, "eos", minimum=0, maximum=c.tgt_vocab - 1)
    steps = check_count(steps, "steps", maximum=c.max_tgt_len)
    beam_size = check_count(beam_size, "beam_size")
    alpha = check_number(alpha, "alpha", low=0)
    src = _check_src(src, c)
    check_src_mask(src_mask, src)
    B, k = src.shape[0], beam_size
    rep = np.repeat(np.arange(B), k)                               # row b*k + j -> source b
    mask = None if src_mask is None else np.asarray(src_mask)[rep]
    dec = IncrementalDecoder(params, config, src[rep], mask, max_len=steps)
    seqs = np.full((B, k, steps + 1), bos, dtype=np.int64)
    score = np.full((B, k), -np.inf)
    score[:, 0] = 0.0                                              # one live beam at the start
    done = np.zeros((B, k), bool)
    length = np.zeros((B, k))
    for t in range(steps):
        logp = log_softmax(dec.step(seqs[:, :, t].reshape(-1))).reshape(B, k, -1)   # (B, k, V)
        V = logp.shape[-1]
        # finished beams extend only with eos, at no cost
        logp = np.where(done[..., None], -np.inf, logp)
        logp[..., eos] = np.where(done, 0.0, logp[..., eos])
        cand = score[..., None] + logp                                             # (B, k, V)
        cand_len = length[..., None] + ~done[..., None]                            # (B, k, 1)
        ranked = cand / length_penalty(np.broadcast_to(cand_len, cand.shape), alpha)
        best = np.argsort(-ranked.reshape(B, -1), axis=-1, kind="stable")[:, :k]   # (B, k)
        parent, token = best // V, best % V
        rows = np.arange(B)[:, None]
        score = cand.reshape(B, -1)[rows, best]
        length = np.broadcast_to(cand_len, cand.shape).reshape(B, -1)[rows, best]
        prev_done = done[rows, parent]
        seqs = seqs[rows, parent]
        seqs[:, :, t + 1] = token
        done = prev_done | (token == eos)
        dec.reorder((rows * k + parent).reshape(-1))
        if done.all():
            seqs[:, :, t + 2:] = eos
            break
    final = score / length_penalty(np.maximum(length, 1), alpha)
    pick = final.argmax(axis=-1)
    return seqs[np.arange(B), pick, 1:], final[np.arange(B), pick]
