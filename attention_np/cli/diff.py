"""``python -m attention_np diff``: attention_np against PyTorch, JAX and Flax, case by case.

Runs every case of :mod:`attention_np.interop.cases` forward and backward (random upstream
gradient) on each selected framework and on attention_np, prints one row per case and
framework, a column group per dtype, with the largest errors and the verdict of the tolerance policy
(:mod:`attention_np.interop.tolerance`), then demonstrates the known intentional differences
(:mod:`attention_np.interop.known`). Exit status 1 on any unexplained mismatch, when a
framework named with ``--framework`` is not installed (said on stderr, with the pip command), or
when no framework is installed at all; frameworks not installed under ``--framework all`` are
reported as skipped with the command that installs them, and a demonstration that needs one is
counted as "not run", never as "as documented".

Only NumPy is imported here; the frameworks are imported while the command runs.
"""

from __future__ import annotations

import importlib
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from attention_np._args import nonnegative_int
from attention_np._optional import install_hint
from attention_np.cli.progress import ProgressBar

FRAMEWORKS = ("torch", "jax", "flax")
DTYPES = ("float32", "float64")


def add_arguments(parser) -> None:
    parser.add_argument("--framework", choices=(*FRAMEWORKS, "all", "transformers"), default=None,
                        help="which framework to diff against (default: all installed; "
                             "'transformers': one attention layer per Hugging Face family, "
                             "not part of 'all')")
    parser.add_argument("--dtype", choices=(*DTYPES, "all"), default=None,
                        help="dtype of the inputs (default: both)")
    parser.add_argument("--seed", type=nonnegative_int, default=0,
                        help="seed of inputs and upstream gradients (>= 0)")
    parser.add_argument("--model", metavar="NAME|PATH", default=None,
                        help="diff every attention layer of a transformers model, run once, "
                             "layer by layer (float64): a tiny random model of family NAME "
                             "(bert, llama, t5, whisper, ...; an unknown NAME lists the known "
                             "ones), or a local checkpoint folder PATH (save_pretrained's: "
                             "config.json and weights; nothing is downloaded)")
    parser.add_argument("--cached", action="store_true",
                        help="with --model, a decoder: its prompt, then its last 2 tokens "
                             "continuing from the cache the prompt filled (what generate() "
                             "does), each call and each layer's cached keys and values diffed")


def check_args(parser, args) -> None:
    """Options that do not apply to what is asked are refused by name, before any work: a
    transformers model (``--model``) is diffed in float64 against its own layers, so neither
    ``--framework`` nor ``--dtype`` applies. (``--cached`` without ``--model`` and ``--dtype
    float32`` with ``--framework transformers`` are refused in one line by :func:`run`.)"""
    if args.model is not None and args.framework is not None:
        parser.error(f"argument --framework: got {args.framework!r} with --model, expected no "
                     f"--framework (--model diffs a transformers model against its own layers)")
    if args.model is not None and args.dtype is not None:
        parser.error(f"argument --dtype: got {args.dtype!r} with --model, expected no --dtype "
                     f"(--model runs in float64)")
    args.framework = "all" if args.framework is None else args.framework
    args.dtype = "all" if args.dtype is None else args.dtype


@dataclass
class Row:
    case: str
    framework: str
    dtype: str
    checks: list = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.checks)

    @property
    def other_rule(self) -> bool:
        """Judged by another dtype's rule (JAX float64 rows: the float32 rule)."""
        return bool(self.checks) and self.checks[0].rule != self.dtype


def _missing(framework: str) -> str | None:
    """Why ``framework`` cannot be imported, or None when it can."""
    try:
        importlib.import_module(framework)
    except ImportError as e:
        return str(e) or type(e).__name__
    return None


def _out_shape(kind: str, x: dict) -> tuple:
    if kind == "sdpa":
        return x["q"].shape[:-1] + (x["v"].shape[-1],)
    return x["query"].shape[:-1] + (x["params"]["W_o"].shape[1],)


