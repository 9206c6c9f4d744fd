"""Eq. (1) on one thread next to PyTorch's CPU SDPA and next to NumPy's own floor for the work.

One process, one thread everywhere (OpenBLAS, MKL, OpenMP, torch and attention_np's worker pool),
float32, default shape (1, 8, 1024, 64). Each round runs every case once, in an order rotated from
round to round, so that load from elsewhere hits all of them alike; each ratio is taken round by
round (ours and the other timed within the same round) and the median of the rounds printed with
its spread (the 25th to 75th percentile of the per-round ratios, and the min-max).

The cases:

- ours: dense forward (``sdpa_forward``), dense forward+backward (``sdpa_forward`` +
  ``sdpa_backward``), tiled forward+backward (``flash_attention_forward`` / ``_backward``);
- torch: ``scaled_dot_product_attention`` under ``no_grad``, and forward+backward by autograd on
  fresh leaves each call;
- the floor: NumPy's matrix products and exponentials that Eq. (1) cannot avoid, at the same
  dtype and thread, into memory allocated once: forward ``s = q @ k.T``, ``exp(s)`` in place,
  ``s @ v``; forward+backward those and ``dout @ v.T``, ``s.T @ dout``, ``dP @ k``, ``dP.T @ q``
  (the causal backward's partial sums of ``dv``, ``dk`` are not added up). Causal: the same on the
  attended part only, query rows cut into blocks of ``R`` rows that read keys ``0 : i + R``
  (the diagonal blocks' upper corner is the one waste; the lowest over ``R`` in ``--floor-rows``
  is the floor).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/vs_torch.py                   # (1, 8, 1024, 64), 15 rounds
    PYTHONPATH=. python benchmarks/vs_torch.py --rounds 31 --shape 1 8 512 64
    PYTHONPATH=. python benchmarks/vs_torch.py --clock cpu       # on a loaded machine
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "ATTENTION_NP_NUM_THREADS"):
    os.environ[_name] = "1"            # before NumPy and torch load their thread pools

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import attention_np as an  # noqa: E402
from attention_np.kernels.threads import blas_threads  # noqa: E402


def ours(q, k, v, dout, causal: bool) -> dict:
    def fwd():
        return an.sdpa_forward(q, k, v, is_causal=causal)

    def fwd_bwd():
        _, cache = an.sdpa_forward(q, k, v, is_causal=causal)
        return an.sdpa_backward(dout, cache)

    def tiled_fwd_bwd():
        _, cache = an.flash_attention_forward(q, k, v, is_causal=causal)
        return an.flash_attention_backward(dout, cache)

    return {"ours fwd": fwd, "ours f+b": fwd_bwd, "tiled f+b": tiled_fwd_bwd}


def torch_cases(torch, q, k, v, dout, causal: bool) -> dict:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tq, tk, tv, tdout = (torch.from_numpy(x) for x in (q, k, v, dout))
    leaves = [x.clone().requires_grad_() for x in (tq, tk, tv)]

    def fwd():
        with torch.no_grad():
            return sdpa(tq, tk, tv, is_causal=causal)

    def fwd_bwd():
        for x in leaves:
            x.grad = None
        sdpa(*leaves, is_causal=causal).backward(tdout)

    return {"torch fwd": fwd, "torch f+b": fwd_bwd}


def floor_cases(q, k, v, dout, causal: bool, rows_options) -> dict:
    """The products and exps alone (see the module docstring), each written into memory allocated
    once (``out=``): no allocation, no page fault, the least NumPy can take for the work."""
    kT, vT = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)
    L, S = q.shape[-2], k.shape[-2]
    batch = q.shape[:-2]
    buf = {name: np.empty(batch + shape, q.dtype) for name, shape in
           (("s", (L, S)), ("dP", (L, S)), ("out", (L, v.shape[-1])), ("dv", (S, v.shape[-1])),
            ("dq", (L, q.shape[-1])), ("dk", (S, k.shape[-1])))}

    def fwd(i, j, span):
        s = np.matmul(q[..., i:j, :], kT[..., :span], out=buf["s"][..., i:j, :span])   # (..., R, S')
        np.exp(s, out=s)
        return s, np.matmul(s, v[..., :span, :], out=buf["out"][..., i:j, :])

    def fwd_bwd(i, j, span):
        s, out = fwd(i, j, span)
        dP = np.matmul(dout[..., i:j, :], vT[..., :span], out=buf["dP"][..., i:j, :span])
        return (out, np.matmul(np.swapaxes(s, -1, -2), dout[..., i:j, :], out=buf["dv"][..., :span, :]),
                np.matmul(dP, k[..., :span, :], out=buf["dq"][..., i:j, :]),
                np.matmul(np.swapaxes(dP, -1, -2), q[..., i:j, :], out=buf["dk"][..., :span, :]))

    if not causal:
        return {"floor fwd": lambda: fwd(0, L, S), "floor f+b": lambda: fwd_bwd(0, L, S)}
    cases = {}
    for R in rows_options:
        blocks = [(i, min(i + R, L), min(i + R, L)) for i in range(0, L, R)]
        cases[f"floor fwd R={R}"] = lambda b=blocks: [fwd(*x) for x in b]
        cases[f"floor f+b R={R}"] = lambda b=blocks: [fwd_bwd(*x) for x in b]
    return cases


def rounds_of(cases: dict, rounds: int, clock=time.perf_counter) -> dict:
    """Seconds of each case in each round, every case once per round, the order rotated."""
    for f in cases.values():           # warm-up: first-call allocations, scratch buffers
        f()
    names = list(cases)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = clock()
            cases[name]()
            times[name].append(clock() - t0)
    return times


def ratio(times: dict, a: str, b: str) -> str:
    """``a / b``: the median of the per-round ratios, its interquartile range and min-max."""
    r = sorted(x / y for x, y in zip(times[a], times[b], strict=True))
    q1, _, q3 = statistics.quantiles(r, n=4) if len(r) > 1 else (r[0], r[0], r[0])
    return f"{statistics.median(r):.2f}x [{q1:.2f}-{q3:.2f}, {r[0]:.2f}-{r[-1]:.2f}]"


def best_floor(times: dict, which: str) -> str:
    names = [n for n in times if n.startswith(f"floor {which}")]
    return min(names, key=lambda n: statistics.median(times[n]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, default=(1, 8, 1024, 64), metavar=("B", "H", "L", "d"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--floor-rows", type=int, nargs="+", default=[64, 128, 256],
                        help="row blocks of the causal floor; the lowest is the floor")
    parser.add_argument("--causal", choices=["both", "no", "yes"], default="both")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall time, or the process's CPU time (one thread: what load from other "
                             "processes changes least)")
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal(tuple(args.shape)).astype(np.float32) for _ in range(4))
    print(f"{tuple(args.shape)} float32, one thread, {args.clock} time, {args.rounds} rounds "
          f"interleaved; numpy {np.__version__}, torch {torch.__version__}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("ratio: median of the per-round ratios [25-75th percentile, min-max]\n")
    print("| case | ours ms | torch ms | floor ms | ours / torch | ours / floor | torch / floor |")
    print("|---|---|---|---|---|---|---|")
    for causal in {"both": (False, True), "no": (False,), "yes": (True,)}[args.causal]:
        cases = {**ours(q, k, v, dout, causal), **torch_cases(torch, q, k, v, dout, causal),
                 **floor_cases(q, k, v, dout, causal, args.floor_rows)}
        with blas_threads(1):
            times = rounds_of(cases, args.rounds, clock)
        for name, which in (("ours fwd", "fwd"), ("ours f+b", "f+b"), ("tiled f+b", "f+b")):
            floor = best_floor(times, which)
            med = {n: 1e3 * statistics.median(times[n]) for n in (name, f"torch {which}", floor)}
            label = ("dense " if name != "tiled f+b" else "") + name.replace("ours ", "") \
                + (" causal" if causal else "")
            print(f"| {label} | {med[name]:.1f} | {med[f'torch {which}']:.1f} | {med[floor]:.1f} "
                  f"({floor.removeprefix(f'floor {which}').strip() or 'dense'}) "
                  f"| {ratio(times, name, f'torch {which}')} | {ratio(times, name, floor)} "
                  f"| {ratio(times, f'torch {which}', floor)} |", flush=True)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
