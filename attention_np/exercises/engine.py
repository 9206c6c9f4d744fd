"""The checking engine: run a student's function on stored cases and say what is wrong.

NumPy and the standard library only, and no import of ``attention_np``: the course build copies
this file (with :mod:`probes`) into the student kit and the autograder. The cases and their
expected values come from a *bank* (built from the library's references by
:func:`attention_np.exercises.checker.build_record`, stored as JSON + .npz in the kits by
:mod:`attention_np.exercises.storage`).

Each call gets fresh copies of its inputs while the engine keeps a second copy; after the call
the two are compared, so a function that writes into an input is caught (nothing hides it).

Every message begins with ``PASSED``, ``MISTAKE:`` (what is wrong, then a hint that teaches) or
``FAILED:`` (when nothing more specific can be said). Two raised errors are never "the same
result", and NaN never equals NaN (:func:`same`); two wrong results are one behaviour
(:func:`same_behaviour`, the diagnosis's and the audit's one comparison of two wrong answers) when
both raise, or when they have NaN at the same entries and agree elsewhere.

Tolerances: float64 outputs agree with the float64 expected value to ``1e-9`` relative plus
``1e-12`` absolute. float32 outputs must be float32; their expected value is computed in float64
from the same float32 inputs, and they must agree within ``1e-4 * (1 + |expected|)`` (a float32
computation done in either precision passes; a wrong formula is off by far more). A case may
set its own tolerance (the gradchecks compare with central differences).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

F64_TOL = (1e-9, 1e-12)
F32_TOL = (1e-4, 1e-4)


class Raised:
    """A call that raised: never equal to anything, another Raised included."""

    def __init__(self, exc: BaseException):
        self.text = f"{type(exc).__name__}: {exc}"
        self.type = type(exc).__name__

    def __repr__(self):
        return f"Raised({self.text})"


class NotImplementedYet(Exception):
    """The stub still raises NotImplementedError."""


class TimeLimit(BaseException):
    """Raised inside a call by the autograder's alarm (a BaseException: ``except Exception`` in a
    student's code does not swallow it)."""