def diff_case(case, framework: str, dtype: str, seed: int) -> Row:
    """Diff one case on one framework: outputs and every gradient, under the tolerance policy."""
    from attention_np.interop.runners import RUNNERS, cast, run_ours
    from attention_np.interop.tolerance import judge

    # JAX's softmax is float32 whatever the inputs (docs/frameworks.md): judge it as float32.
    float32_rule = dtype == "float32" or framework == "jax"
    # Under the float32 rule every side gets the same float32-rounded inputs (JAX float64 as
    # float64 arrays holding them), so no error measures the rounding of the inputs.
    rounded = np.float32 if float32_rule else dtype
    rng = np.random.default_rng(seed)
    x = cast(cast(case.build(rng), rounded), dtype)
    dout = rng.standard_normal(_out_shape(case.kind, x)).astype(rounded).astype(dtype)
    row = Row(case.name, framework, dtype)
    try:
        got = RUNNERS[framework](case.kind, x, dout)
    except Exception as e:  # a framework refusing a case is a finding, reported in the row
        row.error = f"{type(e).__name__}: {e}"
        return row
    oracle = run_ours(case.kind, cast(x, np.float64), dout.astype(np.float64))
    ours32 = run_ours(case.kind, cast(x, np.float32), dout.astype(np.float32)) if float32_rule else None
    # ours is held to the framework's error in turn only when both run in float32
    row.checks = judge(got, oracle, ours32, judge_ours=dtype == "float32")
    return row


def _fmt(e: float) -> str:
    return f"{e:.1e}" if np.isfinite(e) else str(e)


def _cells(row: Row) -> str:
    """``out err, grad err, err/tol`` of one dtype; ``*`` marks a row judged by another rule."""
    if row.error is not None:
        return f"{'ERROR':>8} {'':>9} {'':>9}"
    mine = [c for c in row.checks if not c.name.startswith("ours ")]
    out_err = next(c.err for c in mine if c.name == "out")
    grad_err = max((c.err for c in mine if c.name != "out"), default=0.0)
    worst = max(c.ratio for c in row.checks)
    mark = "*" if row.other_rule else " "
    return f"{_fmt(out_err):>8} {_fmt(grad_err):>9} {_fmt(worst):>8}{mark}"


def format_table(rows, dtypes=DTYPES) -> str:
    """One line per case and framework, one group of columns per dtype."""
    groups = {}
    for r in rows:
        groups.setdefault((r.case, r.framework), {})[r.dtype] = r
    top = f"{'':<27} {'':<6} " + " ".join(f"{'-- ' + d + ' --':^27}" for d in dtypes)
    head = (f"{'case':<27} {'fw':<6} "
            + " ".join(f"{'out err':>8} {'grad err':>9} {'err/tol':>8} " for _ in dtypes)
            + " verdict")
    lines = [top, head, "-" * len(head)]
    errors = []
    for (case, framework), by_dtype in groups.items():
        cells = [_cells(by_dtype[d]) if d in by_dtype else f"{'':>27}" for d in dtypes]
        ok = all(r.ok for r in by_dtype.values())
        lines.append(f"{case:<27} {framework:<6} " + " ".join(cells) + f"  {'ok' if ok else 'MISMATCH'}")
        errors += [f"  {case} / {framework} / {r.dtype}: {r.error}" for r in by_dtype.values()
                   if r.error is not None]
    if any(r.other_rule for r in rows):
        lines.append("* judged by the float32 rule: jax.nn.dot_product_attention's softmax is "
                     "float32 even for float64 inputs")
    return "\n".join(lines + (["errors:"] + errors if errors else []))


def run(args) -> int:
    """``diff``: every case on every selected framework and dtype, then the known differences
    (a whole transformers model with ``--model``, one layer per family with ``--framework
    transformers``); exit 1 on a mismatch, an unexplained difference, or a framework missing."""
    status = _other_command(args)
    if status is not None:
        return status
    from attention_np.interop.cases import CASES
    from attention_np.interop.known import DEMOS

    start = time.perf_counter()
    named = FRAMEWORKS if args.framework == "all" else (args.framework,)
    dtypes = DTYPES if args.dtype == "all" else (args.dtype,)
    missing = {f: why for f in named if (why := _missing(f)) is not None}
    frameworks = tuple(f for f in named if f not in missing)
    rows, demos = _run_cases(CASES, DEMOS, frameworks, dtypes, args.seed)
    _print_header()
    print(format_table(rows, dtypes))
    for framework, why in missing.items():
        print(f"{'(all cases)':<27} {framework:<9} {'':<8} skipped: not installed "
              f"({install_hint(framework)}; {why})")
    _print_cannot(CASES, frameworks)
    _print_demos(demos, missing)
    return _summary(args, rows, demos, missing, frameworks, start)


