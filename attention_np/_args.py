"""Argument checks shared by every command line of the package (``python -m attention_np`` and
the ``python -m`` entries of ``studies/`` and ``viz/``), run before any work.

Each ``type=`` function below turns the text of one argument into its value, or raises
:class:`argparse.ArgumentTypeError`; argparse then prints one line naming the argument, the
value and what is expected (``error: argument --dpi: got 0, expected a positive integer``),
and exits with status 2, before the command has imported or computed anything.
Checks that need two arguments (``--d-model`` against ``--heads``) call ``parser.error`` in
the command's ``check(parser, args)``.
"""

from __future__ import annotations

import argparse
import json
import os

#: the largest integer an argument takes: what fits in int64 (a NumPy size, index or seed)
INT64_MAX = 2 ** 63 - 1


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected an integer") from None
    if abs(value) > INT64_MAX:
        raise argparse.ArgumentTypeError(f"got {value}, expected an integer that fits in int64 "
                                         f"(at most 2**63 - 1 = {INT64_MAX})")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a finite number")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (sizes, steps, counts)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {value}, expected a positive integer (>= 1)")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (seeds: NumPy refuses negative ones; counts where 0 means 'none')."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"got {value}, expected a non-negative integer (>= 0)")
    return value


def int_between(low: int, high: int):
    """An integer in ``[low, high]``."""
    def check(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"got {value}, expected an integer from {low} to {high}")
        return value
    check.__name__ = f"int_between({low}, {high})"
    return check


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"got {text}, expected a positive number (> 0)")
    return value


def fraction(text: str) -> float:
    """A number in ``[0, 1]`` (accuracy targets)."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"got {text}, expected a number from 0 to 1")
    return value


def smoothing(text: str) -> float:
    """A number in ``[0, 1)`` (label smoothing: 1 would leave no weight on the right token)."""
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"got {text}, expected a number from 0 up to (not "
                                         f"including) 1")
    return value


def _nearest_existing(path: str) -> str:
    """The deepest existing ancestor of ``path`` (``path`` itself if it exists)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def output_dir(text: str) -> str:
    """A directory that exists and is writable, or that can be made (its nearest existing
    ancestor is a writable directory). Nothing is created here."""
    if not text:
        raise argparse.ArgumentTypeError("got '', expected a directory")
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"got {text!r}, which is a file, expected a directory")
    base = _nearest_existing(text)
    if not os.path.isdir(base):
        raise argparse.ArgumentTypeError(f"got {text!r}, which cannot be made: {base!r} is not a "
                                         f"directory; expected a directory that exists or can be made")
    if not os.access(base, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a directory that can be written "
                                         f"to ({base!r} is not writable)")
    return text


def output_file(suffix: str = ""):
    """A file path whose directory exists and is writable, not a directory, ending in
    ``suffix`` when one is given. Nothing is created here."""
    def check(text: str) -> str:
        if not text or os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"got {text!r}, which is a directory, expected a "
                                             f"file path")
        if suffix and not text.endswith(suffix):
            raise argparse.ArgumentTypeError(f"got {text!r}, expected a file name ending in {suffix}")
        parent = os.path.dirname(os.path.abspath(text))
        if not os.path.isdir(parent):
            raise argparse.ArgumentTypeError(f"got {text!r}, expected a file in an existing "
                                             f"directory ({parent!r} does not exist)")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"got {text!r}, expected a file in a writable "
                                             f"directory ({parent!r} is not writable)")
        if os.path.exists(text) and not os.access(text, os.W_OK):
            raise argparse.ArgumentTypeError(f"got {text!r}, which exists and is not writable")
        return text
    check.__name__ = f"output_file({suffix!r})"
    return check


def json_object(keys=(), what: str = "a JSON file"):
    """A file that exists and holds a JSON object with (at least) ``keys`` at its top level:
    a missing file, a directory, a file that is not JSON or lacks a key is refused by name."""
    def check(text: str) -> str:
        if not os.path.isfile(text):
            raise argparse.ArgumentTypeError(f"got {text!r}, which is not a file; expected {what}")
        try:
            with open(text, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:          # JSONDecodeError and UnicodeDecodeError too
            raise argparse.ArgumentTypeError(f"got {text!r}, which is not JSON ({e}); expected "
                                             f"{what}") from None
        missing = [k for k in keys if not isinstance(data, dict) or k not in data]
        if missing:
            raise argparse.ArgumentTypeError(f"got {text!r}, which has no {missing}; expected {what}")
        return text
    check.__name__ = "json_object"
    return check


def check_heads(parser, d_model: int, heads: int) -> None:
    """``--d-model`` must split evenly into ``--heads`` heads (d_k = d_v = d_model / h, §3.2.2)."""
    if d_model % heads:
        divisors = [h for h in range(1, min(d_model, 16) + 1) if d_model % h == 0]
        parser.error(f"argument --heads: got {heads} with --d-model {d_model}, expected a divisor "
                     f"of d_model (d_k = d_model / heads, §3.2.2), e.g. {divisors}")
