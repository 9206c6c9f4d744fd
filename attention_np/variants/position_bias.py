r"""Position information as a score ``bias`` (beyond the paper): ALiBi and T5's relative buckets.

Both add to the scaled scores ``QKᵀ·scale`` a number that depends on the key's position minus the
query's, ``rel = j - i`` (pass the result as ``bias`` to any attention forward):

- **ALiBi** (Press et al., 2022; BLOOM, MPT): head ``n`` adds ``-m_n |j - i|`` with fixed slopes
  ``m_n`` in a geometric sequence. Under a causal mask this is ``m_n (j - i)``, which differs from
  BLOOM's ``m_n j`` by ``-m_n i``, a constant per query row that the softmax ignores.
- **T5** (Raffel et al., 2020): ``rel`` is put into one of ``num_buckets`` buckets (exact for small
  distances, logarithmic up to ``max_distance``), and each head learns one number per bucket: a
  table ``(num_buckets, h)`` gathered into a bias ``(h, L, S)``. Its backward scatter-adds
  ``dbias`` (from ``sdpa_backward(..., return_dbias=True)``) into the rows of the table.
- **2-D tables** (BEiT, Data2VecVision; Swin within each window): image patches on a grid, one
  learned number per head for each 2-D offset between a query patch and a key patch
  (:func:`grid_relative_index`), gathered and scattered back by the same two functions.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_float_array, check_bool, check_int
from attention_np.paper.masks import ALIGNMENTS


def relative_positions(L: int, S: int | None = None, *, align: str = "top_left") -> np.ndarray:
    """``rel[i, j] = j - i``, the key's position minus the query's, int array ``(L, S)``.

    ``align`` places query ``i`` at position ``i`` ("top_left") or ``i + S - L`` ("bottom_right":
    the queries are the last ``L`` positions, as when decoding with a KV cache), as in
    :func:`attention_np.causal_mask`.
    """
    L = check_int(L, "L", minimum=0)
    S = L if S is None else check_int(S, "S", minimum=0)
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top_left" else S - L
    return np.arange(S)[None, :] - (np.arange(L)[:, None] + offset)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi's head slopes: ``2^(-8 n / h)`` for ``n = 1..h`` when ``h`` is a power of 2.

    Otherwise (BLOOM's and MPT's rule, from the ALiBi authors' code) the slopes of the nearest
    power of 2 below ``h``, ``p``, followed by every other slope of ``2p``: the odd ones,
    ``2^(-8 n / 2p)`` for ``n = 1, 3, 5, ...``, until there are ``h``.

    Returns
    -------
    slopes : float64 (num_heads,)
    """
    h = check_int(num_heads, "num_heads")
    p = 2 ** int(np.floor(np.log2(h)))
    slopes = 2.0 ** (-8.0 * np.arange(1, p + 1) / p)
    extra = 2.0 ** (-8.0 * np.arange(1, 2 * (h - p), 2) / (2 * p))
    return np.concatenate([slopes, extra])


def alibi_bias(slopes, L: int, S: int | None = None, *, align: str = "top_left") -> np.ndarray:
    """The ALiBi score bias ``-m_n |j - i|``, ``(h, L, S)`` in the dtype of ``slopes``.

    Parameters
    ----------
    slopes : float (h,), e.g. :func:`alibi_slopes`
    L, S, align : as in :func:`relative_positions`

    Returns
    -------
    bias : (h, L, S); for multi-head scores ``(B, h, L, S)`` it broadcasts as it is
    """
    slopes = as_float_array(slopes, "slopes")
    if slopes.ndim != 1:
        raise ValueError(f"slopes must be 1-D (num_heads,), got shape {slopes.shape}")
    distance = np.abs(relative_positions(L, S, align=align)).astype(slopes.dtype)   # (L, S)
    return -slopes[:, None, None] * distance


