"""float32 accuracy of attention_np next to PyTorch's, both against a float64 oracle.

For random cases with softmaxes from flat to sharp (q scaled by ``sharpness``), causal and not,
it runs ``sdpa_forward``/``sdpa_backward`` (and the tiled kernel, ``flash_attention_forward``/
``flash_attention_backward``) and PyTorch's ``scaled_dot_product_attention`` (with
autograd) in float32, and attention_np in float64 as the oracle. For ``out``, ``dq``, ``dk`` and
``dv`` it sums, over the cases, the largest error relative to the oracle's largest entry, and
prints ours / PyTorch's: a ratio <= 1 means attention_np's float32 is at least as accurate.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/float32_accuracy.py            # 16 cases per row
    PYTHONPATH=. python benchmarks/float32_accuracy.py --cases 64 --L 512
"""

from __future__ import annotations

import argparse

import numpy as np

import attention_np as an
from attention_np._optional import import_optional

NAMES = ("out", "dq", "dk", "dv")


def relative_errors(results, oracle) -> np.ndarray:
    """max |result - oracle| / max |oracle|, one number per array."""
    return np.array([np.abs(r.astype(np.float64) - o).max() / np.abs(o).max()
                     for r, o in zip(results, oracle, strict=True)])


def ours(q, k, v, dout, causal, kernel="dense"):
    if kernel == "tiled":
        out, cache = an.flash_attention_forward(q, k, v, is_causal=causal)
        return (out, *an.flash_attention_backward(dout, cache))
    out, cache = an.sdpa_forward(q, k, v, is_causal=causal)
    return (out, *an.sdpa_backward(dout, cache))


def theirs(torch, q, k, v, dout, causal):
    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    out.backward(torch.from_numpy(dout))
    return [x.detach().numpy() for x in (out, tq.grad, tk.grad, tv.grad)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=16, help="random cases per row")
    parser.add_argument("--L", type=int, default=256, help="query and key positions")
    parser.add_argument("--d", type=int, default=64, help="d_k = d_v")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kernel", choices=["dense", "tiled", "both"], default="both",
                        help="sdpa_forward (dense), flash_attention_forward (tiled, key blocks of "
                             "128), or both (default)")
    args = parser.parse_args(argv)
    torch = import_optional("torch", "frameworks")

    print(f"float32 error against a float64 oracle, summed over {args.cases} cases of "
          f"(1, {args.heads}, {args.L}, {args.d}); ratio = attention_np / PyTorch {torch.__version__}")
    kernels = ["dense", "tiled"] if args.kernel == "both" else [args.kernel]
    print(f"{'kernel':>6} {'sharpness':>9} {'causal':>6} " + " ".join(f"{n:>6}" for n in NAMES)
          + "   ours out")
    worst = dict.fromkeys(kernels, 0.0)
    for sharpness in (1.0, 4.0, 16.0):
        for causal in (False, True):
            mine, torch_err = {kern: np.zeros(4) for kern in kernels}, np.zeros(4)
            for seed in range(args.cases):
                rng = np.random.default_rng(seed)
                shape = (1, args.heads, args.L, args.d)
                q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
                q *= np.float32(sharpness)
                out64, cache64 = an.sdpa_forward(*(x.astype(np.float64) for x in (q, k, v)),
                                                 is_causal=causal)
                oracle = (out64, *an.sdpa_backward(dout.astype(np.float64), cache64))
                for kern in kernels:
                    mine[kern] += relative_errors(ours(q, k, v, dout, causal, kern), oracle)
                torch_err += relative_errors(theirs(torch, q, k, v, dout, causal), oracle)
            for kern in kernels:
                ratio = mine[kern] / torch_err
                worst[kern] = max(worst[kern], ratio.max())
                print(f"{kern:>6} {sharpness:9g} {str(causal):>6} " + " ".join(f"{r:6.2f}" for r in ratio)
                      + f"   {mine[kern][0] / args.cases:.2e}")
    for kern in kernels:
        print(f"largest ratio, {kern}: {worst[kern]:.2f}")


if __name__ == "__main__":
    main()
