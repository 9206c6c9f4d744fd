"""Check your solution to an exercise of the course. Needs NumPy alone.

    python check.py EXERCISE FILE.py       (or FILE.ipynb: its code cells are checked)
    python check.py --list

Exit code 0: passed; 1: wrong (the message says what is wrong, with a hint); 2: the file cannot
run (no such file, not .py or .ipynb, a syntax or import error, no such function).

In a notebook of this folder: ``from check import check`` then ``print(check("softmax", softmax))``.
The cases and their expected values are stored in checker/public.json and checker/public.npz.
"""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from checker import engine, loading, probes, storage  # noqa: E402 (after the path is set)

_BANK = {}


def _bank() -> dict:
    if not _BANK:
        _BANK.update(storage.load_bank(HERE / "checker" / "public"))
    return _BANK


def check(name: str, fn) -> engine.Report:
    """Run ``fn`` on the public cases of exercise ``name``; ``print`` the result to read it."""
    bank = _bank()
    if name not in bank:
        raise ValueError(f"unknown exercise {name!r}; expected one of {sorted(bank)}")
    if not callable(fn):
        raise TypeError(f"fn must be a function {bank[name]['signature']}, got {type(fn).__name__}")
    return probes.check_record(name, bank[name], fn)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: python check.py EXERCISE FILE.py   (python check.py --list shows the exercises)"
    if argv in (["--list"], ["-l"], ["-h"], ["--help"]):
        if argv[0] in ("-h", "--help"):
            print(usage)
        for name, rec in _bank().items():
            print(f"{name:20s} {rec['signature']}")
        return 0
    if len(argv) != 2:
        print(f"error: expected an exercise and a file. {usage}", file=sys.stderr)
        return 2
    name, path = argv
    bank = _bank()
    if name not in bank:
        print(f"error: unknown exercise {name!r}; expected one of {', '.join(bank)}", file=sys.stderr)
        return 2
    rec = bank[name]
    try:
        fn = loading.load_function(path, rec["function"], rec["signature"])
    except loading.CannotRun as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = probes.check_record(name, rec, fn)
    print(report.message)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