def is_integer(value) -> bool:
    """True for an int or a NumPy integer, False for a bool (an int in Python) and anything else:
    the kit's copy of ``attention_np._checks.is_integer`` (this file ships without the package;
    a test holds the two equal)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# ---------------------------------------------------------------- copies and calls
def copy_tree(x, memo=None):
    """A deep copy of arrays, tuples, lists and dicts (everything else is shared). An array
    that appears twice (self-attention: query is key is value) is one array in the copy too."""
    memo = {} if memo is None else memo
    if isinstance(x, np.ndarray):
        if id(x) not in memo:
            memo[id(x)] = x.copy()
        return memo[id(x)]
    if isinstance(x, dict):
        return {k: copy_tree(v, memo) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(copy_tree(v, memo) for v in x)
    return x


def _written(given, kept, name):
    """Names of the arrays in ``given`` that no longer equal ``kept``."""
    if isinstance(kept, np.ndarray):
        g = np.asarray(given)
        if g.shape != kept.shape or g.dtype != kept.dtype or not np.array_equal(g, kept, equal_nan=True):
            return [name]
        return []
    if isinstance(kept, dict):
        return [w for k in kept for w in _written(given.get(k) if isinstance(given, dict) else None,
                                                    kept[k], f"{name}[{k!r}]")]
    if isinstance(kept, (list, tuple)):
        if not isinstance(given, (list, tuple)) or len(given) != len(kept):
            return [name]
        return [w for i, (g, k) in enumerate(zip(given, kept, strict=True))
                for w in _written(g, k, f"{name}[{i}]")]
    return []


@dataclass
class Call:
    """What one call did: ``out`` (or a :class:`Raised`) and the inputs it wrote into."""

    out: object
    written: list


def call(fn, args, kwargs=None, names=None) -> Call:
    """``fn(*args, **kwargs)`` on fresh copies; reports the arguments it wrote into."""
    kwargs = kwargs or {}
    given_a, given_k = copy_tree((tuple(args), dict(kwargs)))
    kept_a, kept_k = copy_tree((tuple(args), dict(kwargs)))
    try:
        with np.errstate(all="ignore"):     # overflow in a wrong answer is reported, not warned
            out = fn(*given_a, **given_k)
    except NotImplementedError as e:
        raise NotImplementedYet(str(e)) from None
    except TimeLimit:
        raise
    except RecursionError as e:
        out = Raised(e)
    except Exception as e:          # noqa: BLE001 - a student's error is a result to report
        out = Raised(e)
    names = list(names or []) + [f"argument {i + 1}" for i in range(len(names or []), len(args))]
    written = [w for i, (g, k) in enumerate(zip(given_a, kept_a, strict=True))
               for w in _written(g, k, names[i])]
    written += [w for key in kept_k for w in _written(given_k[key], kept_k[key], key)]
    return Call(out, written)


# ---------------------------------------------------------------- comparing
def leaves(x, prefix="output"):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from leaves(x[k], f"{prefix}[{k!r}]")
    elif isinstance(x, (tuple, list)):
        for i, item in enumerate(x):
            yield from leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, x


def _shape_of(x):
    if isinstance(x, dict):
        return ("dict", tuple(sorted(x)))
    if isinstance(x, (tuple, list)):
        return ("sequence", len(x))
    return "array"


def named_leaves(expected, names=None):
    """``(name, path)`` of every output the contract asks for: the top-level tuple items by
    ``names`` (e.g. dq, dk, dv), a dict's entries as ``grads['W_q']``. ``path`` indexes into
    the output."""
    if not isinstance(expected, (tuple, list)):
        return [((names or ["output"])[0], ())]
    out = []
    for i, item in enumerate(expected):
        base = names[i] if names and i < len(names) else f"output[{i}]"
        if isinstance(item, dict):
            out += [(f"{base}[{k!r}]", (i, k)) for k in sorted(item)]
        else:
            out.append((base, (i,)))
    return out


def at_path(x, path):
    """The item of the nested output ``x`` at ``path`` (a tuple of indices and dict keys, as
    :func:`named_leaves` gives them)."""
    for key in path:
        x = x[key]
    return x


def _compare_leaf(name, o, e, dtype, tol, float_input=True):
    """None when the output ``o`` matches ``e``; otherwise a sentence saying how it differs."""
    e = np.asarray(e)
    try:
        o = np.asarray(o)
    except Exception:           # noqa: BLE001
        return f"{name} is not an array"
    if o.shape != e.shape:
        return f"{name} has shape {o.shape}, expected {e.shape}"
    if e.dtype == bool:
        return _compare_mask(name, o, e)
    if not np.issubdtype(o.dtype, np.number):
        return f"{name} has dtype {o.dtype}, expected numbers"
    if dtype is None:               # values only (to tell whether a mistake is visible)
        dtype = "float64" if o.dtype == np.float64 else "float32"
    elif np.issubdtype(e.dtype, np.floating) and o.dtype != np.dtype(dtype):
        keep = " (keep the input's dtype)" if float_input else ""
        return f"{name} has dtype {o.dtype}, expected {np.dtype(dtype)}{keep}"
    return _compare_values(name, o, e, tol or (F64_TOL if np.dtype(dtype) == np.float64 else F32_TOL))


def _compare_mask(name, o, e):
    """None when the bool output ``o`` equals the mask ``e`` (same shape); else why not."""
    if o.dtype != bool:
        return f"{name} has dtype {o.dtype}, expected a bool mask"
    if not np.array_equal(o, e):
        return f"{name} differs at {int((o != e).sum())} of {e.size} entries"
    return None


def _compare_values(name, o, e, tol):
    """None when the numbers ``o`` agree with ``e`` (same shape) within ``tol`` = (rtol, atol) and
    hold no NaN; else why not."""
    o64, e64 = o.astype(np.float64), e.astype(np.float64)
    if np.isnan(o64).any():
        return f"{name} has NaN at {int(np.isnan(o64).sum())} of {o.size} entries"
    rtol, atol = tol
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~((o64 == e64) | (np.abs(o64 - e64) <= atol + rtol * np.abs(e64)))
        err = np.max(np.abs(o64 - e64)[bad]) if bad.any() else 0.0
    if bad.any():
        return (f"{name} differs from the answer at {int(bad.sum())} of {e.size} entries, "
                f"by up to {err:.3g}")
    return None


def _structure_differs(out, expected):
    """None when ``out`` has the structure of ``expected`` (one array, a tuple of as many items, a
    dict); else what was returned instead."""
    so, se = _shape_of(out), _shape_of(expected)
    if so == se:
        return None
    if se == "array":
        return f"returned a {type(out).__name__}, expected one array"
    if se[0] == "dict":
        return f"returned {type(out).__name__}, expected a dict with keys {list(se[1])}"
    if so == "array" or so[0] != "sequence":
        return f"returned {type(out).__name__}, expected a tuple of {se[1]}"
    return f"returned {so[1]} items, expected {se[1]}"


def _part_differs(name, out, expected, path, dtype, tol, float_input):
    """None when the output at ``path`` of ``out`` matches ``expected``'s; else why not."""
    try:
        o = at_path(out, path)
    except (KeyError, IndexError, TypeError):
        o = None
    if o is None and path and isinstance(path[-1], str):
        return f"{name} is missing"
    if isinstance(o, (dict, tuple, list)):
        return f"{name} is a {type(o).__name__}, expected an array"
    return _compare_leaf(name, o, at_path(expected, path), dtype, tol, float_input)


