"""Threads: how many BLAS uses, and a pool of workers for blocked computations.

:func:`blas_threads` sets NumPy's BLAS threads for a block of code; :func:`parallel_map` runs a
function over a few parts of a computation on a pool of threads (NumPy releases the GIL inside
ufuncs and matrix products), BLAS on one thread (:func:`one_blas_thread`, shared by overlapping
calls). :func:`num_threads` says how many.

Why BLAS on one thread while training a small model:

The matrices of the toy model are tiny (640 × 64: a batch of 64 sequences of 10 tokens, by
d_model); OpenBLAS still splits them over threads, and when the cores are busy (a shared
machine, a CI runner) the threads wait for each other: we measured a training step 13× slower
with two threads than with one on a loaded 2-core machine. Setting ``OPENBLAS_NUM_THREADS=1``
before NumPy loads does the same thing; this helper does it after, through OpenBLAS's own
``set_num_threads`` (what ``threadpoolctl`` does), and does nothing where NumPy is not linked
against OpenBLAS.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

_SUFFIXES = ("scipy_openblas_{}64_", "scipy_openblas_{}", "openblas_{}64_", "openblas_{}")


@functools.cache
def openblas_thread_functions():
    """OpenBLAS's own thread-count functions, for the OpenBLAS NumPy was built with.

    Returns
    -------
    tuple of (callable, callable) or None
        ``(get_num_threads, set_num_threads)``: ``get()`` returns the process's BLAS thread count,
        ``set(n)`` sets it. None when NumPy does not bundle OpenBLAS (then :func:`blas_threads`
        does nothing).
    """
    root = Path(np.__file__).resolve().parent
    for lib in sorted([*root.parent.glob("numpy.libs/*openblas*"), *root.glob(".dylibs/*openblas*")]):
        try:
            dll = ctypes.CDLL(str(lib))
        except OSError:
            continue
        for pattern in _SUFFIXES:
            get = getattr(dll, pattern.format("get_num_threads"), None)
            set_ = getattr(dll, pattern.format("set_num_threads"), None)
            if get is not None and set_ is not None:
                return get, set_
    return None


@contextlib.contextmanager
def blas_threads(n: int | None):
    """Within the block, BLAS uses ``n`` threads (``None``: leave it alone).

    The count is the whole process's (OpenBLAS has one; its ``openblas_set_num_threads_local`` is
    process-wide too in the build NumPy ships, tests/kernels/test_threads.py): every thread's BLAS sees
    it while the block runs. Use it around a computation of your own, a training loop say.
    """
    funcs = openblas_thread_functions() if n is not None else None
    if funcs is None:
        yield
        return
    get, set_ = funcs
    before = get()
    set_(int(n))
    try:
        yield
    finally:
        set_(before)


# The blocked computations' one BLAS thread, shared by every call under way: the first call to
# start sets it, the last to end restores the count it found. (Each call setting and restoring
# its own would race: two overlapping calls could leave the process on one thread for good.)
_one_lock = threading.Lock()
_one_users = 0
_one_before: int | None = None


@contextlib.contextmanager
def one_blas_thread():
    """BLAS on one thread for the block, whatever other threads of the process do meanwhile.

    A computation split over workers (:func:`parallel_map`) runs its products on one BLAS thread,
    and must see one thread every time: OpenBLAS's products can round differently with another
    thread count (``(256, 600) @ (600, 48)`` in float32 does, with 1 and 2 threads), so a count
    that depended on whether another call happened to be under way would make a call's bits
    depend on other threads. Overlapping blocks share one setting, restored when the last ends.
    """
    global _one_users, _one_before
    funcs = openblas_thread_functions()
    if funcs is None:
        yield
        return
    get, set_ = funcs
    with _one_lock:
        if _one_users == 0:
            _one_before = get()
            set_(1)
        _one_users += 1
    try:
        yield
    finally:
        with _one_lock:
            _one_users -= 1
            if _one_users == 0:
                set_(_one_before)


_PREFIX = "attention_np_worker"
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def num_threads() -> int:
    """Worker threads for blocked computations: ``$ATTENTION_NP_NUM_THREADS``, else every core."""
    value = os.environ.get("ATTENTION_NP_NUM_THREADS", "")
    if not value.strip():
        return os.cpu_count() or 1
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"ATTENTION_NP_NUM_THREADS must be a positive integer, got {value!r}")
    return n


def deal(items: list, workers: int) -> list[list]:
    """Deal ``items`` to at most ``workers`` lists like cards (0, w, 2w, ...), never an empty one
    (one empty list when there are no items)."""
    workers = max(1, min(workers, len(items)))
    return [items[w::workers] for w in range(workers)]


def parallel_map(work, parts: list) -> list:
    """``[work(p) for p in parts]``, on a pool of threads when there is more than one part.

    BLAS runs on one thread throughout (:func:`one_blas_thread`), on the pool or not, so that
    the two kinds of threads do not compete for the cores, and so that a call computes the same
    bits alone, from several threads at once, or beside another call. Exceptions in ``work``
    are raised here.
    """
    if threading.current_thread().name.startswith(_PREFIX):
        # called from one of the pool's own workers (inside a parallel_map, so on one BLAS
        # thread already): run here (a worker that waited on the pool could wait for itself)
        return [work(p) for p in parts]
    if len(parts) <= 1:
        with one_blas_thread():
            return [work(p) for p in parts]
    global _pool, _pool_size
    with _pool_lock:
        if _pool_size < len(parts):
            # A bigger pool (callers use at most num_threads() parts, so this happens once or
            # twice). The old one is left to idle: a concurrent caller may still be using it.
            _pool = ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix=_PREFIX)
            _pool_size = len(parts)
        pool = _pool
    with one_blas_thread():
        return list(pool.map(work, parts))
