"""The big arrays a cache keeps, recycled once nothing holds them any more.

Why it exists: the blocked forward (:mod:`attention_np.kernels.blocked`) writes the softmax's
numerator ``e`` into a new ``(..., L, S)`` array that its cache keeps for the backward, 32 MiB at
(1, 8, 1024, 64) float32. New memory is mapped and zeroed by the operating system on its first
touch (a page fault per page), and that was the largest cost of the causal forward beyond its
matrix products and exponentials (benchmarks/vs_torch.py; the forward's first product, which
touches the pages, took about 1.6x its second, of the same size). In a loop of forward, backward,
forward (training, a benchmark) the last call's array is free again by the next forward: this
pool gives it back instead of new memory.

An array is handed out again only when no one else refers to it: not its cache, not a view of it
(a view keeps a reference to the array it views), not a caller who kept ``cache.e`` or
``cache.exp_scores`` (``sys.getrefcount``). Its contents are the last call's: the caller writes
every entry it needs. At most :data:`KEEP` arrays are kept.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

#: Arrays kept for reuse (the most recent); an array beyond them is left to the garbage collector.
KEEP = 2
#: Below this many bytes an array is always new: the allocator recycles small memory itself.
MIN_BYTES = 4 << 20

_pool: list = []
_lock = threading.Lock()


def empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape`` and ``dtype``: a kept one no one refers
    to any more when there is one of the same size, else a new one (kept for later)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    with _lock:
        for i in range(len(_pool)):
            # references: the pool's list and getrefcount's argument (a name bound to it, or a
            # loop over enumerate(), which keeps the pair it returned, would be one more)
            if _pool[i].nbytes == nbytes and sys.getrefcount(_pool[i]) == 2:
                a = _pool.pop(i)
                _pool.append(a)                              # the most recent last
                return a.view(dtype).reshape(shape)
        a = np.empty(nbytes, np.uint8)
        _pool.append(a)
        del _pool[:-KEEP]
    return a.view(dtype).reshape(shape)


def release() -> None:
    """Forget every kept array (the ones still in use stay their holders')."""
    with _lock:
        _pool.clear()
