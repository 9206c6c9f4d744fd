"""The command line, ``python -m attention_np [COMMAND]``: the guided tour by default, or one of the commands.

Each command lives in its own module with ``add_arguments(parser)`` and ``run(args) -> int``
(and, when two arguments must agree, ``check_args(parser, args)``, called before ``run``); the
arguments are checked by the ``type=`` functions of :mod:`attention_np._args` before any work;
those modules import only NumPy at the top, so the parser builds without the optional extras.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command name -> (module, one-line help)
COMMANDS = {
    "tour": ("attention_np.cli.tour", "a guided tour of one attention call (the default)"),
    "figures": ("attention_np.cli.figures", "regenerate the key plots as PNG files in figures/"),
    "train": ("attention_np.cli.train", "train a model in NumPy (--task reverse | dates)"),
    "diff": ("attention_np.cli.diff", "diff attention_np against PyTorch, JAX and Flax"),
    "check": ("attention_np.cli.check", "check a solution to an exercise; name the mistake"),
    "course": ("attention_np.cli.course", "build a course: student kit, autograder, solutions"),
}


def build_parser():
    """The parser of ``python -m attention_np``: (parser, {command: module}, {command: subparser})."""
    parser = argparse.ArgumentParser(
        prog="python -m attention_np",
        description="Attention from 'Attention Is All You Need' (§3.2) in NumPy, every backward "
                    "pass by hand. Without a command: the guided tour.")
    sub = parser.add_subparsers(dest="command")
    modules, parsers = {}, {}
    for name, (module, help_text) in COMMANDS.items():
        modules[name] = importlib.import_module(module)
        parsers[name] = sub.add_parser(name, help=help_text, description=help_text)
        modules[name].add_arguments(parsers[name])
    return parser, modules, parsers


def main(argv=None) -> int:
    parser, modules, parsers = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        parser.error(f"unknown command {argv[0]!r}; the commands are: "
                     + ", ".join(f"{name} ({COMMANDS[name][1]})" for name in COMMANDS))
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv.insert(0, "tour")           # `python -m attention_np --seed 3` is the tour's option
    args = parser.parse_args(argv)
    check_args = getattr(modules[args.command], "check_args", None)
    if check_args is not None:       # checks across arguments, before any work (exit 2 on error)
        check_args(parsers[args.command], args)
    return modules[args.command].run(args) or 0

