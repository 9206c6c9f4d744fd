"""Eq. (1) against NumPy's own floor: each kernel's time over its matrix products' time alone.

The floor of Eq. (1) in NumPy is its matrix products: forward ``q @ k.T`` and ``w @ v``;
forward+backward those and the backward's four (``dout @ v.T``, ``w.T @ dout``, ``dS @ k``,
``dS.T @ q``), at the same dtype and thread count. Everything else a kernel does (scale, mask,
exp, row sums, Python) is overhead over that floor. This script times, in one run, every case
interleaved with every other (each round runs each case once, so that a burst of load from
elsewhere hits them all), keeps the minimum of the rounds, and prints

- dense forward / floor forward, dense forward+backward / floor forward+backward, tiled
  forward+backward / floor forward+backward, causal as information rows (a causal kernel skips
  masked blocks, so it can beat the dense floor: those rows also show the *causal floor*, the
  same products restricted to the blocks on or below the diagonal);
- PyTorch SDPA (forward under ``no_grad``, forward+backward with autograd) over the same floor,
  timed in a group of its own (torch and the plain floor interleaved), after ours: PyTorch's
  OpenMP threads spin after each call and would take a core from our worker threads;

at one and at two threads: BLAS through :func:`attention_np.kernels.threads.blas_threads`, the
kernels' worker pool through ``ATTENTION_NP_NUM_THREADS``, torch through ``set_num_threads``.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/floor.py                      # (1, 8, 1024, 64), float32, 1 and 2 threads
    PYTHONPATH=. python benchmarks/floor.py --rounds 30 --threads 1
    PYTHONPATH=. python benchmarks/floor.py --shape 1 8 512 64 --no-torch
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from attention_np.kernels.threads import blas_threads, num_threads, parallel_map

# The cases themselves are bench_attention.py's (this file's folder is on sys.path when it runs
# as a script, as performance_page.py runs it).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attention import numpy_cases, torch_cases  # noqa: E402

TARGETS = {"dense fwd": 1.4, "dense f+b": 1.2, "tiled f+b": 1.3}


def causal_floor_cases(q, k, v, dout, block: int) -> dict:
    """The matrix products of the blocks on or below the diagonal only (rows ``i:i+block``
    against keys ``0:i+block``): the products a causal kernel cannot skip."""
    kT, vT = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)
    L = q.shape[-2]

    def fwd(i, j):
        s = q[..., i:j, :] @ kT[..., :j]                        # (..., R, S') scores
        return s, s @ v[..., :j, :]

    def fwd_bwd(i, j):
        s, out = fwd(i, j)
        dP = dout[..., i:j, :] @ vT[..., :j]                    # (..., R, S')
        return (out, np.swapaxes(s, -1, -2) @ dout[..., i:j, :], dP @ k[..., :j, :],
                np.swapaxes(dP, -1, -2) @ q[..., i:j, :])

    return {"causal floor fwd": lambda: [fwd(i, min(i + block, L))[1] for i in range(0, L, block)],
            "causal floor f+b": lambda: [fwd_bwd(i, min(i + block, L)) for i in range(0, L, block)]}


def heads_floor_cases(q, k, v, dout) -> dict:
    """The same products with the heads shared out to the worker threads, BLAS on one thread in
    each (what the kernels do on several threads): a floor that two threads can beat the plain
    one by, where a head's products are too small to split well inside BLAS."""
    flats = [x.reshape((-1,) + x.shape[-2:]) for x in (q, k, v, dout)]     # (N, ., .) each
    n, workers = len(flats[0]), num_threads()
    edges = [n * w // workers for w in range(workers + 1)]
    parts = [tuple(x[a:b] for x in flats) for a, b in zip(edges, edges[1:], strict=False) if b > a]

    def run(products):
        return parallel_map(lambda p: products(*p), parts)

    def fwd(q, k, v, dout):
        return (q @ np.swapaxes(k, -1, -2)) @ v

    def fwd_bwd(q, k, v, dout):
        s = q @ np.swapaxes(k, -1, -2)
        dP = dout @ np.swapaxes(v, -1, -2)
        return s @ v, np.swapaxes(s, -1, -2) @ dout, dP @ k, np.swapaxes(dP, -1, -2) @ q

    return {"heads floor fwd": lambda: run(fwd), "heads floor f+b": lambda: run(fwd_bwd)}


def min_times(cases: dict, rounds: int, clock=time.perf_counter) -> dict:
    """Minimum time (ms) of each case over ``rounds`` rounds, every case once per round."""
    for f in cases.values():       # warm-up: first-call allocations, thread pools
        f()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(rounds):
        for name, f in cases.items():
            t0 = clock()
            f()
            best[name] = min(best[name], clock() - t0)
    return {name: 1e3 * t for name, t in best.items()}


def measure(shape, threads: int, causal: bool, rounds: int, block_size: int, torch,
            clock=time.perf_counter) -> dict:
    """Times (ms) of the kernels, the floors and torch, at ``threads`` threads."""
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    env_before = os.environ.get("ATTENTION_NP_NUM_THREADS")
    os.environ["ATTENTION_NP_NUM_THREADS"] = str(threads)
    torch_before = None if torch is None else torch.get_num_threads()
    try:
        cases = numpy_cases(q, k, v, dout, causal, block_size)     # the kernels and the plain floor
        floors = {name: cases[name] for name in ("floor fwd", "floor f+b")}
        if threads > 1:
            cases.update(heads_floor_cases(q, k, v, dout))
        if causal:
            cases.update(causal_floor_cases(q, k, v, dout, block_size))
        with blas_threads(threads):
            times = min_times(cases, rounds, clock)
        if torch is not None:
            # A group of its own, with its own floor: PyTorch's OpenMP threads keep spinning for
            # a while after each call, and interleaved with our kernels they took a core from
            # our worker threads (dense forward at two threads: 1.26x the floor alone, 1.55x
            # interleaved with torch, on the same quiet machine).
            torch.set_num_threads(threads)
            with blas_threads(threads):
                group = min_times({**torch_cases(torch, q, k, v, dout, causal),
                                   **{f"torch group {name}": f for name, f in floors.items()}},
                                  rounds, clock)
            times.update(group)
        return times
    finally:
        if env_before is None:
            del os.environ["ATTENTION_NP_NUM_THREADS"]
        else:
            os.environ["ATTENTION_NP_NUM_THREADS"] = env_before
        if torch is not None:
            torch.set_num_threads(torch_before)


def floors(t: dict, which: str) -> tuple[float, str]:
    """The lowest floor measured for ``which`` ("fwd" or "f+b") and its name."""
    names = [n for n in (f"floor {which}", f"heads floor {which}", f"causal floor {which}") if n in t]
    best = min(names, key=t.get)
    return t[best], best


def rows(t: dict, causal: bool, threads: int):
    """Table rows: each kernel over the plain floor and over the lowest floor, torch beside it."""
    for name in ("dense fwd", "dense f+b", "tiled f+b"):
        which = "fwd" if "fwd" in name else "f+b"
        plain = t[f"floor {which}"]
        low, low_name = floors(t, which)
        torch_name = f"torch {which}"
        torch_cell = (f"{t[torch_name] / t[f'torch group floor {which}']:.2f}x"
                      if torch_name in t and name != "tiled f+b" else "")
        goal = "(info)" if causal else f"<= {TARGETS[name]}x"
        label = name + (" causal" if causal else "")
        yield (f"| {label} | {threads} | {t[name] / plain:.2f}x | {t[name] / low:.2f}x ({low_name}) "
               f"| {torch_cell} | {goal} | {plain:.1f} | {t[name]:.1f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, default=(1, 8, 1024, 64),
                        metavar=("B", "H", "L", "d"))
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds; min is kept")
    parser.add_argument("--block-size", type=int, default=128, help="tiled kernel's key block")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall time (default), or the process's CPU time: on one thread, a "
                             "comparison that load from other processes barely changes")
    args = parser.parse_args(argv)
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("(torch is not installed: no torch column)")
    shape = tuple(args.shape)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"{shape} float32, {args.clock} time, min of {args.rounds} interleaved rounds; "
          f"numpy {np.__version__}, "
          f"{os.cpu_count()} logical cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n| case | threads | ours / floor | ours / lowest floor | torch / floor | target | floor ms "
          "| ours ms |")
    print("|---|---|---|---|---|---|---|---|")
    for causal in (False, True):
        for n in args.threads:
            t = measure(shape, n, causal, args.rounds, args.block_size, torch, clock)
            for row in rows(t, causal, n):
                print(row, flush=True)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
