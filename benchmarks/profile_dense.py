"""Where the dense path's time goes: each step of sdpa_forward / sdpa_backward timed alone.

The steps are the lines of the fused kernel, ``attention_np/kernels/fused.py`` (no dropout, no
mask unless ``--causal``), each run on its own inputs; the median of the repeats is printed, with its
share of the sum. Matrix products use every BLAS thread; the elementwise passes over (L, S)
arrays run on one core (NumPy's ufuncs are single-threaded).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/profile_dense.py                 # (1, 8, 1024, 64), float32
    PYTHONPATH=. python benchmarks/profile_dense.py --causal --shape 1 8 2048 64
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import attention_np as an


def median_ms(f, repeats: int) -> float:
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def steps(q, k, v, dout, causal: bool) -> dict:
    """Each step with inputs prepared as the forward/backward would have them."""
    L, S = q.shape[-2], k.shape[-2]
    scale = np.float32(1 / np.sqrt(q.shape[-1]))
    kT, vT = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)
    scores = (q * scale) @ kT
    blocked = ~an.causal_mask(L, S)
    m = scores.max(axis=-1, keepdims=True)
    work = scores.copy()                       # overwritten by the in-place steps below
    out = an.softmax(scores) @ v
    dP = dout @ vT
    rowsum = (dout * out).sum(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    l = e.sum(axis=-1, keepdims=True)
    dout_l = dout / l
    fwd = {
        "scores = (q * scale) @ k.T       [matmul, new (L, S)]": lambda: (q * scale) @ kT,
        "m = scores.max(-1)               [read (L, S)]": lambda: scores.max(axis=-1, keepdims=True),
        "scores -= m                      [r/w (L, S)]": lambda: np.subtract(work, m, out=work),
        "e = np.exp(scores, out=scores)   [r/w (L, S)]": lambda: np.exp(scores, out=work),
        "l = e.sum(-1)                    [read (L, S)]": lambda: e.sum(axis=-1, keepdims=True),
        "out = e @ v                      [matmul]": lambda: e @ v,
        "out /= l                         [(L, d_v)]": lambda: np.divide(out, l, out=out),
    }
    if causal:
        fwd["copyto(scores, -inf, where=~mask) [r/w (L, S)]"] = lambda: np.copyto(work, -np.inf,
                                                                                 where=blocked)
    bwd = {
        "dout_l = dout / l                [(L, d_v)]": lambda: dout / l,
        "dv = e.T @ dout_l                [matmul]": lambda: np.swapaxes(e, -1, -2) @ dout_l,
        "dP = dout_l @ v.T                [matmul, new (L, S)]": lambda: dout_l @ vT,
        "rowsum = sum(dout_l * out, -1)   [(L, d_v)]": lambda: (dout_l * out).sum(axis=-1, keepdims=True),
        "dP -= rowsum                     [r/w (L, S)]": lambda: np.subtract(dP, rowsum, out=work),
        "dP *= e                          [r/w (L, S)]": lambda: np.multiply(work, e, out=work),
        "dq = (dscores @ k) * scale       [matmul]": lambda: (work @ k) * scale,
        "dk = dscores.T @ (q * scale)     [matmul]": lambda: np.swapaxes(work, -1, -2) @ (q * scale),
    }
    return {"forward": fwd, "backward": bwd}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=4, default=[1, 8, 1024, 64],
                        metavar=("B", "H", "L", "d"))
    parser.add_argument("--causal", action="store_true", help="add the causal mask step")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal(args.shape).astype(np.float32) for _ in range(4))
    print(f"(B, H, L, d) = {tuple(args.shape)}, float32, median of {args.repeats}, ms\n")
    for phase, cases in steps(q, k, v, dout, args.causal).items():
        times = {name: median_ms(f, args.repeats) for name, f in cases.items()}
        total = sum(times.values())
        print(f"{phase}: sum of steps {total:.1f} ms")
        for name, t in times.items():
            print(f"  {name:<56} {t:7.2f}  {100 * t / total:3.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