def compare_parts(out, expected, dtype="float64", tol=None, names=None, float_input=True):
    """``(why, parts)``: ``why`` is None when ``out`` matches ``expected``, else a sentence per
    wrong output; ``parts`` lists ``(output name, right)`` for every output the contract asks
    for (dq, dk, dv; each parameter gradient), scored on its own. ``float_input`` False (no
    float array among the inputs, e.g. sinusoidal) drops "keep the input's dtype" from a dtype
    sentence."""
    named = named_leaves(expected, names)
    why = f"raised {out.text}" if isinstance(out, Raised) else _structure_differs(out, expected)
    if why is not None:
        return why, [(n, False) for n, _ in named]
    whys, parts = [], []
    for name, path in named:
        why = _part_differs(name, out, expected, path, dtype, tol, float_input)
        parts.append((name, why is None))
        if why is not None:
            whys.append(why)
    if not whys:
        return None, parts
    more = f"; and {len(whys) - 3} more outputs are wrong" if len(whys) > 3 else ""
    return "; ".join(whys[:3]) + more, parts


def compare(out, expected, dtype="float64", tol=None, names=None):
    """None when ``out`` matches ``expected``; otherwise a sentence saying how it differs."""
    return compare_parts(out, expected, dtype, tol, names)[0]


def score(points, passed, parts=None):
    """The points a case earns: ``points`` times the fraction of its outputs that are right
    (``parts``, pairs (name, right)); all of them when ``passed``, none when there are no parts."""
    if passed:
        return float(points)
    if not parts:
        return 0.0
    return float(points) * sum(bool(ok) for _, ok in parts) / len(parts)


def same(a, b, rtol=1e-6, atol=1e-9) -> bool:
    """Two results agree (to diagnose, not to grade): a raised error never agrees, NaN never
    equals NaN; otherwise as :func:`same_behaviour`."""
    if isinstance(a, Raised) or isinstance(b, Raised):
        return False
    return _same_leaves(a, b, rtol, atol, equal_nan=False)


def same_behaviour(a, b, rtol=1e-4, atol=1e-6) -> bool:
    """Two results are one behaviour (two wrong answers, or a wrong answer and a catalogued
    mistake's): both raise (whatever the errors); or one structure (the same leaves: tuple items,
    dict keys), each leaf of the same shape and kind (bool or number; the float width is not
    compared), bools equal, numbers within ``rtol`` relative + ``atol``, an inf only where the
    other has the same inf, and NaN exactly where the other has NaN: NaN at the same entries is
    the same result, NaN where the other has a number is not."""
    if isinstance(a, Raised) or isinstance(b, Raised):
        return isinstance(a, Raised) and isinstance(b, Raised)
    return _same_leaves(a, b, rtol, atol, equal_nan=True)


