"""``python -m attention_np check NAME solution.py``: check a student's solution to an exercise.

The solution may be a ``.py`` file or a notebook (its code cells, without the check cells). Exit
code 0: passed; 1: wrong; 2: the file cannot run (one line says why, never a traceback).
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="the exercise, e.g. softmax (--list shows all)")
    parser.add_argument("solution", nargs="?", help="a .py file defining the exercise's function")
    parser.add_argument("--function", help="the function's name in the file (default: the "
                                           "exercise's, e.g. attention_backward)")
    parser.add_argument("--list", action="store_true", help="list the exercises and exit")


def run(args) -> int:
    import attention_np.exercises as ex

    if args.function is not None and (args.list or args.name is None):
        print(f"python -m attention_np check: error: argument --function: got {args.function!r} "
              f"without an exercise and a solution file, expected both "
              f"(check NAME solution.py --function FN)", file=sys.stderr)
        return 2
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
    from attention_np.exercises.loading import CannotRun, load_function

    fn_name = args.function or ex.function_name(args.name)
    try:
        fn = load_function(args.solution, fn_name, ex.EXERCISES[args.name].signature)
    except CannotRun as e:
        print(f"error: {e}" + ("" if args.function else " (or pass --function)")
              if "defines no function" in str(e) else f"error: {e}", file=sys.stderr)
        return 2
    result = ex.check(args.name, fn)
    print(result)
    return 0 if result.ok else 1
