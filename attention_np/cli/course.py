"""``python -m attention_np course build OUT``: the student kit, the autograder and the solutions."""

from __future__ import annotations

import sys


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


def run(args) -> int:
    if getattr(args, "action", None) != "build":
        print("error: give an action: python -m attention_np course build OUT", file=sys.stderr)
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