def _same_leaves(a, b, rtol, atol, equal_nan) -> bool:
    """``a`` and ``b`` (neither raised) have the same leaves, and each pair agrees (:func:`_same_leaf`)."""
    la, lb = list(leaves(a)), list(leaves(b))
    if [p for p, _ in la] != [p for p, _ in lb]:
        return False
    return all(_same_leaf(x, y, rtol, atol, equal_nan) for (_, x), (_, y) in zip(la, lb, strict=True))


def _same_leaf(x, y, rtol, atol, equal_nan) -> bool:
    """One shape, one kind (bool or number), and equal bools or numbers within ``rtol`` relative
    to ``y`` + ``atol`` (NaN equal to NaN when ``equal_nan``)."""
    try:
        x, y = np.asarray(x), np.asarray(y)
    except Exception:           # noqa: BLE001 - not an array: not the same result
        return False
    if x.shape != y.shape or (x.dtype == bool) != (y.dtype == bool):
        return False
    if x.dtype == bool:
        return bool(np.array_equal(x, y))
    if not (np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
        return False
    with np.errstate(all="ignore"):
        return bool(np.isclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=equal_nan).all())


def finite_result(x) -> bool:
    """A result made of arrays without NaN (inf allowed, e.g. in masks)."""
    if isinstance(x, Raised):
        return False
    try:
        return all(not np.isnan(np.asarray(v, dtype=np.float64)).any() for _, v in leaves(x))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- the bank's records
