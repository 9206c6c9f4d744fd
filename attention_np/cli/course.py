"""``python -m attention_np course build OUT``: the student kit, the autograder and the solutions;
``python -m attention_np course audit``: the kit measured on mutants of its own model solutions."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    build = sub.add_parser("build", help="write OUT/student, OUT/autograder and OUT/solutions",
                           description="Write OUT/student (notebooks and a NumPy-only checker, no "
                                       "solution), OUT/autograder (Gradescope: hidden cases, points, "
                                       "time limits, results.json) and OUT/solutions (model "
                                       "solutions, answers and rubrics).")
    build.add_argument("out", help="the folder to write into (created if missing)")
    build.add_argument("--force", action="store_true", help="replace the three folders if they exist")
    build.add_argument("--lessons-url", metavar="URL",
                       help="where the kit's notebooks link their lessons: the course site's lesson "
                            "folder (https://HOST/PATH/lessons/, each lesson NAME.html in it) or an "
                            "address with {lesson} in it; without it they name the lesson, no link")
    audit = sub.add_parser("audit", help="grade mutants of the model solutions: rejected, named, misnamed",
                           description="Make wrong solutions by mutating the model solutions (one "
                                       "operator, comparison, axis, constant, index, dtype, call or "
                                       "statement at a time), set aside the equivalent ones, and count "
                                       "per exercise how many the check and the autograder reject, how "
                                       "many get a MISTAKE: message, how many are misnamed and how many "
                                       "a bare FAILED (docs/instructors.md, 'The kit audits itself').")
    audit.add_argument("--exercise", action="append", metavar="NAME",
                       help="audit this exercise only (repeat for several); default: all")
    audit.add_argument("--markdown", action="store_true",
                       help="print the table and lists as docs/instructors.md shows them")
    audit.add_argument("--write", metavar="FILE",
                       help="replace the generated audit section of FILE (docs/instructors.md)")
    audit.add_argument("--list", action="append", metavar="WHAT",
                       choices=("accepted", "misnamed", "failed", "unverified", "equivalent", "all"),
                       help="list these mutants: accepted (wrong, full marks), misnamed, failed (bare "
                            "FAILED), unverified, equivalent, or all (default: accepted and misnamed)")
    audit.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                       help="processes to run the mutants in (default: %(default)s)")


def run(args) -> int:
    action = getattr(args, "action", None)
    if action == "audit":
        return _audit(args)
    if action != "build":
        print("error: give an action: python -m attention_np course build OUT, or "
              "python -m attention_np course audit", file=sys.stderr)
        return 2
    from attention_np.exercises import course_kit

    try:
        folders = course_kit.build(args.out, force=args.force, lessons_url=args.lessons_url)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for kind, path in folders.items():
        print(f"wrote {path}/ ({kind})")
    print(f"upload {folders['autograder']}/gradescope.zip to Gradescope; hand out {folders['student']}/")
    return 0


def _audit(args) -> int:
    from attention_np.exercises import EXERCISES, audit

    problem = _audit_problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    started = time.monotonic()
    audits = audit.audit(args.exercise or list(EXERCISES), jobs=args.jobs)
    seconds = time.monotonic() - started
    section = audit.markdown(audits)
    if args.write:
        target = Path(args.write)
        target.write_text(audit.replace_section(target.read_text(), section))
        print(f"wrote the audit into {target}")
    if args.markdown:
        print(section)
    else:
        _print_audit(audit, audits, args, seconds)
    return 0


def _audit_problem(args):
    """What is wrong with the audit's arguments (an exercise that is not one, --jobs below 1,
    --write with --exercise or to a file without the generated section), or None."""
    from attention_np.exercises import EXERCISES, audit

    unknown = [n for n in args.exercise or () if n not in EXERCISES]
    if unknown:
        return f"--exercise {unknown[0]!r} is not an exercise; expected one of {', '.join(EXERCISES)}"
    if args.jobs < 1:
        return f"--jobs must be at least 1, got {args.jobs}"
    if args.write and args.exercise:
        return "--write records the audit of every exercise: drop --exercise"
    if args.write:
        try:
            audit.replace_section(Path(args.write).read_text(), "")
        except (OSError, ValueError) as e:
            return f"--write {Path(args.write)}: {e}"
    return None


def _print_audit(audit, audits, args, seconds) -> None:
    """The table, the summary, the lists asked for (--list), and the time taken."""
    print(audit.text_table(audits))
    print()
    print(audit.summary(audits))
    which = args.list or ["accepted", "misnamed"]
    if "all" in which:
        which = ["accepted", "misnamed", "failed", "unverified", "equivalent"]
    for title, lines in audit.lists(audits, which):
        print(f"\n{title} ({len(lines)}):")
        for name, why in lines:
            print(f"  {name}" + (f": {why}" if why else ""))
    outside = [x for a in audits for x in a.outside]
    if outside:
        print(f"\nwarning: the model solution fails {len(outside)} inputs of the equivalence set "
              f"(left out of it): {outside[0]}", file=sys.stderr)
    print(f"\n{sum(len(a.verdicts) for a in audits)} mutants of {len(audits)} exercises in {seconds:.1f} s "
          f"({args.jobs} process{'es' if args.jobs > 1 else ''})")
