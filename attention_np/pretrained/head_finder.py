"""Find heads that do something recognizable, by measuring it on every head at once.

Each score is an average attention weight over the real (non-padding) tokens of a batch, one
number per (layer, head); the head with the highest score is the clearest example of the
behaviour. Nothing is picked by eye.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_array, check_params_dict

BEHAVIOURS = {   # name -> what the head attends to
    "previous": "the previous token",
    "next": "the next token",
    "self": "itself",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "match": "another copy of the same word",
}


def head_scores(attentions, tokens) -> dict:
    """Scores ``(num_layers, num_heads)`` for each behaviour of :data:`BEHAVIOURS`.

    Parameters
    ----------
    attentions : list of (B, h, L, L) weights, one per layer (``EncoderOutput.attentions``)
    tokens : list of B token lists (``Tokenized.tokens``, padding left out)

    Returns
    -------
    dict name -> (num_layers, num_heads): ``previous`` (``next``, ``self``): mean weight of
    token i on token i-1 (i+1, i); ``cls``, ``sep``: mean weight on the [CLS], [SEP] token;
    ``match``: mean weight of a word piece on its earlier occurrences (summed over them),
    over the pieces that repeat one (None if no sentence repeats a piece).
    """
    arrays = _checked(attentions, tokens)
    W = np.stack(arrays, axis=0)                                  # (layers, B, h, L, L)
    prev, nxt, own, cls, sep, match = [], [], [], [], [], []
    for b, toks in enumerate(tokens):                             # a handful of sentences
        n = len(toks)
        w = W[:, b, :, :n, :n]                                    # (layers, h, n, n)
        i = np.arange(1, n)
        prev.append(w[:, :, i, i - 1].mean(-1))                   # (layers, h)
        nxt.append(w[:, :, i - 1, i].mean(-1))
        own.append(np.diagonal(w, axis1=-2, axis2=-1).mean(-1))
        cls.append(w[:, :, :, 0].mean(-1))
        sep.append(w[:, :, :, toks.index("[SEP]")].mean(-1))
        t = np.array(toks)
        earlier = (t[:, None] == t[None, :]) & np.tri(n, k=-1, dtype=bool)   # (n, n) j < i, same piece
        earlier[:, [0, n - 1]] = False                           # [CLS], [SEP] are not words
        rows = earlier.any(axis=1)
        if rows.any():
            match.append((w * earlier).sum(-1)[:, :, rows].mean(-1))
    return {"previous": np.mean(prev, axis=0), "next": np.mean(nxt, axis=0),
            "self": np.mean(own, axis=0), "cls": np.mean(cls, axis=0), "sep": np.mean(sep, axis=0),
            "match": np.mean(match, axis=0) if match else None}


def _checked(attentions, tokens) -> list:
    """The arrays of ``attentions``, after checking them and ``tokens`` (see :func:`head_scores`)."""
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise TypeError(f"attentions must be a non-empty list of (B, h, L, L) arrays, got {attentions!r:.60}")
    arrays = [check_array(a, f"attentions[{i}]", ndim=4, layout="(B, h, L, L)")
              for i, a in enumerate(attentions)]
    if len({a.shape for a in arrays}) > 1 or arrays[0].shape[-1] != arrays[0].shape[-2]:
        raise ValueError(f"attentions must be arrays of one shape (B, h, L, L), got "
                         f"{sorted({a.shape for a in arrays})}")
    B, L = arrays[0].shape[0], arrays[0].shape[-1]
    if not isinstance(tokens, (list, tuple)) or len(tokens) != B:
        raise ValueError(f"tokens must be a list of B={B} token lists (Tokenized.tokens), got {tokens!r:.60}")
    for b, toks in enumerate(tokens):
        if (not isinstance(toks, (list, tuple)) or not 2 <= len(toks) <= L
                or not all(isinstance(t, str) for t in toks) or "[SEP]" not in toks):
            raise ValueError(f"tokens[{b}] must be a list of 2 to L={L} word pieces with a [SEP], "
                             f"got {toks!r:.60}")
    return arrays


def best_heads(scores: dict) -> dict:
    """``{behaviour: (layer, head, score)}``, the top-scoring head of each behaviour."""
    if not isinstance(scores, dict):
        raise TypeError(f"scores must be the dict of head_scores, got {type(scores).__name__}")
    check_params_dict({k: v for k, v in scores.items() if v is not None}, "scores", maker="head_scores")
    best = {}
    for name, s in scores.items():
        if s is not None:
            layer, head = np.unravel_index(np.argmax(s), s.shape)
            best[name] = (int(layer), int(head), float(s[layer, head]))
    return best
