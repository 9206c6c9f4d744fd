"""Mark a student's ``quiz_answers.txt`` against ``quiz_key.json`` (standard library only).

The file has one line per item, ``LESSON.ITEM: ANSWER`` (a letter for a choice item, a number
for a numeric one); ``#`` starts a comment. A number is right within the key's ``atol``, or, when
that is 0, within ``rtol`` of the answer (``rtol`` 0: exactly). One Gradescope test per lesson,
worth its items; its output says which items were right, never the answer.
"""

from __future__ import annotations

import json
import math
import pathlib

ANSWERS = "quiz_answers.txt"


def find_answers(submission: pathlib.Path):
    """The submission's quiz_answers.txt (the first, outside hidden folders), or None."""
    found = [p for p in sorted(pathlib.Path(submission).rglob(ANSWERS))
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(submission).parts)]
    return found[0] if found else None


def parse(text: str) -> tuple:
    """({item: answer text}, [problems]) from the file's text."""
    answers, problems = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        item, sep, answer = line.partition(":")
        if not sep:
            problems.append(f"line {n}: expected 'LESSON.ITEM: ANSWER', got {line!r}")
            continue
        if answer.strip():
            answers[item.strip()] = answer.strip()
    return answers, problems


def is_right(entry: dict, reply: str) -> bool:
    if entry["kind"] == "choice":
        return reply.strip("() ").lower() == entry["answer"]
    try:
        x = float(reply.replace(",", ""))
    except ValueError:
        return False
    a = float(entry["answer"])
    limit = entry["atol"] if entry["atol"] else entry["rtol"] * abs(a)
    return math.isfinite(x) and abs(x - a) <= limit + 1e-12 * max(1.0, abs(a))


def tests(submission, key_path) -> list:
    """The Gradescope tests of the quizzes: one per lesson."""
    key = json.loads(pathlib.Path(key_path).read_text())
    path = find_answers(pathlib.Path(submission))
    answers, problems = parse(path.read_text(errors="replace")) if path else ({}, [])
    lessons = {}
    for item in key:
        lessons.setdefault(item.split(".")[0], []).append(item)
    out = []
    for lesson, items in lessons.items():
        right = [i for i in items if i in answers and is_right(key[i], answers[i])]
        lines = [f"{i}: {'right' if i in right else 'wrong' if i in answers else 'no answer'}" for i in items]
        if path is None:
            lines = [f"no {ANSWERS} in the submission"]
        elif problems:
            lines += problems
        out.append({"name": f"quiz: lesson {lesson}", "score": float(sum(key[i]["points"] for i in right)),
                    "max_score": float(sum(key[i]["points"] for i in items)), "output": "\n".join(lines),
                    "visibility": "visible"})
    return out
