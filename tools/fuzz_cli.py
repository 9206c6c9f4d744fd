"""Throw bad values at every CLI subcommand's flags; list what is not refused by name.

Each subcommand's parser (``python -m attention_np SUB ...``) gets bad flag values and must exit
with status 2 and a one-line message naming the flag, with no traceback. (The public functions
are fuzzed from their signatures by ``tests/fuzz_signatures.py``, run by the test suite.)

Usage (from the repository root)::

    PYTHONPATH=. python tools/fuzz_cli.py            # prints the findings, exit 1 if any
"""

from __future__ import annotations

import subprocess
import sys

# subcommand -> (valid argv tail that keeps an accepted call short, {flag: [bad values]})
CLI = {
    "train": (
        ["--task", "reverse", "--steps", "1"],
        {
            "--length": ["0", "-1", "x", "nan"],
            "--steps": ["0", "-1", "1.5", "x"],
            "--batch-size": ["0", "-1", "x"],
            "--layers": ["0", "-1"],
            "--heads": ["0", "-1", "3"],
            "--d-model": ["0", "-1"],
            "--seed": ["-1", "x"],
            "--target": ["nan", "-0.5", "1.5", "x"],
            "--blas-threads": ["-1", "x"],
            "--label-smoothing": ["nan", "-0.1", "1", "x"],
            "--warmup": ["-1", "nan", "x"],
            "--cooldown": ["-1", "nan", "x"],
            "--lr-factor": ["0", "-1", "nan", "inf"],
        },
    ),
    "figures": (["--out", "/nonexistent-dir/x"], {"--dpi": ["0", "-5", "nan", "x"]}),
    "tour": ([], {"--seed": ["-1", "x", "1.5"]}),
    "diff": (["--framework", "jax"], {"--seed": ["-1", "x"], "--dtype": ["float16"]}),
    "check": ([], {"--function": ["nonsense"]}),
}


def fuzz_cli():
    findings, tried = [], 0
    for sub, (tail, flags) in CLI.items():
        help_text = subprocess.run(
            [sys.executable, "-m", "attention_np", sub, "--help"], capture_output=True, text=True
        ).stdout
        for flag, values in flags.items():
            if flag not in help_text:
                continue
            for value in values:
                tried += 1
                argv = [sys.executable, "-m", "attention_np", sub, *tail, flag, value]
                try:
                    p = subprocess.run(argv, capture_output=True, text=True, timeout=90)
                except subprocess.TimeoutExpired:
                    findings.append((sub, flag, value, "accepted (still running after 90 s)"))
                    continue
                err = p.stderr.strip().splitlines()
                if p.returncode == 0:
                    findings.append((sub, flag, value, "accepted"))
                elif "Traceback" in p.stderr:
                    findings.append((sub, flag, value, f"traceback: {err[-1] if err else ''}"))
                elif p.returncode != 2 or flag.lstrip("-") not in p.stderr.replace("_", "-"):
                    findings.append((sub, flag, value, f"exit {p.returncode}: {err[-1] if err else ''}"))
    return findings, tried


def main() -> int:
    findings, tried = fuzz_cli()
    for row in findings:
        print(" | ".join(map(str, row))[:300])
    print(f"{tried} bad flag values tried, {len(findings)} not refused by name")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
