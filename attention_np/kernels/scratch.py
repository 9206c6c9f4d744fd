"""Scratch memory the tiled kernel reuses from one call to the next, one pool per thread.

Why it exists: a new NumPy array of a few MiB is new memory to the operating system, which maps
and zeroes each 4 KiB page on its first touch (a page fault). Measured on the 2-core machine of
docs/performance.md, filling a fresh 40 MB array costs 18 ms in 4 KiB pages and 1.3 ms when the
memory is reused; before this pool the tiled forward+backward at (1, 8, 1024, 64) float32 took
about 7000 page faults per call, about a tenth of its time. The dense kernel's big arrays get
2 MiB pages from NumPy and fault far less.

Only a kernel's *internal* arrays come from here (its tiles, its copies of ``q`` with an extra
column, ...), and only for the length of one call: nothing returned to the caller or kept in a
cache is scratch. Each thread has its own pool (the worker threads of
:mod:`attention_np.kernels.threads` live as long as the process). A buffer is kept for the next
call only while the thread's pool stays within :data:`KEEP_BYTES` in all (after a dense and a
tiled forward+backward at (1, 8, 1024, 64) float32 on one thread, the pool holds 28 MiB). A
pool is thread-local: it goes when its thread ends (a caller's short-lived threads leave nothing
behind); :func:`release` gives the memory of every pool back (a call under way keeps what it
holds until it returns).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

#: The most one thread's pool keeps between calls (bytes, all its buffers); a buffer that would
#: take it past this is allocated afresh every call instead.
KEEP_BYTES = 64 << 20


class _Pool(dict):
    """One thread's buffers, ``{(name, dtype): flat buffer}`` (a dict that can be weakly
    referenced, so that :func:`release` finds every live thread's pool without keeping one).
    Two pools are never the same pool, even when their contents are equal (as in a set)."""

    __eq__, __hash__ = object.__eq__, object.__hash__


_local = threading.local()           # .pool: this thread's _Pool, freed when the thread ends
_pools: weakref.WeakSet = weakref.WeakSet()      # every live thread's pool


def _pool() -> _Pool:
    """The calling thread's pool (made on its first call)."""
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = _Pool()
        _pools.add(pool)
    return pool


def scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape`` and ``dtype``: the calling thread's
    buffer ``name``, grown when too small.

    Two arrays in use at once in one call need two names. Its contents are garbage until written.
    The names are slots, not roles: a kernel's forward and backward use the same names for their
    arrays of the same kind (``"tile 1"``, ``"rows 1"``: ``(..., L, d + 1)``, ``"keys 1"``), so
    that the pool holds the larger of the two phases, not both.
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    pool = _pool()
    buf = pool.get((name, dtype))
    if buf is None or buf.size < n:
        pool.pop((name, dtype), None)
        buf = np.empty(n, dtype)
        if sum(b.nbytes for b in pool.values()) + buf.nbytes <= KEEP_BYTES:
            pool[(name, dtype)] = buf
    return buf[:n].reshape(shape)


def release() -> None:
    """Drop every thread's buffers (the memory returns to the allocator)."""
    for pool in list(_pools):
        pool.clear()


def carve(work, shape) -> np.ndarray:
    """The first ``prod(shape)`` entries of the flat ``work``, seen as a C-contiguous ``shape``
    (None when ``work`` is None): one tile in a buffer sized for the largest, reused for each
    tile of a call (see above)."""
    if work is None:
        return None
    return work[:int(np.prod(shape, dtype=np.int64))].reshape(shape)


def append_column(x, col, name: str):
    """``[x, col]`` along the last axis, in the scratch buffer ``name``: ``x (..., n, d)`` and
    ``col`` broadcastable to ``(..., n, 1)`` give ``(..., n, d + 1)``, their batch dims broadcast
    together.

    A product with such an extra column does a subtraction or a sum for free: ``[q, -m] @ [k, 1]ᵀ
    = q @ kᵀ - m`` and ``p @ [v, 1] = [p @ v, rowsum(p)]``.
    """
    shape = np.broadcast_shapes(x.shape[:-1] + (1,), np.shape(col))           # (..., n, 1)
    out = scratch(name, shape[:-1] + (x.shape[-1] + 1,), x.dtype)             # (..., n, d + 1)
    out[..., :-1] = x
    out[..., -1:] = col
    return out
