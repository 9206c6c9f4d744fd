"""The Gradescope autograder: grade every exercise of a submission on public and hidden cases.

    python3 grade.py SUBMISSION_DIR RESULTS_JSON

``run_autograder`` calls it with /autograder/submission and /autograder/results/results.json.
The submission holds the students' notebooks (.ipynb) or .py files; for each exercise the first
file (in sorted order) that defines its function is graded. Each exercise runs in its own
process; each case has a time limit (``config.json``) and its points (``checker/bank.json``,
``"points"``). The result follows Gradescope's results.json: one test per case (hidden cases
visible after the due date) and one feedback test per exercise, carrying the checker's message
(``PASSED``, ``MISTAKE: ...`` with a hint, or ``FAILED: ...``). Needs NumPy alone.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from checker import engine, loading, probes, storage  # noqa: E402 (after the path is set)


def config() -> dict:
    return json.loads((HERE / "config.json").read_text())


def _write(path, data):
    tmp = pathlib.Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _alarm(seconds):
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _on_alarm(signum, frame):
    raise engine.TimeLimit()


def worker(name: str, path: str, out: str) -> None:
    """Grade one exercise in this process; write {"cases": [...], "message": ...} to ``out``."""
    cfg = config()
    limit = float(cfg["time_limit_per_case_s"])
    rec = storage.load_bank(HERE / "checker" / "bank")[name]
    cases = rec["cases"]
    state = {"cases": [], "message": None}
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        _alarm(limit)
        fn = loading.load_function(path, rec["function"], rec["signature"])
        _alarm(0)
    except loading.CannotRun as e:
        _alarm(0)
        state["message"] = f"FAILED: {name}: cannot run: {e}"
        _write(out, state)
        return
    except engine.TimeLimit:
        state["message"] = f"FAILED: {name}: loading {path} took longer than {limit:g} s"
        _write(out, state)
        return
    results = []
    for case in cases:
        try:
            _alarm(limit)
            r = engine.run_cases(fn, [case], rec["arg_names"])[0]
            _alarm(0)
        except engine.TimeLimit:
            r = engine.CaseResult(case.label, False, f"time limit exceeded ({limit:g} s)", case.points,
                                  case.hidden)
        except engine.NotImplementedYet:
            _alarm(0)
            state["message"] = (f"FAILED: not implemented yet: {rec['signature']} still raises "
                                "NotImplementedError")
            break
        results.append(r)
        state["cases"].append({"label": r.label, "passed": r.passed, "why": r.why, "parts": r.parts})
        _write(out, state)
    if state["message"] is None:
        try:
            _alarm(float(cfg["time_limit_diagnosis_s"]))
            report = engine.verdict(name, fn, cases, rec["fingerprints"],
                                    probes.bound(name, rec["probe_expected"]), rec["arg_names"],
                                    rec["signature"], results=results)
            _alarm(0)
            state["message"] = report.message
        except (engine.TimeLimit, engine.NotImplementedYet):
            failed = [r for r in results if not r.passed]
            state["message"] = (f"FAILED: {name}: {len(failed)} of {len(results)} cases fail; first: "
                                f"{failed[0].label}: {failed[0].why}" if failed else
                                f"PASSED: {name}, all {len(results)} cases")
    _write(out, state)


def find_file(submission: pathlib.Path, function: str):
    """The first .py or .ipynb file of the submission that defines ``function`` (not run)."""
    for path in sorted(p for p in submission.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()):
        try:
            if loading.defines(loading.source_of(path), function):
                return path
        except loading.CannotRun:
            continue
    return None


def _syntax_errors(submission: pathlib.Path) -> list:
    errors = []
    for path in sorted(p for p in submission.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()):
        try:
            compile(loading.source_of(path), str(path), "exec")
        except SyntaxError as e:
            errors.append(f"{path.name} has a syntax error at line {e.lineno}: {e.msg}")
        except loading.CannotRun as e:
            errors.append(str(e))
    return errors


def grade(submission, results_path) -> dict:
    submission, cfg = pathlib.Path(submission), config()
    limit = float(cfg["time_limit_per_case_s"])
    bank = storage.load_bank(HERE / "checker" / "bank")
    syntax = _syntax_errors(submission)
    tests, summary = [], []
    for name, rec in bank.items():
        cases = rec["cases"]
        path = find_file(submission, rec["function"])
        state = {"cases": [], "message": None}
        if path is None:
            extra = f" ({'; '.join(syntax)})" if syntax else ""
            state["message"] = (f"FAILED: {name}: no file of the submission defines "
                                f"{rec['signature']}{extra}")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                out = pathlib.Path(tmp) / "result.json"
                budget = limit * (len(cases) + 1) + float(cfg["time_limit_diagnosis_s"]) + 10
                try:
                    subprocess.run([sys.executable, str(HERE / "grade.py"), "--worker", name, str(path),
                                    str(out)], cwd=tmp, timeout=budget, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, check=False)
                except subprocess.TimeoutExpired:
                    pass
                if out.exists():
                    state = json.loads(out.read_text())
                if state["message"] is None:
                    state["message"] = (f"FAILED: {name}: stopped after {len(state['cases'])} of "
                                        f"{len(cases)} cases (time limit {limit:g} s per case)")
        done = state["cases"]                       # in case order (labels may repeat)
        hidden_n = 0
        for i, case in enumerate(cases):
            c = done[i] if i < len(done) else None
            passed = bool(c and c["passed"])
            if c is None:
                why = ("time limit exceeded" if path is not None and "not implemented" not in state["message"]
                       and "cannot run" not in state["message"] else "not run")
            else:
                why = c["why"] or "passed"
            if case.hidden:
                hidden_n += 1
            tests.append({"name": f"{name}: " + (f"hidden case {hidden_n}" if case.hidden else case.label),
                          "score": engine.score(case.points, passed, c and c.get("parts")),
                          "max_score": case.points,
                          "output": "passed" if passed else why,
                          "visibility": cfg["hidden_visibility"] if case.hidden else "visible"})
        tests.append({"name": f"{name}: feedback", "score": 0.0, "max_score": 0.0,
                      "output": state["message"], "visibility": "visible"})
        summary.append(state["message"])
    result = {"score": sum(t["score"] for t in tests), "tests": tests, "output": "\n".join(summary),
              "stdout_visibility": "hidden"}
    pathlib.Path(results_path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(results_path).write_text(json.dumps(result, indent=1))
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"] and len(argv) == 4:
        worker(*argv[1:])
        return 0
    if len(argv) != 2:
        print("usage: python3 grade.py SUBMISSION_DIR RESULTS_JSON", file=sys.stderr)
        return 2
    result = grade(*argv)
    print(f"score {result['score']:g} of {sum(t['max_score'] for t in result['tests']):g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
