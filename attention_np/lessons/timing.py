"""Timing for the lessons: verdicts that survive a busy machine.

A timing in a notebook is only worth printing if a rerun on a loaded machine, or another CPU, gives
the same verdict. Three things make that so here:

- **one BLAS thread** (:func:`attention_np.kernels.threads.blas_threads`): with the default threads on a
  busy 2-core machine, OpenBLAS threads wait for each other and one side of a comparison can be
  slowed ten-fold at random (we measured eight heads "11.4x slower", then "1.42x", for the same call);
- **the CPU time of the calling thread** (``time.thread_time``), not the wall clock: with BLAS on
  one thread all the work runs in the calling thread, and its CPU time does not count the moments
  the operating system gave the core to another process (the wall clock does: on a loaded 2-core
  machine it made one call 3x slower than the other in one run and not in the next);
- **interleaved repeats, minimum kept**: the contestants take turns, so what the load still does
  (caches shared with other processes) hits both, and the minimum of several runs is the run least
  disturbed;
- **a GFLOP/s figure** printed next to each time, from an operation count, so a reader can see at once
  whether a time is plausible for the CPU (a few GFLOP/s per core for NumPy's float64 BLAS) or was
  inflated by the machine.

A notebook then asserts its verdict with a margin that the load and another CPU keep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from attention_np._checks import check_callable, check_choice, check_count, check_number
from attention_np.kernels.threads import blas_threads


def _seconds_per_call(f: Callable[[], object], number: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(number):
        f()
    return (clock() - start) / number


def best_times(contestants: dict[str, Callable[[], object]], *, repeat: int = 5,
               min_seconds: float = 0.02, threads: int = 1, clock: str = "cpu") -> dict[str, float]:
    """Seconds per call of each contestant: the minimum over ``repeat`` interleaved runs.

    Parameters
    ----------
    contestants : dict of name -> function of no argument
        What to time. Each is called once first (warm-up, not timed).
    repeat : int
        Runs per contestant; the contestants take turns, run by run.
    min_seconds : float
        Each run calls the function ``number`` times, ``number`` chosen at warm-up so that a run
        takes at least this long (short calls are otherwise dominated by the clock's resolution).
    threads : int
        BLAS threads during the measurement (one: see the module docstring).
    clock : {"cpu", "wall"}
        ``"cpu"``: CPU seconds of the calling thread (``time.thread_time``; with more than one BLAS
        thread it misses the other threads' work, so it requires ``threads=1``); ``"wall"``:
        ``time.perf_counter``.

    Returns
    -------
    dict of name -> float, seconds per call.
    """
    if not isinstance(contestants, dict) or not contestants:
        raise TypeError(f"contestants must be a non-empty dict of name -> function, got "
                        f"{contestants!r:.60}")
    for name, f in contestants.items():
        check_callable(f, f"contestants[{name!r}]", what="a function of no argument", arity=0)
    check_count(repeat, "repeat")
    check_number(min_seconds, "min_seconds", low=0, low_open=True)
    check_count(threads, "threads")
    clocks = {"cpu": time.thread_time, "wall": time.perf_counter}
    check_choice(clock, "clock", clocks)
    if clock == "cpu" and threads != 1:
        raise ValueError(f"clock='cpu' times the calling thread only: it needs threads=1, got {threads}")
    tick = clocks[clock]
    with blas_threads(threads):
        numbers = {}
        for name, f in contestants.items():
            once = _seconds_per_call(f, 1, tick)                # warm-up, and a first estimate
            numbers[name] = max(1, int(min_seconds / max(once, 1e-9)))
        best = {name: float("inf") for name in contestants}
        for _ in range(repeat):
            for name, f in contestants.items():
                best[name] = min(best[name], _seconds_per_call(f, numbers[name], tick))
    return best


def gflops(flops: float, seconds: float) -> float:
    """Billions of floating-point operations per second.

    Parameters
    ----------
    flops : float >= 0
    seconds : float > 0
    """
    check_number(flops, "flops", low=0)
    check_number(seconds, "seconds", low=0, low_open=True)
    return flops / seconds / 1e9
