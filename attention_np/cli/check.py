"""``python -m attention_np check NAME solution.py``: check a student's solution to an exercise."""

from __future__ import annotations

import importlib.util
import pathlib
import sys


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="the exercise, e.g. softmax (--list shows all)")
    parser.add_argument("solution", nargs="?", help="a .py file defining the exercise's function")
    parser.add_argument("--function", help="the function's name in the file (default: the "
                                           "exercise's, e.g. attention_backward)")
    parser.add_argument("--list", action="store_true", help="list the exercises and exit")


def run(args) -> int:
    import attention_np.exercises as ex

    if args.list or args.name is None:
        for name, e in ex.EXERCISES.items():
            print(f"{name:20s} {e.signature}  ({len(e.mistakes)} catalogued mistakes)")
        return 0
    if args.name not in ex.EXERCISES:
        print(f"error: unknown exercise {args.name!r}; expected one of {sorted(ex.EXERCISES)}",
              file=sys.stderr)
        return 2
    if args.solution is None:
        print("error: give the solution file: python -m attention_np check NAME solution.py",
              file=sys.stderr)
        return 2
    path = pathlib.Path(args.solution)
    if not path.is_file():
        print(f"error: solution file {str(path)!r} not found", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("student_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn_name = args.function or ex.function_name(args.name)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        print(f"error: {path} defines no function {fn_name!r} "
              f"(expected {ex.EXERCISES[args.name].signature}; or pass --function)", file=sys.stderr)
        return 2
    result = ex.check(args.name, fn)
    print(result)
    return 0 if result.ok else 1
