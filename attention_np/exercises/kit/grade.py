"""The Gradescope autograder: grade every exercise of a submission on public and hidden cases.

    python3 grade.py SUBMISSION_DIR RESULTS_JSON

``run_autograder`` calls it with /autograder/submission and /autograder/results/results.json.

- The submission holds notebooks (.ipynb) or .py files, in any folders. Each function is graded
  in ONE file, named in the feedback: the file that defines it, or, when several do, its home
  (the kit's notebook of that exercise, or a .py file named for it: an ``attention`` written again
  as a helper beside ``mha_forward`` is not graded there). Several files defining it with no
  single home among them are refused (0 for that exercise, a message naming them: resubmit
  one). A stub left as handed out (``raise NotImplementedError``) is no definition; the kit's own
  ``check.py`` and ``checker/`` are ignored, so are hidden files and folders (``.ipynb_checkpoints``).
- Each exercise runs in its own process; each case has a time limit and its points
  (``config.json``: ``time_limit_per_case_s``; ``checker/bank.json``: ``"points"``).
- A total time budget (``time_budget_s``) is shared so that a slow exercise cannot starve the
  others: exercise i must finish ``time_reserve_per_exercise_s`` seconds per later exercise
  before the budget ends; cases it has no time left for score 0 and say why.
- ``results.json`` follows Gradescope's format and is rewritten (a temporary file, renamed)
  after every exercise, so it is valid JSON at every moment: one test per case (hidden cases
  visible ``after_due_date``) and one 0-point feedback test per exercise carrying the checker's
  message (``PASSED``, ``MISTAKE: ...`` with a hint, or ``FAILED: ...``) and the file graded.

Needs NumPy alone.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from checker import engine, loading, probes, storage  # noqa: E402 (after the path is set)

#: folders of a submission that hold no student work (the kit's checker, editors' and OSes' copies)
SKIPPED_FOLDERS = ("checker", "__MACOSX", "__pycache__")
#: seconds a worker process may outlive its deadline before it is stopped (never past the end
#: of the total budget plus this)
GRACE_S = 2.0


def config() -> dict:
    return json.loads((HERE / "config.json").read_text())


def write_json(path, data) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: never half written."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def case_record(result) -> dict:
    """What the worker reports of one case (JSON)."""
    return {"label": result.label, "passed": result.passed, "why": result.why, "parts": result.parts}


def case_points(record: dict, points: float) -> float:
    """The score of one graded case worth ``points``: the one place a case is scored, ``points``
    times the fraction of its outputs that are right (partial credit per output)."""
    return engine.score(points, record["passed"], record.get("parts"))


# ---------------------------------------------------------------- the worker (one exercise)
def _on_alarm(signum, frame):
    raise engine.TimeLimit()


def _alarm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3) if seconds else 0)


def _summary(name: str, results: list, total: int) -> str:
    failed = [r for r in results if not r.passed]
    if failed:
        return (f"FAILED: {name}: {len(failed)} of {len(results)} graded cases fail; first: "
                f"{failed[0].label}: {failed[0].why}")
    if len(results) == total:
        return f"PASSED: {name}, all {total} cases"
    return f"FAILED: {name}: the {len(results)} graded cases pass, {total - len(results)} were not graded"


def worker(name: str, path: str, out: str, deadline: str) -> None:
    """Grade one exercise in this process, by ``deadline`` (seconds since the epoch); write
    ``{"cases": [...], "message": ..., "rest": ...}`` to ``out`` after every case."""
    cfg, deadline = config(), float(deadline)
    limit = float(cfg["time_limit_per_case_s"])
    rec = storage.load_bank(HERE / "checker" / "bank", names=[name])[name]
    cases = rec["cases"]
    state = {"cases": [], "message": None, "rest": None}
    signal.signal(signal.SIGALRM, _on_alarm)
    budget_note = (f"not graded: the time budget ran out (the grader keeps {cfg['time_budget_s']:g} s "
                   "in all; cases that run into their time limit use it up)")

    def left():
        return deadline - time.time()

    allowed = min(limit, left())
    try:
        _alarm(allowed)
        fn = loading.load_function(path, rec["function"], rec["signature"])
        _alarm(0)
    except (loading.CannotRun, engine.TimeLimit) as e:
        _alarm(0)
        # the alarm may ring inside the student's top-level code: the loader reports that as an
        # error the file raised, with the TimeLimit as its context
        if not isinstance(e, engine.TimeLimit) and not isinstance(e.__context__, engine.TimeLimit):
            state["message"] = f"FAILED: {name}: cannot run: {e}"
            state["rest"] = "not run: the file cannot run"
        elif allowed < limit:
            state["message"] = f"FAILED: {name}: not graded: the time budget ran out while {path} loaded"
            state["rest"] = budget_note
        else:
            state["message"] = f"FAILED: {name}: loading {path} took longer than {limit:g} s"
            state["rest"] = "not run: the file took too long to load"
        write_json(out, state)
        return
    results, stopped = [], False
    for case in cases:
        allowed = min(limit, left())
        if allowed <= 0:
            stopped = True
            break
        try:
            _alarm(allowed)
            r = engine.run_cases(fn, [case], rec["arg_names"])[0]
            _alarm(0)
        except engine.TimeLimit:
            cut = allowed < limit
            r = engine.CaseResult(case.label, False, "stopped: the time budget ran out during this case"
                                  if cut else f"time limit exceeded ({limit:g} s)", case.points, case.hidden)
            stopped = cut
        except engine.NotImplementedYet:
            _alarm(0)
            state["message"] = (f"FAILED: not implemented yet: {rec['signature']} still raises "
                                "NotImplementedError")
            state["rest"] = "not run: not implemented yet"
            break
        results.append(r)
        state["cases"].append(case_record(r))
        write_json(out, state)
        if stopped:
            break
    if stopped:
        state["rest"] = budget_note
        state["message"] = (_summary(name, results, len(cases)) + f". Grading stopped after "
                            f"{len(results)} of {len(cases)} cases: the time budget ran out.")
    elif state["message"] is None:
        allowed = min(float(cfg["time_limit_diagnosis_s"]), left())
        try:
            if allowed <= 0:
                raise engine.TimeLimit()
            _alarm(allowed)
            report = engine.verdict(name, fn, cases, rec["fingerprints"],
                                    probes.bound(name, rec["probe_expected"]), rec["arg_names"],
                                    rec["signature"], results=results)
            _alarm(0)
            state["message"] = report.message
        except (engine.TimeLimit, engine.NotImplementedYet):
            _alarm(0)
            state["message"] = _summary(name, results, len(cases))
    write_json(out, state)


# ---------------------------------------------------------------- the submission's files
def submitted_files(submission: pathlib.Path):
    """(files to grade, files ignored): the .py and .ipynb files, sorted, without the kit's own
    checker and hidden or system folders."""
    files, ignored = [], []
    for p in sorted(submission.rglob("*")):
        if p.suffix not in (".py", ".ipynb") or not p.is_file():
            continue
        rel = p.relative_to(submission)
        if any(part.startswith(".") or part in SKIPPED_FOLDERS for part in rel.parts) \
                or rel.as_posix() == "check.py":
            ignored.append(rel.as_posix())
        else:
            files.append(p)
    return files, ignored


def definers(files: list, submission: pathlib.Path, function: str):
    """(files that define ``function``, files that hold only its untouched stub), as relative paths."""
    real, stubs = [], []
    for path in files:
        try:
            node = loading.last_binding(loading.source_of(path), function)
        except loading.CannotRun:
            continue
        if node is not None:
            (stubs if loading.is_stub(node) else real).append(path.relative_to(submission).as_posix())
    return real, stubs


def _problems(files: list, submission: pathlib.Path) -> list:
    """One line per file that cannot be parsed."""
    errors = []
    for path in files:
        rel = path.relative_to(submission).as_posix()
        try:
            compile(loading.source_of(path), rel, "exec")
        except SyntaxError as e:
            errors.append(f"{rel} has a syntax error at line {e.lineno}: {e.msg}")
        except loading.CannotRun as e:
            errors.append(str(e))
    return errors


# ---------------------------------------------------------------- results.json
def _hidden_names(cases: list) -> dict:
    names, n = {}, 0
    for i, case in enumerate(cases):
        if case.hidden:
            n += 1
            names[i] = f"hidden case {n}"
    return names


def exercise_tests(name: str, cases: list, state: dict, cfg: dict, graded: str | None) -> list:
    """The Gradescope tests of one exercise: one per case, then its feedback."""
    hidden = _hidden_names(cases)
    message = state["message"]
    public = {c.label for c in cases if not c.hidden}
    for i in sorted(hidden, key=lambda i: -len(cases[i].label)):    # the visible feedback never
        if cases[i].label not in public:                               # names a hidden case
            message = message.replace(cases[i].label, hidden[i])
    done, tests = state["cases"], []
    for i, case in enumerate(cases):
        c = done[i] if i < len(done) else None
        score = case_points(c, case.points) if c else 0.0
        tests.append({"name": f"{name}: {hidden.get(i, case.label)}", "score": score,
                      "max_score": case.points,
                      "output": ("passed" if c["passed"] else c["why"] or "wrong") if c else state["rest"],
                      "visibility": cfg["hidden_visibility"] if case.hidden else "visible"})
    all_right = len(done) == len(cases) and all(t["score"] == t["max_score"] for t in tests)
    where = f"\n\nGraded file: {graded}" if graded else ""
    tests.append({"name": f"{name}: feedback", "score": 0.0, "max_score": 0.0,
                  "status": "passed" if all_right else "failed", "output": message + where,
                  "visibility": "visible"})
    return tests


def _results(per_exercise: dict, lines: list, started: float) -> dict:
    tests = [t for ts in per_exercise.values() for t in ts]
    return {"score": sum(t["score"] for t in tests), "execution_time": round(time.monotonic() - started),
            "output": "\n".join(lines), "output_format": "text", "test_output_format": "text",
            "stdout_visibility": "hidden", "tests": tests}


def _run_worker(name: str, folder: pathlib.Path, path: str, seconds: float, kill_after: float):
    """Grade exercise ``name`` from ``path`` (relative to ``folder``, the worker's working
    folder) in a new process that stops itself after ``seconds`` and is stopped after
    ``kill_after``; its last state, or None if it wrote none."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "result.json"
        try:
            subprocess.run([sys.executable, str(HERE / "grade.py"), "--worker", name, path, str(out),
                            repr(time.time() + seconds)], cwd=folder, timeout=max(kill_after, 0.1),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            pass
        return json.loads(out.read_text()) if out.exists() else None


def grade(submission, results_path) -> dict:
    """Grade ``submission`` (a folder); write Gradescope's results.json as grading goes."""
    started = time.monotonic()
    submission, cfg = pathlib.Path(submission), config()
    end = started + float(cfg["time_budget_s"])
    reserve = float(cfg["time_reserve_per_exercise_s"])
    bank = storage.load_bank(HERE / "checker" / "bank")
    pathlib.Path(results_path).parent.mkdir(parents=True, exist_ok=True)
    files, ignored = submitted_files(submission)
    problems = _problems(files, submission)
    pending = {"message": "FAILED: not graded yet (the grader stopped before this exercise)",
               "cases": [], "rest": "not graded yet"}
    per_exercise = {n: exercise_tests(n, r["cases"], pending, cfg, None) for n, r in bank.items()}
    lines = _header(files, ignored, problems, submission)
    write_json(results_path, _results(per_exercise, lines, started))
    names = list(bank)
    for i, name in enumerate(names):
        # exercise i ends early enough to leave each later exercise its reserve
        state, graded = _exercise_state(name, bank[name], files, submission, problems, cfg,
                                        end - reserve * (len(names) - 1 - i))
        per_exercise[name] = exercise_tests(name, bank[name]["cases"], state, cfg, graded)
        got = sum(t["score"] for t in per_exercise[name])
        top = sum(t["max_score"] for t in per_exercise[name])
        lines.append(f"{name}: {got:g} of {top:g}" + (f" ({graded})" if graded else ""))
        write_json(results_path, _results(per_exercise, lines, started))
    if (HERE / "quiz_key.json").is_file():          # the quizzes: quiz_answers.txt (kit/quiz.py)
        import quiz
        per_exercise["quizzes"] = quiz.tests(submission, HERE / "quiz_key.json")
        write_json(results_path, _results(per_exercise, lines, started))
    return _results(per_exercise, lines, started)


def _header(files: list, ignored: list, problems: list, submission: pathlib.Path) -> list:
    """The first lines of the grader's output: the files read, those ignored, those that cannot
    be parsed."""
    header = [f"Files read: {', '.join(p.relative_to(submission).as_posix() for p in files) or 'none'}"]
    if ignored:
        header.append(f"Ignored (the kit's checker, hidden or system files): {', '.join(ignored)}")
    return header + problems


def _exercise_state(name: str, rec: dict, files: list, submission: pathlib.Path, problems: list, cfg: dict,
                    deadline: float):
    """``(state, graded file or None)`` of one exercise: not run when its function is defined in
    several files or in none, or when ``deadline`` (time.monotonic) has passed; else graded."""
    real, stubs = definers(files, submission, rec["function"])
    homes = [f for f in real if loading.is_home(submission / f, name, rec["function"])]
    helpers = [f for f in real if f not in homes] if len(real) > 1 and len(homes) == 1 else []
    real = homes if helpers else real             # a helper elsewhere: graded in its home
    if len(real) > 1:
        return {"cases": [], "rest": "not run: the function is defined in more than one file",
                "message": (f"FAILED: {name}: {rec['function']} is defined in {len(real)} files: "
                            f"{', '.join(real)}. The grader will not guess which one you mean: "
                            "keep it in one file (delete it from the others, or leave their stub "
                            "as handed out) and submit again.")}, None
    if not real:
        why = (f"only its stub, unchanged, is in {', '.join(stubs)}" if stubs
               else "no file of the submission defines it")
        extra = f" ({'; '.join(problems)})" if problems and not stubs else ""
        return {"cases": [], "rest": "not run: the function was not found",
                "message": f"FAILED: {name}: {rec['signature']}: {why}{extra}"}, None
    seconds = deadline - time.monotonic()
    if seconds <= 0:
        return {"cases": [], "rest": "not graded: the time budget ran out before this exercise",
                "message": (f"FAILED: {name}: not graded ({rec['function']} is in {real[0]}): "
                            f"the time budget of the submission ({cfg['time_budget_s']:g} s) "
                            "ran out before this exercise")}, None
    label = real[0] + (f" (its home; also defined in {', '.join(helpers)}, not graded there)"
                       if helpers else "")
    return _graded_state(name, submission, real[0], len(rec["cases"]), seconds), label


def _graded_state(name: str, submission: pathlib.Path, graded: str, n_cases: int, seconds: float) -> dict:
    """The state the worker grading ``graded`` left, completed when it was stopped."""
    # stopped by end + GRACE_S at the latest: this exercise's deadline is at most end
    state = _run_worker(name, submission, graded, seconds, seconds + GRACE_S)
    if state is None:
        state = {"cases": [], "message": None}
    if state.get("message") is None:
        state["message"] = (f"FAILED: {name}: stopped after {len(state['cases'])} of {n_cases} "
                            "cases: its process was stopped at the time budget")
    if state.get("rest") is None:
        state["rest"] = "not graded: the grader stopped this exercise at its time budget"
    return state


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"] and len(argv) == 5:
        worker(*argv[1:])
        return 0
    if len(argv) != 2:
        print("usage: python3 grade.py SUBMISSION_DIR RESULTS_JSON", file=sys.stderr)
        return 2
    result = grade(*argv)
    print(f"score {result['score']:g} of {sum(t['max_score'] for t in result['tests']):g} "
          f"in {result['execution_time']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
