"""What attention sinks cost in the dense kernel: the sink as one term of each row's max and
softmax denominator (what ``sdpa_sinks_forward`` does) next to the sink as an appended key (a zero
key and value, a bias column of the sink logits, an (L, S + 1) mask: how it was done before
0.2.0, rebuilt here on the same fused kernel) and next to plain Eq. (1) without sinks.

Each case runs the three in turn, round after round; the median time of each is printed, with
the peak memory traced by ``tracemalloc`` for one call (NumPy reports its arrays to it) and the
ratios to the sinks-as-a-term path, all measured in the same run.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/sinks.py                       # (1, 8, 1024, 64), a minute
    PYTHONPATH=. python benchmarks/sinks.py --backward            # forward + backward
    PYTHONPATH=. python benchmarks/sinks.py --quick               # seconds
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

import attention_np as an
from attention_np.kernels import fused
from attention_np.kernels.plan import Plan


def sinks_as_a_key(q, k, v, sinks, mask=None, bias=None, is_causal=False):
    """Eq. (1) with one more key per head: score ``sinks[n]`` (a bias column), value 0."""
    L, S, h = q.shape[-2], k.shape[-2], q.shape[-3]
    allowed = np.ones((L, S), bool)
    if is_causal:
        allowed &= an.causal_mask(L, S)
    if mask is not None:
        allowed = allowed & mask
    mask_ext = np.concatenate([allowed, np.ones(allowed.shape[:-1] + (1,), bool)], axis=-1)
    base = np.zeros((L, S), q.dtype) if bias is None else bias
    heads = np.broadcast_shapes(base.shape[:-2], (h,))
    sink_col = np.broadcast_to(sinks[:, None, None], heads + (L, 1))
    bias_ext = np.concatenate([np.broadcast_to(base, heads + (L, S)), sink_col], axis=-1)
    k_ext = np.concatenate([k, np.zeros(k.shape[:-2] + (1, k.shape[-1]), k.dtype)], axis=-2)
    v_ext = np.concatenate([v, np.zeros(v.shape[:-2] + (1, v.shape[-1]), v.dtype)], axis=-2)
    return fused.sdpa_plan(q, k_ext, v_ext, Plan(mask=mask_ext, bias=bias_ext))


def sinks_as_a_key_backward(dout, cache, S):
    """Backward of :func:`sinks_as_a_key`: ``dsinks`` is the sink column's bias gradient."""
    dq, dk, dv, dbias = fused.sdpa_backward(dout, cache, return_dbias=True)
    return dq, dk[..., :S, :], dv[..., :S, :], dbias[..., S].sum(axis=tuple(range(dbias.ndim - 3)) + (-1,))


def case(shape, dtype, name, rng, backward: bool):
    B, H, L, D = shape
    q, k, v, dout = (rng.standard_normal((B, H, L, D)).astype(dtype) for _ in range(4))
    sinks = rng.standard_normal(H).astype(dtype)
    options = {"none": {}, "causal": {"is_causal": True},
               "mask": {"mask": rng.random((B, 1, L, L)) > 0.1},
               "bias": {"bias": rng.standard_normal((H, L, L)).astype(dtype)}}[name]
    forward = {
        "term": lambda: an.sdpa_sinks_forward(q, k, v, sinks, **options),
        "key": lambda: sinks_as_a_key(q, k, v, sinks, **options),
        "none": lambda: fused.sdpa_plan(q, k, v, Plan(**options)),
    }
    backward_of = {"term": lambda c: an.sdpa_sinks_backward(dout, c),
                   "key": lambda c: sinks_as_a_key_backward(dout, c, L),
                   "none": lambda c: fused.sdpa_backward(dout, c)}
    runs = forward if not backward else {
        key: (lambda f=f, b=backward_of[key]: b(f()[1])) for key, f in forward.items()}
    # the two sinks paths give the same numbers (float64: rounding; float32: its own)
    a = (forward["term"]()[0],) + tuple(backward_of["term"](forward["term"]()[1]))
    b = (forward["key"]()[0],) + tuple(backward_of["key"](forward["key"]()[1]))
    return runs, max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))


def peak_mib(f) -> float:
    tracemalloc.start()
    result = f()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    return peak / 2**20


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=4, default=(1, 8, 1024, 64), metavar=("B", "H", "L", "D"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="(1, 2, 64, 16), 2 rounds")
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    args = parser.parse_args(argv)
    shape, rounds = ((1, 2, 64, 16), 2) if args.quick else (tuple(args.shape), args.rounds)
    rng = np.random.default_rng(0)
    what = "forward + backward" if args.backward else "forward"
    print(f"shape {shape}, {what}, median of {rounds} rounds; peak = tracemalloc, one call; "
          f"max abs diff of out and every gradient, term vs key")
    print("| dtype | options | sinks as a term ms | as a key ms | no sinks ms | key / term time "
          "| term MiB | key MiB | no sinks MiB | key / term memory | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dtype in (np.float32, np.float64):
        for name in ("none", "causal", "mask", "bias"):
            runs, diff = case(shape, dtype, name, rng, args.backward)
            times = {key: [] for key in runs}
            for _ in range(rounds):
                for key, f in runs.items():
                    t0 = time.perf_counter()
                    f()
                    times[key].append(time.perf_counter() - t0)
            ms = {key: 1e3 * statistics.median(t) for key, t in times.items()}
            mib = {key: peak_mib(f) for key, f in runs.items()}
            print(f"| {np.dtype(dtype).name} | {name} | {ms['term']:.1f} | {ms['key']:.1f} | "
                  f"{ms['none']:.1f} | {ms['key'] / ms['term']:.2f}x | {mib['term']:.2f} | "
                  f"{mib['key']:.2f} | {mib['none']:.2f} | {mib['key'] / mib['term']:.2f}x | {diff:.1e} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
