"""Check your solution to an exercise of the course. Needs NumPy alone.

    python check.py EXERCISE FILE.py       (or FILE.ipynb: its code cells are checked)
    python check.py --list

Exit code 0: passed; 1: wrong (the message says what is wrong, with a hint); 2: the file cannot
run (no such file, not .py or .ipynb, a syntax or import error, no such function).

In a notebook of this folder: ``from check import check`` then ``print(check("softmax", softmax))``.
The cases and their expected values are stored in checker/public.json and checker/public.npz.
"""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from checker import engine, loading, probes, storage  # noqa: E402 (after the path is set)

_BANK = {}
_NAMES = {}


def _signatures() -> dict:
    """name -> signature of every exercise, from checker/public.json alone (no array is read)."""
    if not _NAMES:
        with open(HERE / "checker" / "public.json") as f:
            _NAMES.update({name: rec["signature"] for name, rec in json.load(f).items()})
    return _NAMES


def _record(name: str) -> dict:
    """The stored record of exercise ``name``: only its arrays are read from checker/public.npz."""
    if name not in _BANK:
        _BANK.update(storage.load_bank(HERE / "checker" / "public", [name]))
    return _BANK[name]


def check(name: str, fn) -> engine.Report:
    """Run ``fn`` on the public cases of exercise ``name``; ``print`` the result to read it."""
    if name not in _signatures():
        raise ValueError(f"unknown exercise {name!r}; expected one of {sorted(_signatures())}")
    if not callable(fn):
        raise TypeError(f"fn must be a function {_signatures()[name]}, got {type(fn).__name__}")
    return probes.check_record(name, _record(name), fn)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: python check.py EXERCISE FILE.py   (python check.py --list shows the exercises)"
    if argv in (["--list"], ["-l"], ["-h"], ["--help"]):
        if argv[0] in ("-h", "--help"):
            print(usage)
        for name, signature in _signatures().items():
            print(f"{name:20s} {signature}")
        return 0
    if len(argv) != 2:
        print(f"error: expected an exercise and a file. {usage}", file=sys.stderr)
        return 2
    name, path = argv
    if name not in _signatures():
        print(f"error: unknown exercise {name!r}; expected one of {', '.join(_signatures())}",
              file=sys.stderr)
        return 2
    rec = _record(name)
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