@dataclass
class Case:
    """One stored call: ``fn(*args, **kwargs)`` must give ``expected`` (a ``dtype`` output)."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    expected: object = None
    dtype: str = "float64"
    tol: tuple | None = None
    points: float = 1.0
    hidden: bool = False
    outputs: tuple | None = None        # names of a tuple result's items, e.g. ("dq", "dk", "dv")


@dataclass
class Fingerprint:
    """A catalogued mistake: its name, hint and what it returns on each case (in case order)."""

    name: str
    hint: str
    outputs: list


@dataclass
class Finding:
    """What a probe found: ``what`` is wrong (a sentence), ``hint`` teaches, ``name`` is short."""

    name: str
    what: str
    hint: str


@dataclass
class CaseResult:
    """One case run: ``parts`` lists ``(output name, right)`` for each output the contract asks
    for (e.g. ("dq", True), ("dk", False), ("dv", True)); the autograder scores a case as its
    points times the fraction of parts right (:func:`score`)."""

    label: str
    passed: bool
    why: str | None
    points: float
    hidden: bool
    out: object = None
    written: list = field(default_factory=list)
    parts: list = field(default_factory=list)


@dataclass
class Report:
    """The verdict on one exercise: ``status`` is "passed", "mistake", "failed" or
    "not implemented yet"; ``message`` begins with PASSED, MISTAKE: or FAILED:."""

    exercise: str
    status: str
    message: str
    mistake: str | None = None
    cases: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def parts(self) -> list:
        """``(output name, cases where it is right, cases)`` for each output, e.g.
        ``[("dq", 9, 9), ("dk", 7, 9), ("dv", 9, 9)]``."""
        names = [n for n, _ in self.cases[0].parts] if self.cases and self.cases[0].parts else []
        return [(n, sum(ok for r in self.cases for m, ok in r.parts if m == n), len(self.cases))
                for n in names]

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------- the verdict
def run_cases(fn, cases, arg_names=None, on_case=None, output_names=None):
    """Run every case; returns a list of :class:`CaseResult` (raises NotImplementedYet).
    ``output_names`` names the outputs of a tuple result (e.g. ["dq", "dk", "dv"])."""
    results = []
    for case in cases:
        c = call(fn, case.args, case.kwargs, arg_names)
        why, parts = compare_parts(c.out, case.expected, case.dtype, case.tol,
                                   output_names or case.outputs, _has_float((case.args, case.kwargs)))
        if c.written:                   # writing into an input loses the whole case
            why = f"wrote into its input ({', '.join(c.written)})" + (f"; {why}" if why else "")
            parts = [(n, False) for n, _ in parts]
        r = CaseResult(case.label, why is None, why, case.points, case.hidden, c.out, c.written,
                       parts)
        results.append(r)
        if on_case is not None:
            on_case(case, r)
    return results


def agrees(results, cases, fp):
    """``(agrees, informative)``: the student's outputs reproduce catalogued mistake ``fp`` on
    every case: where the mistake gives a NaN-free result the student gives the same; where it
    gives NaN, the student gives NaN at the same entries and the same values elsewhere; where it
    raises, the student fails too. ``informative`` counts the reproduced cases on which the
    mistake is wrong."""
    informative = 0
    for r, case, m_out in zip(results, cases, fp.outputs, strict=False):
        if finite_result(m_out):
            if not same(r.out, m_out, rtol=1e-4, atol=1e-6):
                return False, informative
            if compare(m_out, case.expected, None, case.tol) is not None:
                informative += 1
        elif isinstance(m_out, Raised):
            if r.passed:
                return False, informative
        elif not same_behaviour(r.out, m_out):
            return False, informative
    return len(fp.outputs) >= len(results), informative


def match_fingerprint(results, cases, fingerprints):
    """The catalogued mistake the student's outputs reproduce on every case (see :func:`agrees`),
    with at least one reproduced case wrong; None when none does, or when several that are not
    the same mistake do (the name would then be a guess)."""
    found = [fp for fp in fingerprints if (lambda a: a[0] and a[1])(agrees(results, cases, fp))]
    if not found:
        return None
    first = found[0]
    for other in found[1:]:
        if other.name != first.name and not all(
                same(a, b) or (not finite_result(a) and not finite_result(b))
                for a, b in zip(first.outputs, other.outputs, strict=False)):
            return None
    return first


def _probe_finding(fn, probes, results, cases, fingerprints, unsaid):
    """The first probe finding that is consistent with the cases: a finding that names a
    catalogued mistake only when the student reproduces that mistake on every case (otherwise
    its measured sentence goes to ``unsaid``); a finding about values only when some failing case
    did not raise (unless the finding is about what raised)."""
    catalogued = {fp.name: fp for fp in fingerprints}
    raised = all(isinstance(r.out, Raised) for r in results if not r.passed)
    for probe in probes:
        try:
            with np.errstate(all="ignore"):
                finding = probe(fn)
        except (NotImplementedYet, TimeLimit):
            raise
        except Exception:           # noqa: BLE001 - a probe that cannot run says nothing
            finding = None
        if finding is None:
            continue
        if finding.name in catalogued and not agrees(results, cases, catalogued[finding.name])[0]:
            unsaid.append(finding.what)         # true of the probe's input, but not that mistake
            continue
        if raised and not any(w in finding.what for w in ("Error", "raise")):
            continue
        return finding
    return None


#: measured behaviours that, found on every failing case, come before the probes (a probe measures
#: one input of its own; these are measured on the cases)
STRONG = ("off by a constant factor", "mask polarity flipped", "wrong sign")


def verdict(exercise, fn, cases, fingerprints=(), probes=(), arg_names=None, signature=None,
            results=None) -> Report:
    """Check ``fn`` on ``cases``; when it is wrong, name what is wrong.

    The diagnosis, first match wins (:data:`DIAGNOSES`): an input written to; a catalogued mistake
    reproduced on every case, and no other (``fingerprints``); the dtype rule; a strong behaviour
    measured on the cases (:data:`STRONG`); a probe (a function ``probe(fn) -> Finding | None``
    that measures a property, see :mod:`probes`) whose finding the cases bear out; shapes that do
    not broadcast; the wrong structure; a behaviour measured on the cases (:mod:`diagnose`);
    otherwise FAILED with what was measured. Every message ends with the smallest failing case,
    drawn.
    """
    signature = signature or exercise
    try:
        if results is None:
            results = run_cases(fn, cases, arg_names)
    except NotImplementedYet:
        return Report(exercise, "not implemented yet",
                      f"FAILED: not implemented yet: {signature} still raises NotImplementedError: "
                      "write it, then run the check again.")
    d = _Diagnosis(exercise, signature, fn, cases, results, list(fingerprints), list(probes), arg_names)
    if not d.failures:
        return Report(exercise, "passed", f"PASSED: {exercise}, all {len(results)} cases", cases=results)
    for diagnose in DIAGNOSES:
        finding = diagnose(d)
        if finding is not None:
            return _mistake(exercise, results, finding, d.failures, d.drawn)
    sentences = d.unsaid + d.sentences
    said = f" Measured: {'; '.join(sentences)}." if sentences else ""
    return Report(exercise, "failed",
                  f"FAILED: {exercise}: {len(d.failures)} of {len(results)} cases fail; first: "
                  f"{_first_shown(d.failures)}{_parts_summary(results)}{said}{d.drawn}", cases=results)


@dataclass
class _Diagnosis:
    """What the diagnoses of one wrong submission read, and what they leave for the next: the
    behaviour :func:`diagnose.measure` found (``found``, ``sentences``) and the probes' measured
    sentences that did not name their mistake (``unsaid``)."""

    exercise: str
    signature: str
    fn: object
    cases: list
    results: list
    fingerprints: list
    probes: list
    arg_names: list | None
    found: Finding | None = None
    sentences: list = field(default_factory=list)
    unsaid: list = field(default_factory=list)

    def __post_init__(self):
        self.failures = [r for r in self.results if not r.passed]
        self.drawn = _drawn(self.cases, self.results, self.arg_names) if self.failures else ""


def _drawn(cases, results, arg_names):
    """The smallest failing public case, drawn (:func:`diagnose.show`), after a newline; "" when no
    public case fails or the picture cannot be drawn."""
    from .diagnose import show, smallest
    small = smallest(cases, results)
    try:
        return "\n" + show(*small, arg_names, cases[0].outputs) if small else ""
    except Exception:               # noqa: BLE001 - a picture that cannot be drawn is left out
        return ""


def _wrote_into_input(d):
    written = sorted({w for r in d.results for w in r.written})
    if not written:
        return None
    return Finding(
        "wrote into an input",
        f"your function changed its input{'s' if len(written) > 1 else ''} {', '.join(written)}",
        "The caller still needs its arrays after the call. Operations like x -= m, "
        "np.exp(x, out=x) or x[...] = ... write into the caller's array: compute into a new "
        "array (y = x - m) instead.")


def _catalogued(d):
    fp = match_fingerprint(d.results, d.cases, d.fingerprints)
    return None if fp is None else Finding(fp.name, fp.name, fp.hint)


def _dtype_not_kept(d):
    """Every failing case has a float output of the wrong dtype (and nothing else wrong)."""
    if not all(r.why and " has dtype " in r.why and ", expected float" in r.why for r in d.failures):
        return None
    wants_f64 = all("expected float64" in r.why for r in d.failures)
    if wants_f64 and not any(_has_float(c.args) for c, r in zip(d.cases, d.results, strict=False)
                             if not r.passed):
        hint = ("The contract asks for a float64 array, and no float input tells you otherwise: "
                "build it in float64 (np.arange(n) / 2.0 and np.empty(shape) are float64; "
                "dtype=np.float32 or .astype(np.float32) are not).")
    else:
        hint = ("A float32 input gives a float32 output, a float64 input a float64 output. "
                "float64 creeps in through NumPy float64 scalars (np.sqrt(d_k) is one: use "
                "math.sqrt), dtype=float arrays (np.zeros(n) is float64) or np.array(x, "
                "dtype=float); float32 through .astype(np.float32) or dtype=np.float32. Compute "
                "in any precision you like, then cast back with .astype(x.dtype).")
    return Finding("dtype not kept", d.failures[0].why.split(" (keep")[0].split("; ")[0], hint)


def _strong_measured(d):
    """Measure the behaviour on the cases (kept for the later steps); a :data:`STRONG` one explains
    every failing case, before any probe."""
    from .diagnose import measure
    try:
        d.found, d.sentences = measure(d.cases, d.results, d.arg_names, d.cases[0].outputs)
    except Exception:               # noqa: BLE001 - a measurement that cannot run says nothing
        d.found, d.sentences = None, []
    if d.found is not None and any(w in d.found.name for w in STRONG):
        return d.found
    return None


def _probed(d):
    return _probe_finding(d.fn, d.probes, d.results, d.cases, d.fingerprints, d.unsaid)


def _shapes_do_not_broadcast(d):
    whys = [r.why for r in d.failures]
    if not (any(_shape_error(w) for w in whys)
            and all(_shape_error(w) or " has shape " in (w or "") for w in whys)):
        return None
    return Finding(
        "shapes that do not broadcast", "your function raises a shape error (broadcasting, "
        "matmul or indexing) or returns the wrong shape on every failing case",
        "NumPy lines shapes up from the right. A reduction drops its axis (x.sum(-1) of "
        "(..., n) is (...): keep it with keepdims=True); an axis added in the middle "
        "(mask[:, None] on an (L, S) mask) shifts the others: print the shapes of the "
        "failing case and add axes where the contract puts them.")


def _wrong_structure(d):
    if not all(r.why and r.why.startswith("returned ") for r in d.failures):
        return None
    return Finding(
        "returns the wrong structure", f"it {d.failures[0].why}",
        f"Return exactly what the contract of {d.signature} says (a tuple where it asks for "
        "several results, in that order).")


def _measured(d):
    return d.found


#: the diagnoses of a wrong submission in order, first finding wins (each reads a
#: :class:`_Diagnosis`, returns a :class:`Finding` or None); see :func:`verdict`
DIAGNOSES = (_wrote_into_input, _catalogued, _dtype_not_kept, _strong_measured, _probed,
             _shapes_do_not_broadcast, _wrong_structure, _measured)


#: what NumPy raises when axes do not line up: broadcasting, a matmul's core dimensions, an index
#: with more axes than the array has
SHAPE_ERRORS = ("could not be broadcast", "matmul: Input operand", "raised IndexError: too many indices",
                "raised IndexError: invalid index to scalar")


def _shape_error(why):
    return bool(why) and any(w in why for w in SHAPE_ERRORS)


def _has_float(x):
    return any(isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating) for _, v in leaves(x))



def _first_shown(failures):
    """The first failing case as the feedback shows it: a public case by its label; a hidden
    case (only when no public case fails) without its label or inputs."""
    shown = next((r for r in failures if not r.hidden), None)
    if shown is not None:
        return f"{shown.label}: {shown.why}"
    return f"a hidden case ({len(failures)} hidden case{'s' if len(failures) > 1 else ''} fail)"


def _parts_summary(results):
    """For a result with several outputs: which are right on every case and which are not."""
    names = [n for n, _ in results[0].parts] if results and results[0].parts else []
    if len(names) < 2:
        return ""
    wrong = {n: sum(1 for r in results for m, ok in r.parts if m == n and not ok) for n in names}
    right = [n for n in names if not wrong[n]]
    bad = [f"{n} on {wrong[n]} of {len(results)} cases" for n in names if wrong[n]]
    if not bad:
        return ""
    return (f" Outputs right on every case: {', '.join(right) if right else 'none'}; wrong: "
            f"{', '.join(bad)}.")


def _mistake(exercise, results, finding, failures, drawn=""):
    where = f" (first failing case: {_first_shown(failures)})" if failures else ""
    return Report(exercise, "mistake",
                  f"MISTAKE: {exercise}: {finding.name}"
                  f"{'' if finding.what == finding.name else ': ' + finding.what}. "
                  f"Hint: {finding.hint}{where}{_parts_summary(results)}{drawn}",
                  mistake=finding.name, cases=results)
