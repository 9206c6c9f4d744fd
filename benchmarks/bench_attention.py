"""How fast and how big: attention_np next to PyTorch's CPU scaled_dot_product_attention.

Float32 inputs, one process. For each (B, H, L, d), causal and not, it times

- ours: dense forward (``sdpa_forward``), dense forward+backward, tiled forward+backward
  (``flash_attention_forward``/``backward``);
- PyTorch: SDPA forward under ``no_grad``, and SDPA forward+backward with autograd;
- the floor: NumPy's matrix products alone (2 for the forward: QKᵀ and PV; 6 for
  forward+backward), the work no attention in NumPy can avoid,

with interleaved repeats (every case once per round, so that a burst of load from elsewhere
hits all of them; see ``median_times`` for how the libraries' threads are kept from slowing each
other) and prints medians in milliseconds, and the ratios ours / PyTorch. Then it
measures the peak traced memory (``tracemalloc``) of dense and tiled forward+backward as L grows.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_attention.py              # default sweep, a few minutes
    PYTHONPATH=. python benchmarks/bench_attention.py --quick      # seconds: a smoke test
    PYTHONPATH=. python benchmarks/bench_attention.py --full       # more shapes
    PYTHONPATH=. python benchmarks/bench_attention.py --memory-L 1024 4096 16384   # the 16384 point
    PYTHONPATH=. python benchmarks/bench_attention.py --shape 1 8 1024 64 --memory-L 16384
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import tracemalloc

import numpy as np

import attention_np as an
from attention_np.kernels import scratch

DEFAULT_SHAPES = [(1, 8, 256, 64), (1, 8, 512, 64), (1, 8, 1024, 64), (4, 8, 512, 64)]
FULL_SHAPES = DEFAULT_SHAPES + [(1, 8, 2048, 64), (1, 16, 1024, 32), (2, 12, 1024, 128),
                                (8, 8, 256, 64)]
QUICK_SHAPES = [(1, 2, 64, 16)]
TARGET = (1, 8, 1024, 64)   # the shape of the targets in docs/performance.md (against torch, the floor)


def inputs(B, H, L, d, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, H, L, d)).astype(np.float32) for _ in range(4)]  # q, k, v, dout


def numpy_cases(q, k, v, dout, causal: bool, block_size: int) -> dict:
    def dense_fwd():
        return an.sdpa_forward(q, k, v, is_causal=causal)

    def dense_fwd_bwd():
        out, cache = an.sdpa_forward(q, k, v, is_causal=causal)
        return an.sdpa_backward(dout, cache)

    def tiled_fwd_bwd():
        out, cache = an.flash_attention_forward(q, k, v, is_causal=causal, block_size=block_size)
        return an.flash_attention_backward(dout, cache)

    kT, vT = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)

    def floor_fwd():               # scores = q @ k.T, out = weights @ v
        s = q @ kT
        return s @ v

    def floor_fwd_bwd():           # + dP = dout @ v.T, dv = P.T @ dout, dq = dS @ k, dk = dS.T @ q
        s = q @ kT
        out = s @ v
        dP = dout @ vT
        return out, np.swapaxes(s, -1, -2) @ dout, dP @ k, np.swapaxes(dP, -1, -2) @ q

    return {"dense fwd": dense_fwd, "dense f+b": dense_fwd_bwd, "tiled f+b": tiled_fwd_bwd,
            "floor fwd": floor_fwd, "floor f+b": floor_fwd_bwd}


def torch_cases(torch, q, k, v, dout, causal: bool) -> dict:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    tdout = torch.from_numpy(dout)
    leaves = [x.clone().requires_grad_() for x in (tq, tk, tv)]

    def torch_fwd():
        with torch.no_grad():
            return sdpa(tq, tk, tv, is_causal=causal)

    def torch_fwd_bwd():
        for x in leaves:
            x.grad = None
        sdpa(*leaves, is_causal=causal).backward(tdout)

    return {"torch fwd": torch_fwd, "torch f+b": torch_fwd_bwd}


def median_times(cases: dict, repeats: int, pause: float, settle: int,
                 clock=time.perf_counter) -> dict:
    """Median time (ms) of each case, the cases interleaved in every round.

    OpenBLAS's and PyTorch's OpenMP worker threads keep spinning for a while after a call
    (OpenBLAS's for about 0.1 s); on two cores they slow whichever library runs next. So in
    each round every case first rests ``pause`` seconds (the other library's threads go idle),
    then runs ``settle`` untimed calls (its own threads wake up), then one timed call: each
    library is timed in its steady state, as in a loop that calls the same attention again
    and again, and neither pays for the other.
    """
    for f in cases.values():      # warm-up: first-call allocations, thread pools
        f()
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, f in cases.items():
            time.sleep(pause)
            for _ in range(settle):
                f()
            t0 = clock()
            f()
            times[name].append(clock() - t0)
    return {name: 1e3 * statistics.median(ts) for name, ts in times.items()}


def peak_traced_mib(f, *args) -> float:
    """Peak of the memory allocated while ``f(*args)`` runs (its inputs already exist), from an
    empty scratch pool (``attention_np.kernels.scratch``): the kernel's reused buffers count."""
    scratch.release()
    tracemalloc.start()
    try:
        f(*args)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def machine(torch) -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = f"numpy {np.__version__}"
    if torch is not None:
        versions += f", torch {torch.__version__} ({torch.get_num_threads()} threads)"
    return f"{cpu}, {os.cpu_count()} logical cores, {versions}, Python {platform.python_version()}"


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _ms(t: float) -> str:
    return f"{t:.1f}" if t >= 1 else f"{t:.3g}"


def speed_table(shapes, torch, repeats, pause, settle, block_size, clock):
    cols = ["dense fwd", "torch fwd", "fwd ratio", "dense f+b", "torch f+b", "f+b ratio",
            "tiled f+b", "floor fwd", "floor f+b", "fwd/floor", "f+b/floor", "tiled/floor"]
    print("| B, H, L, d | causal | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 2))
    results = {}
    for B, H, L, d in shapes:
        q, k, v, dout = inputs(B, H, L, d)
        for causal in (False, True):
            cases = numpy_cases(q, k, v, dout, causal, block_size)
            if torch is not None:
                cases.update(torch_cases(torch, q, k, v, dout, causal))
            t = median_times(cases, repeats, pause, settle, clock)
            t["fwd ratio"] = t["dense fwd"] / t["torch fwd"] if torch else float("nan")
            t["f+b ratio"] = t["dense f+b"] / t["torch f+b"] if torch else float("nan")
            t["fwd/floor"] = t["dense fwd"] / t["floor fwd"]
            t["f+b/floor"] = t["dense f+b"] / t["floor f+b"]
            t["tiled/floor"] = t["tiled f+b"] / t["floor f+b"]
            results[(B, H, L, d, causal)] = t
            cells = [f"{t.get(c, float('nan')):.2f}x" if "ratio" in c or "/" in c
                     else _ms(t.get(c, float("nan")))
                     for c in cols]
            print(f"| {B}, {H}, {L}, {d} | {'yes' if causal else 'no'} | " + " | ".join(cells) + " |",
                  flush=True)
    return results


def _dense(q, k, v, dout):
    out, cache = an.sdpa_forward(q, k, v)
    an.sdpa_backward(dout, cache)


def _tiled(q, k, v, dout, block_size):
    out, cache = an.flash_attention_forward(q, k, v, block_size=block_size)
    an.flash_attention_backward(dout, cache)


def memory_table(lengths, d, block_size, dense_max):
    print("| L = S | dense f+b peak MiB | tiled f+b peak MiB | (L, S) float32 array MiB |")
    print("|---|---|---|---|")
    peaks = {}
    for L in lengths:
        q, k, v, dout = (x[0, 0] for x in inputs(1, 1, L, d))   # one head, (L, d)
        dense_mib = peak_traced_mib(_dense, q, k, v, dout) if L <= dense_max else float("nan")
        tiled_mib = peak_traced_mib(_tiled, q, k, v, dout, block_size)
        peaks[L] = (dense_mib, tiled_mib)
        dense_cell = f"{dense_mib:.1f}" if L <= dense_max else "(skipped)"
        print(f"| {L} | {dense_cell} | {tiled_mib:.1f} | {L * L * 4 / 2**20:.1f} |", flush=True)
    return peaks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="one tiny shape, one repeat (smoke test)")
    size.add_argument("--full", action="store_true", help="more shapes (B, H, L, d)")
    parser.add_argument("--shape", type=int, nargs=4, action="append", metavar=("B", "H", "L", "d"),
                        help="time this shape instead of a sweep (repeatable)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of timing (default 7)")
    parser.add_argument("--pause", type=float, default=None,
                        help="seconds of rest before each case in a round (default 0.2)")
    parser.add_argument("--settle", type=int, default=None,
                        help="untimed calls of a case before each timed one (default 1)")
    parser.add_argument("--block-size", type=int, default=128, help="tiled attention block size")
    parser.add_argument("--memory-L", type=int, nargs="*", default=None,
                        help="lengths of the memory table (default 1024 2048 4096)")
    parser.add_argument("--dense-max-L", type=int, default=4096,
                        help="longest L at which the dense path's memory is measured")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall time (default), or CPU time of the process: with "
                             "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 a single-core comparison "
                             "that load from other processes barely changes")
    parser.add_argument("--no-torch", action="store_true", help="time attention_np only")
    parser.add_argument("--runs", type=int, default=None,
                        help="times the whole speed table is measured, for the spread (default 3)")
    args = parser.parse_args(argv)

    shapes = QUICK_SHAPES if args.quick else FULL_SHAPES if args.full else DEFAULT_SHAPES
    shapes = [tuple(s) for s in args.shape] if args.shape else shapes
    repeats = args.repeats or (1 if args.quick else 7)
    settle = args.settle if args.settle is not None else (0 if args.quick else 1)
    pause = args.pause if args.pause is not None else (0.0 if args.quick else 0.2)
    lengths = args.memory_L or ([128, 256] if args.quick else [1024, 2048, 4096])
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("(torch is not installed: timing attention_np only)")

    print(f"Machine: {machine(torch)}")
    print(f"Load average before: {load()}")
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"\n{'Wall' if args.clock == 'wall' else 'CPU'} time, median of {repeats} interleaved rounds, ms "
          f"(float32; ratio = ours / torch):\n")
    runs = args.runs or (1 if args.quick else 3)
    speeds = []
    for run in range(runs):
        if runs > 1:
            print(f"\nRun {run + 1} of {runs} (load average {load()}):\n")
        speeds.append(speed_table(shapes, torch, repeats, pause, settle, args.block_size, clock))
    print(f"\nPeak traced memory of forward+backward, one head, d = 64, float32, "
          f"block_size = {args.block_size} (tracemalloc; inputs not counted):\n")
    peaks = memory_table(lengths, 64, args.block_size, args.dense_max_L)
    print(f"\nLoad average after: {load()}")

    if TARGET in shapes:
        print(f"\nRatios at (B, H, L, d) = (1, 8, 1024, 64), over {runs} run(s): median [min, max]; "
              f"targets: against torch, and against the floor (non-causal; "
              f"benchmarks/floor.py measures those at one and two threads)")
        targets = [("dense fwd / torch fwd", "fwd ratio", (1.25, 1.25), "torch"),
                   ("dense f+b / torch f+b", "f+b ratio", (1.0, 1.0), "torch"),
                   ("dense fwd / floor fwd", "fwd/floor", (1.4, None), "floor"),
                   ("dense f+b / floor f+b", "f+b/floor", (1.2, None), "floor"),
                   ("tiled f+b / floor f+b", "tiled/floor", (1.3, None), "floor")]
        for causal in (False, True):
            for label, key, goals, against in targets:
                r = [sp[(*TARGET, causal)][key] for sp in speeds]
                if np.isnan(r).any():
                    continue
                med = statistics.median(r)
                goal = goals[causal]
                verdict = ("(information)" if goal is None else
                           f"({against} target <= {goal}x: {'met' if med <= goal else 'not met'})")
                print(f"  causal={causal!s:5} {label}: {med:.2f}x [{min(r):.2f}, {max(r):.2f}] {verdict}")
    for L, (_, tiled) in peaks.items():
        if L >= 16384:
            print(f"  tiled f+b peak at L = S = {L}: {tiled:.1f} MiB"
                  + (f" (target <= 256 MiB: {'met' if tiled <= 256 else 'not met'})" if L == 65536 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
