"""Run NumPy's BLAS on one thread while training a small model.

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
from pathlib import Path

import numpy as np

_SUFFIXES = ("scipy_openblas_{}64_", "scipy_openblas_{}", "openblas_{}64_", "openblas_{}")


def _openblas():
    """(get_num_threads, set_num_threads) of the OpenBLAS bundled with NumPy, or None."""
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
    """Within the block, BLAS uses ``n`` threads (``None``: leave it alone)."""
    funcs = _openblas() if n is not None else None
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
