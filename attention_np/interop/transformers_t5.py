"""T5's relative-position bias: its buckets, the bias they index, and the table's gradient.

T5 adds to the scores of head ``n`` a learned scalar per *bucket* of the relative position
``key - query``: one bucket per distance up to ``max_exact``, then log-spaced buckets up to
``max_distance`` (:func:`t5_bucket`). The table ``(num_buckets, h)`` is a parameter; its gradient
gathers the gradient w.r.t. the bias (``mha_backward(..., return_dbias=True)``) bucket by bucket.
"""

from __future__ import annotations

import numpy as np


def t5_bucket(relative_position, *, bidirectional: bool, num_buckets: int = 32,
              max_distance: int = 128) -> np.ndarray:
    """T5's relative-position buckets: exact for small distances, log-spaced up to ``max_distance``.

    relative_position : int array, key position minus query position -> int array, same shape,
    in ``[0, num_buckets)``. Bidirectional (encoder): half of the buckets for keys after the
    query. Causal (decoder): keys after the query share bucket 0. The logarithm is taken in
    float32, as transformers does, so that the buckets at the bin edges are the same.
    """
    n = np.asarray(relative_position, dtype=np.int64)
    bucket = np.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket += (n > 0) * num_buckets
        n = np.abs(n)
    else:
        n = -np.minimum(n, 0)
    max_exact = num_buckets // 2
    # log of n / max_exact (n >= 1 so that it is finite; where n < max_exact it is not used)
    log_ratio = np.log(np.maximum(n, 1).astype(np.float32) / np.float32(max_exact))
    large = max_exact + (log_ratio / np.float32(np.log(max_distance / max_exact))
                         * np.float32(num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return bucket + np.where(n < max_exact, n, large)


def t5_bias(table, L: int, S: int, spec):
    """The (1, h, L, S) bias T5 adds to the scores, and the (L, S) buckets that index ``table``.

    ``spec.buckets`` is ``(num_buckets, max_distance, bidirectional)``; the ``L`` queries are the
    last ``L`` of the ``S`` positions.
    """
    num_buckets, max_distance, bidirectional = spec.buckets
    relative = np.arange(S)[None, :] - (np.arange(L) + S - L)[:, None]     # key - query, (L, S)
    bucket = t5_bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets,
                       max_distance=max_distance)
    return table[bucket].transpose(2, 0, 1)[None], bucket              # (1, h, L, S)


def t5_bias_table_backward(dbias, bucket, num_buckets: int) -> np.ndarray:
    """forward: bias[0, :, i, j] = table[bucket[i, j]]  ->  dtable[b] = sum of dbias where bucket == b."""
    h = dbias.shape[-3]
    dtable = np.zeros((num_buckets, h), dtype=dbias.dtype)
    np.add.at(dtable, bucket.ravel(), dbias.reshape(-1, h, bucket.size).sum(axis=0).T)
    return dtable