def _other_command(args) -> int | None:
    """The exit status of ``--model`` (a whole transformers model) or ``--framework
    transformers`` (one layer per family), run by :mod:`attention_np.cli.diff_transformers`;
    2 for ``--cached`` without ``--model``; None for the framework diff."""
    if getattr(args, "cached", False) and getattr(args, "model", None) is None:
        print("error: --cached continues a model's forward from its cache: it needs --model "
              "NAME|PATH (a decoder)", file=sys.stderr)
        return 2
    if getattr(args, "model", None) is not None:
        from attention_np.cli import diff_transformers
        return diff_transformers.run_model(args)
    if args.framework == "transformers":
        from attention_np.cli import diff_transformers
        return diff_transformers.run(args)
    return None


def _run_cases(cases, demos, frameworks: tuple, dtypes: tuple, seed: int) -> tuple:
    """``(rows, demos)``: each case diffed on each framework that can run it, in each dtype
    (seed ``seed + i`` for case ``i``), then each known difference demonstrated, with a
    progress bar."""
    jobs = [(i, case, f, d) for i, case in enumerate(cases) for f in frameworks
            if f in case.frameworks for d in dtypes]
    bar = ProgressBar(len(jobs) + len(demos))
    rows = []
    for i, case, framework, dtype in jobs:
        bar.update(len(rows), label=f"{case.name} / {framework} / {dtype}")
        rows.append(diff_case(case, framework, dtype, seed + i))
    shown = []
    for demo in demos:
        bar.update(len(rows) + len(shown), label=f"known difference: {demo.__name__}")
        shown.append(demo(frameworks, seed))
    bar.update(len(rows) + len(shown), label="done")
    bar.close()
    return rows, shown


def _print_header() -> None:
    """What the columns measure, and the tolerance policy."""
    from attention_np.interop.tolerance import FACTOR32, FLOOR_ULPS, RTOL64
    print("attention_np diff: outputs and gradients (random upstream gradient) against the "
          "frameworks\n")
    print("out err, grad err: max|framework - reference|, the reference being attention_np in "
          "float64\n  (for rows judged by the float32 rule: on the same float32-rounded inputs)\n"
          f"tolerance: float64: max|fw - ours| <= {RTOL64:g} * max(1, max|ours|)\n"
          f"  float32: each side's error against the reference <= {FACTOR32:g} x the other's "
          f"(floor {FLOOR_ULPS:g} ulp)\n"
          "err/tol: the worst ratio over the output and every gradient, both sides (< 1 passes)\n")


def _print_cannot(cases, frameworks: tuple) -> None:
    """The cases a selected framework cannot express, and why."""
    cannot = [(c.name, f, why) for c in cases for f, why in c.cannot if f in frameworks]
    if cannot:
        print("\nleft out, the framework cannot express the case:")
        print("\n".join(f"  {name} / {f}: {why}" for name, f, why in cannot))


def _print_demos(demos: list, missing: dict) -> None:
    """Each known difference as demonstrated, or why it was not run (its framework not
    installed, and how to install it, or not selected)."""
    print("\nKnown intentional differences (docs/frameworks.md), demonstrated:")
    for demo in demos:
        if demo.not_run is not None:        # say why: not installed (and how to) or not selected
            why = (f"{demo.not_run} not installed ({install_hint(demo.not_run)})"
                   if demo.not_run in missing else f"{demo.not_run} not selected")
            demo.lines[-1] = f"  (not run: {why})"
        print(f"\n{demo.title}")
        print("\n".join(demo.lines))


def _summary(args, rows: list, demos: list, missing: dict, frameworks: tuple, start: float) -> int:
    """The counts line, the install lines of the missing frameworks, the errors on stderr; the
    exit status (1 on a mismatch, an unexplained difference, a framework asked for and
    missing, or none installed)."""
    bad = [r for r in rows if not r.ok]
    ran = [d for d in demos if d.not_run is None]
    unexplained = [d for d in ran if not d.explained]
    explicit_missing = args.framework != "all" and bool(missing)
    print(f"\n{len(rows) - len(bad)}/{len(rows)} diffs (case, framework, dtype) agree, "
          f"{len(bad)} mismatches, "
          f"{len(ran) - len(unexplained)}/{len(ran)} known differences demonstrated as documented"
          f" ({len(demos) - len(ran)} not run), "
          f"skipped: {', '.join(missing) or 'none'}  ({time.perf_counter() - start:.1f} s)")
    for framework in missing:
        print(f"  {framework} is not installed: {install_hint(framework)}")
    if explicit_missing:
        print(f"error: --framework {args.framework} was asked for but is not installed "
              f"({install_hint(args.framework)})", file=sys.stderr)
    if not frameworks:
        print("error: no framework to diff against is installed; nothing was compared",
              file=sys.stderr)
    return 1 if bad or unexplained or explicit_missing or not frameworks else 0
