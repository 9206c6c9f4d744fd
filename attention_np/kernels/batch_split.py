"""Heads in parallel: a kernel's batch entries (batch × heads) cut into one slice per worker thread.

The matrix products of attention use every core through BLAS, but the elementwise work between
them (scale, mask, exp, row sums) runs on the calling thread. Giving each worker thread its own
slice of the batch entries, with BLAS on one thread per worker
(:func:`~attention_np.kernels.threads.parallel_map`), puts every core on both: each worker runs
the whole kernel, big products included, on its heads.

:func:`flat` sees an array ``(..., a, b)`` as ``(N, a, b)``; :func:`slices` cuts ``N`` into the
workers' parts; :func:`map_slices` runs a kernel on each part and stacks the results.
"""

from __future__ import annotations

import numpy as np

from attention_np.kernels.threads import num_threads, parallel_map

#: Below this many score entries in all (batch × L × S), one thread: a pool costs more than it saves.
MIN_ELEMENTS = 1 << 17


def flat(x: np.ndarray, batch: tuple) -> np.ndarray:
    """``x (..., a, b)`` broadcast to ``batch`` and seen as ``(N, a, b)``, ``N = prod(batch)``:
    a view when ``x`` has the whole batch (or broadcasts along leading size-1 dims only)."""
    x = np.broadcast_to(x, batch + x.shape[-2:]) if x.shape[:-2] != batch else x
    return x.reshape((int(np.prod(batch, dtype=np.int64)),) + x.shape[-2:])


def slices(batch: tuple, entries: int | None = None) -> list[slice]:
    """``N = prod(batch)`` batch entries cut into at most :func:`num_threads` near-equal slices;
    one slice when ``entries`` (the work's score entries, if given) is below ``MIN_ELEMENTS``."""
    n = int(np.prod(batch, dtype=np.int64))
    small = entries is not None and entries < MIN_ELEMENTS
    parts = 1 if small else max(1, min(n, num_threads()))
    edges = [n * p // parts for p in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:], strict=False)]


def shared(x) -> np.ndarray | None:
    """A mask or bias that is the same for every batch entry, as its (a, b) block; else (it
    varies along some batch dim) ``x`` itself. None stays None."""
    if x is None or x.ndim <= 2 or all(n == 1 for n in x.shape[:-2]):
        return None if x is None else x.reshape(x.shape[-2:])
    return x


def map_slices(work, batch: tuple, arrays: tuple, entries: int | None = None) -> tuple:
    """``work(*arrays)`` on one slice of the batch entries per worker, results stacked back.

    ``arrays`` broadcast over ``batch`` (each ``(..., a, b)``); ``work(*parts, sub)`` gets each
    seen as ``(n, a, b)`` for its slice, and ``sub = (n,)``, and returns a tuple of ``(n, ., .)``
    arrays. Returns them as ``(*batch, ., .)``.
    """
    flats = [flat(x, batch) for x in arrays]
    results = parallel_map(lambda sl: work(*(x[sl] for x in flats), (sl.stop - sl.start,)),
                           slices(batch, entries))
    return tuple(np.concatenate(parts).reshape(batch + parts[0].shape[-2:])
                 for parts in zip(*results, strict=True))