def t5_relative_buckets(relative_position, *, bidirectional: bool = True, num_buckets: int = 32,
                        max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each relative position (transformers' ``T5Attention._relative_position_bucket``).

    Half the buckets (all of them when ``bidirectional`` is False, where keys after the query
    share bucket 0) hold exact distances ``0 .. n/2 - 1``; the rest grow logarithmically up to
    ``max_distance``, beyond which everything shares the last bucket. With ``bidirectional``,
    keys after the query (``rel > 0``) use the upper half. The logarithm is taken in float32, as
    transformers takes it, so that the buckets agree at their boundaries too.

    Parameters
    ----------
    relative_position : int array, ``j - i`` (e.g. :func:`relative_positions`)
    bidirectional : bool
        True for the encoder, False for the decoder's causal self-attention.
    num_buckets, max_distance : int

    Returns
    -------
    buckets : int64 array, the shape of ``relative_position``, values in ``[0, num_buckets)``
    """
    rel = np.asarray(relative_position)
    if not np.issubdtype(rel.dtype, np.integer):
        raise TypeError(f"relative_position must be an int array (key minus query position), "
                        f"got dtype {rel.dtype}")
    check_bool(bidirectional, "bidirectional")
    n = check_int(num_buckets, "num_buckets", minimum=2)
    max_distance = check_int(max_distance, "max_distance")
    if bidirectional and n < 4:        # n // 2 buckets per direction, half of them exact: >= 1
        raise ValueError(f"num_buckets must be >= 4 with bidirectional=True (half the buckets per "
                         f"direction, half of those exact distances: at least one), got {num_buckets}")
    rel = rel.astype(np.int64)
    buckets = np.zeros(rel.shape, np.int64)
    if bidirectional:
        n //= 2
        buckets += (rel > 0) * n                    # keys after the query: the upper half
        distance = np.abs(rel)
    else:
        distance = -np.minimum(rel, 0)              # keys after the query: distance 0
    max_exact = n // 2
    if max_distance <= max_exact:
        raise ValueError(f"max_distance={max_distance} must exceed the exact range "
                         f"{max_exact} of num_buckets={num_buckets}")
    with np.errstate(divide="ignore"):              # log(0) only where is_small picks distance
        log_ratio = np.log(distance.astype(np.float32) / np.float32(max_exact))
    large = max_exact + (log_ratio / np.float32(np.log(max_distance / max_exact))
                         * np.float32(n - max_exact))
    large = np.minimum(np.where(distance < max_exact, 0, large).astype(np.int64), n - 1)
    return buckets + np.where(distance < max_exact, distance, large)


def grid_relative_index(height: int, width: int, *, cls: bool = False) -> np.ndarray:
    """The table row of each query-key pair of a ``height x width`` grid of image patches: a
    learned bias per 2-D relative position (BEiT, Data2VecVision; Swin within each window).

    Patches are in row-major order, patch ``i`` at ``(r_i, c_i)``. The pair ``(i, j)`` is the
    offset ``(dr, dc) = (r_i - r_j, c_i - c_j)``, query minus key, one of ``(2H - 1)(2W - 1)``,
    numbered ``(dr + H - 1)(2W - 1) + (dc + W - 1)``. With ``cls`` (a class token first,
    BEiT's and Data2VecVision's) the table has 3 more rows: the class token's query row,
    ``n - 3``; its key column, ``n - 2``; the class token with itself, ``n - 1``
    (``n = (2H - 1)(2W - 1) + 3``).

    Returns
    -------
    index : int (N, N), ``N = H W`` (``+ 1`` with ``cls``); gather with
        :func:`relative_position_bias` (``table (n, h)``) into a bias ``(h, N, N)``.
    """
    H, W = check_int(height, "height"), check_int(width, "width")
    cls = check_bool(cls, "cls")
    r, c = np.divmod(np.arange(H * W), W)                               # (N,) row, column
    index = (r[:, None] - r[None, :] + H - 1) * (2 * W - 1) + (c[:, None] - c[None, :] + W - 1)
    if not cls:
        return index
    n = (2 * H - 1) * (2 * W - 1) + 3
    out = np.empty((H * W + 1,) * 2, dtype=index.dtype)
    out[1:, 1:] = index
    out[0, :], out[:, 0], out[0, 0] = n - 3, n - 2, n - 1
    return out


def relative_position_bias(table, buckets) -> np.ndarray:
    """Gather a learned bias table into a score bias: ``bias[n, i, j] = table[buckets[i, j], n]``.

    Parameters
    ----------
    table : float (num_buckets, h), transformers' ``relative_attention_bias.weight``
    buckets : int (L, S), e.g. :func:`t5_relative_buckets`

    Returns
    -------
    bias : (h, L, S), to pass as ``bias`` (it broadcasts against ``(B, h, L, S)``)
    """
    table = as_float_array(table, "table")
    buckets = _check_buckets(buckets, table.shape[0] if table.ndim == 2 else None, table.shape)
    return np.moveaxis(table[buckets], -1, 0)                       # (L, S, h) -> (h, L, S)


def relative_position_bias_backward(dbias, buckets, num_buckets: int) -> np.ndarray:
    """Backward of :func:`relative_position_bias`: the gradient w.r.t. the table.

    forward: ``bias[n, i, j] = table[buckets[i, j], n]``  ->  ``dtable[b, n]`` is the sum of
    ``dbias[..., n, i, j]`` over every ``(i, j)`` with ``buckets[i, j] = b`` (and over leading
    batch dims): a scatter-add, one ``np.add.at``.

    Parameters
    ----------
    dbias : (..., h, L, S), e.g. from ``sdpa_backward(..., return_dbias=True)``
    buckets : int (L, S), as given to the forward
    num_buckets : int, the table's rows

    Returns
    -------
    dtable : (num_buckets, h)
    """
    dbias = as_float_array(dbias, "dbias")
    num_buckets = check_int(num_buckets, "num_buckets")
    buckets = _check_buckets(buckets, num_buckets, None)
    if dbias.ndim < 3 or dbias.shape[-2:] != buckets.shape:
        raise ValueError(f"dbias must be (..., h, L, S) with (L, S) = buckets.shape "
                         f"{buckets.shape}, got shape {dbias.shape}")
    h = dbias.shape[-3]
    per_position = dbias.reshape(-1, h, buckets.size).sum(axis=0).T       # (L*S, h)
    dtable = np.zeros((num_buckets, h), dbias.dtype)
    np.add.at(dtable, buckets.ravel(), per_position)
    return dtable


def _check_buckets(buckets, num_buckets, table_shape):
    if table_shape is not None and len(table_shape) != 2:
        raise ValueError(f"table must be (num_buckets, h), got shape {table_shape}")
    buckets = np.asarray(buckets)
    if not np.issubdtype(buckets.dtype, np.integer):
        raise TypeError(f"buckets must be an int array, got dtype {buckets.dtype}")
    if buckets.ndim < 2:
        raise ValueError(f"buckets must be (L, S) (one table row per query-key pair), got shape "
                         f"{buckets.shape}")
    if buckets.size and (buckets.min() < 0 or buckets.max() >= num_buckets):
        raise ValueError(f"buckets must be in [0, {num_buckets}) (the table's rows), got values "
                         f"in [{buckets.min()}, {buckets.max()}]")
    return buckets
