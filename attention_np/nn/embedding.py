r"""Token embedding, §3.4: each token id selects one row of a learned matrix.

"We use learned embeddings to convert the input tokens ... to vectors of dimension
:math:`d_{model}` ... In the embedding layers, we multiply those weights by
:math:`\sqrt{d_{model}}`." The multiplication is the ``scale`` argument.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_array, check_cache, check_ids, check_number


@dataclass(frozen=True)
class EmbeddingCache:
    tokens: np.ndarray        # (...,) int token ids
    vocab_size: int
    scale: float
    d_model: int              # W_emb's width: dx must be (..., d_model)


def embedding_forward(tokens, W_emb: np.ndarray, *, scale: float = 1.0):
    r"""Look up ``W_emb[tokens] * scale``.

    Parameters
    ----------
    tokens : int array (..., L)
        Ids in ``[0, vocab_size)``.
    W_emb : (V, d_model) float array
    scale : float
        The paper multiplies by :math:`\sqrt{d_{model}}` (§3.4); BERT uses 1.

    Returns
    -------
    x : (..., L, d_model)
    cache : EmbeddingCache
    """
    W_emb = check_array(W_emb, "W_emb", ndim=2, layout="(vocab_size, d_model)")
    V = W_emb.shape[0]
    tokens = check_ids(tokens, "tokens", V, what=f"rows of W_emb {W_emb.shape}")
    scale = check_number(scale, "scale")
    x = W_emb[tokens]                                   # (..., L, d_model), a copy
    if scale != 1.0:
        x *= W_emb.dtype.type(scale)
    return x, EmbeddingCache(tokens, V, float(scale), W_emb.shape[1])


def embedding_backward(dx: np.ndarray, cache: EmbeddingCache) -> np.ndarray:
    """Gradient w.r.t. ``W_emb``: each row collects the gradients of every position holding it.

    forward: x = W_emb[tokens] * scale  ->  dW_emb[t] = scale * sum of dx over positions with token t
    (plain fancy assignment would keep only the last of repeated ids). ``np.bincount`` does the
    sums, entry ``(t, j)`` of ``dW`` being bin ``t * d_model + j``: it adds in the order of the
    positions, as ``np.add.at(dW, tokens, dx)`` does, so float64 gives the same numbers; float32
    gradients are summed in float64 and rounded once. It is several times faster: ``np.add.at``
    took 0.35-0.7 ms of the reversal model's 8 ms float32 step.

    Parameters
    ----------
    dx : (..., L, d_model) float array, the gradient of the output
    cache : EmbeddingCache from :func:`embedding_forward`
    """
    check_cache(cache, EmbeddingCache, "embedding_forward")
    dx = check_array(dx, "dx", min_ndim=1)
    if dx.shape[:-1] != cache.tokens.shape:
        raise ValueError(f"dx has shape {dx.shape} but the tokens of embedding_forward have shape "
                         f"{cache.tokens.shape}: expected {cache.tokens.shape} + (d_model,)")
    if dx.shape[-1] != cache.d_model:
        raise ValueError(f"dx has shape {dx.shape} but W_emb of embedding_forward is (vocab_size, "
                         f"d_model={cache.d_model}): expected {cache.tokens.shape + (cache.d_model,)}")
    d_model = dx.shape[-1]
    bins = (cache.tokens.reshape(-1, 1) * d_model + np.arange(d_model)).reshape(-1)  # (N * d,)
    dW = np.bincount(bins, weights=dx.reshape(-1), minlength=cache.vocab_size * d_model)
    dW = dW.reshape(cache.vocab_size, d_model).astype(dx.dtype, copy=False)   # (vocab, d_model)
    if cache.scale != 1.0:
        dW *= dx.dtype.type(cache.scale)
    return dW
