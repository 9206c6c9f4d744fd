"""A call gives the same bits whatever other Python threads are doing.

OpenBLAS has one thread count for the whole process, and its products can round differently
with another count (checked below for one shape). The blocked path runs its products on one BLAS
thread, shared by every call under way (``kernels/threads.py: one_blas_thread``): each call
sees one thread whether it runs alone, beside copies of itself, or beside another call, and the
count the process had is back when the last call ends.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import blocked
from attention_np.kernels.threads import blas_threads, openblas_thread_functions


def _inputs(shape, seed):
    r = np.random.default_rng(seed)
    return tuple(r.standard_normal(shape).astype(np.float32) for _ in range(3))


# (3, 1, 600, 48): several parts on two workers; (1, 1, 220, 600)-scores: one head, one block per
# worker (one part, run on the calling thread, with ATTENTION_NP_NUM_THREADS=1); both take the
# blocked path, both have a (rows, 600) @ (600, 48) product.
CALLS = {"several parts": ((3, 1, 600, 48), {}), "one part": ((1, 1, 220, 48), {})}


def _call(name, q, k, v):
    shape, kw = CALLS[name]
    if name == "one part":
        k, v = (np.concatenate([x] * 3, axis=-2)[..., :600, :] for x in (k, v))
    out, cache = an.sdpa_forward(q, k, v, **kw)
    assert cache.blocks is not None, "the call must take the blocked path"
    return out


def test_a_blas_product_may_round_differently_with_another_thread_count():
    """Why the blocked path pins BLAS to one thread rather than leaving the count alone."""
    if openblas_thread_functions() is None:
        pytest.skip("NumPy is not linked against OpenBLAS here")
    r = np.random.default_rng(0)
    a, b = r.standard_normal((256, 600), np.float32), r.standard_normal((600, 48), np.float32)
    results = []
    for n in (1, 2):
        with blas_threads(n):
            results.append(a @ b)
    # not an assertion that they differ (that depends on the CPU and the OpenBLAS build); printed
    print("(256, 600) @ (600, 48) float32, 1 vs 2 BLAS threads bit for bit equal:",
          np.array_equal(*results))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_four_threads_give_the_bits_of_the_call_alone(monkeypatch, workers):
    monkeypatch.setenv("ATTENTION_NP_NUM_THREADS", workers)
    inputs = {name: _inputs(shape, i) for i, (name, (shape, _)) in enumerate(CALLS.items())}
    alone = {name: _call(name, *inputs[name]) for name in CALLS}
    errors, different = [], []

    def run(i):
        try:
            for rep in range(8):
                name = list(CALLS)[(i + rep) % 2]          # the two calls overlap each other
                if not np.array_equal(_call(name, *inputs[name]), alone[name]):
                    different.append((i, rep, name))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not different, f"calls whose bits differ from the call alone: {different}"


def test_calls_on_other_threads_leave_the_blas_count_as_they_found_it():
    funcs = openblas_thread_functions()
    if funcs is None:
        pytest.skip("NumPy is not linked against OpenBLAS here")
    get, _ = funcs
    q, k, v = _inputs((3, 1, 600, 48), 0)
    with blas_threads(2):
        threads = [threading.Thread(target=lambda: [an.sdpa_forward(q, k, v) for _ in range(4)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert get() == 2               # overlapping calls restored the count they found


def test_openblas_local_thread_count_is_process_wide():
    """Why there is no per-thread setting to use: ``openblas_set_num_threads_local`` set on one
    thread is what every other thread reads (a fact of the OpenBLAS that NumPy ships)."""
    funcs = openblas_thread_functions()
    root = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    libs = sorted(root.glob("*openblas*"))
    if funcs is None or not libs:
        pytest.skip("NumPy is not linked against a bundled OpenBLAS here")
    lib = ctypes.CDLL(str(libs[0]))
    local = getattr(lib, "openblas_set_num_threads_local", None)
    if local is None:
        pytest.skip("this OpenBLAS has no openblas_set_num_threads_local")
    get, set_ = funcs
    before = get()
    try:
        t = threading.Thread(target=lambda: local(1 if before != 1 else 2))
        t.start()
        t.join()
        seen = get()
    finally:
        set_(before)
    assert seen != before, "the 'local' count set on another thread is not seen here"


def test_blocked_min_elements_is_what_the_calls_above_assume():
    assert 3 * 600 * 600 >= blocked.MIN_ELEMENTS and 220 * 600 >= blocked.MIN_ELEMENTS
