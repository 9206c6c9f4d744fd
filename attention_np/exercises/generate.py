"""Cases generated from each exercise's contract, not listed by hand.

An exercise describes its arguments as a :class:`Spec`: symbolic axes (``L``, ``S``, ``d_k``, ...,
each with the smallest size its contract allows), the pairs of widths its contract lets differ
(``d_k`` and ``d_v``, ``h*d_k`` and ``d_model``), the number of leading batch axes it accepts,
whether it takes float arrays, and one :class:`Clause` per key of its contract
(:data:`attention_np.exercises.notebooks.CLAUSES`), with the value families that clause needs
(large logits at a random position, a later entry far larger than an earlier one, both signs,
-inf, masks of every allowed shape, fully masked rows, empty sequences).

From a spec :func:`edges` derives the *edges* a case can sit on: every axis at its smallest
size(s) and above (``L=1``, ``L>1``; ``t=0``, ``t=1``, ``t>1``), every pair both ways (``L<S``,
``L>S``), every count of leading axes and one of size 1 (``lead=0`` ... ``lead=3``, ``lead
axis=1``), both dtypes, and each value family of a clause. :func:`draw` then draws, for every
clause, cases until every edge the clause allows holds in some case; what holds is measured on the
built arguments (``Spec.measure``), never taken from the plan. Public cases come from one seed,
the autograder's hidden ones from another: other sizes and values, the same coverage.

Runs at build time only (it may use the library); the kits store the cases it drew.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention_np.exercises.checker import Case

#: the number of random plans tried for one edge before the generator gives up (and says so)
TRIES = 400
#: the edge of a case with no axis at its least size
ALL_LARGE = "every axis >1"
#: among the plans that reach an edge, the one covering most edges still missing is kept
CANDIDATES = 6


@dataclass(frozen=True)
class Axis:
    """A symbolic size: ``low`` is the smallest the contract allows (0 for an empty cache), ``high``
    the largest drawn; ``step`` 2 for an even size (d_model of the sinusoids)."""

    name: str
    low: int = 1
    high: int = 6
    step: int = 1

    def small(self) -> list:
        """The sizes that are edges of their own: every allowed size up to 1 (or the least one)."""
        return list(range(self.low, 2)) if self.low <= 1 else [self.low]

    def edges(self) -> list:
        top = self.small()[-1]
        return [f"{self.name}={n}" for n in self.small()] + [f"{self.name}>{top}"]

    def draw(self, rng) -> int:
        small = self.small()
        if rng.random() < 0.3 * len(small):
            return int(rng.choice(small))
        return int(rng.choice(np.arange(small[-1] + self.step, self.high + 1, self.step)))


@dataclass(frozen=True)
class Clause:
    """How to draw cases for one contract clause ``key``: ``families`` (value families, each an edge
    of this clause), ``pins`` (sizes set for every case, e.g. ``{"L": 1}``), ``require`` (a test on
    the measured sizes, e.g. L != S) and ``excludes`` (the edges the clause cannot sit on, e.g.
    ``L>1`` for ``L_1``: every other edge of the spec must be reached)."""

    key: str
    families: tuple = ("normal",)
    pins: dict = field(default_factory=dict)
    require: object = None
    excludes: tuple = ()


@dataclass(frozen=True)
class Spec:
    """The arguments of an exercise, symbolically. ``build(rng, sizes, clause, family)`` returns the
    arguments (a tuple) or None when this family cannot be built at these sizes; ``measure(args)``
    reads the sizes back from built arguments (``batch``: the leading axes' shape, ``dtype``)."""

    name: str
    axes: tuple
    clauses: tuple
    build: object
    measure: object
    differ: tuple = ()              # pairs (a, b) the contract lets differ: edges a<b and a>b
    equal: tuple = ()               # pairs whose equality is an edge of its own (L = h)
    lead: int = 0                   # leading batch axes allowed: 0 .. lead
    floats: bool = True             # float inputs: both dtypes are edges
    conditions: tuple = ()          # (name, test on the sizes): edges "name" and "not name"

    def clause(self, key) -> Clause:
        return next(c for c in self.clauses if c.key == key)


def edges(spec: Spec, clause: Clause | None = None) -> list:
    """Every edge of ``spec`` (with ``clause``: the ones this clause must reach, its families too)."""
    out = [e for ax in spec.axes for e in ax.edges()] + [ALL_LARGE]
    out += [e for a, b in spec.differ for e in (f"{a}<{b}", f"{a}>{b}")]
    out += [f"{a}={b}" for a, b in spec.equal]
    out += [e for name, _ in spec.conditions for e in (name, f"not {name}")]
    if spec.lead:
        out += [f"lead={n}" for n in range(spec.lead + 1)] + ["lead axis=1"]
    if spec.floats:
        out += ["float32", "float64"]
    if clause is None:
        return out
    out += [f"family={f}" for f in clause.families if len(clause.families) > 1]
    return [e for e in out if e not in clause.excludes and e not in _pinned_out(spec, clause)]


def _pinned_out(spec: Spec, clause: Clause) -> set:
    """The edges a clause's pins rule out: an axis pinned to one size sits on that edge only, and
    at its least size it takes no pair and no "every axis >1"."""
    out = set()
    for ax in spec.axes:
        if ax.name in clause.pins:
            n = clause.pins[ax.name]
            out |= set(ax.edges()) - {f"{ax.name}={n}" if n in ax.small() else f"{ax.name}>{ax.small()[-1]}"}
            if n in ax.small():
                out.add(ALL_LARGE)
                out |= {e for a, b in spec.differ if ax.name in (a, b) for e in (f"{a}<{b}", f"{a}>{b}")}
    return out


def edges_of(spec: Spec, args, family: str | None = None) -> set:
    """The edges a case with arguments ``args`` sits on, measured from the arguments."""
    sizes = spec.measure(args)
    out = _size_edges(spec, sizes) | _form_edges(spec, sizes)
    if family is not None:
        out.add(f"family={family}")
    return out


def _size_edges(spec: Spec, sizes: dict) -> set:
    """Each axis at its least sizes or above, every axis above them, the pairs that differ (both
    ways, with neither at its least size), the pairs that are equal, and each condition or not."""
    least = {ax.name: ax.small()[-1] for ax in spec.axes}
    out = {f"{ax.name}={sizes[ax.name]}" if sizes[ax.name] in ax.small() else f"{ax.name}>{least[ax.name]}"
           for ax in spec.axes}
    if all(sizes[n] > m for n, m in least.items()):
        out.add(ALL_LARGE)
    out |= {f"{a}<{b}" if sizes[a] < sizes[b] else f"{a}>{b}" for a, b in spec.differ
            if sizes[a] != sizes[b] and sizes[a] > least.get(a, 0) and sizes[b] > least.get(b, 0)}
    out |= {f"{a}={b}" for a, b in spec.equal if sizes[a] == sizes[b]}
    out |= {name if test(sizes) else f"not {name}" for name, test in spec.conditions}
    return out


def _form_edges(spec: Spec, sizes: dict) -> set:
    """The number of leading axes and whether one has size 1, and the float dtype."""
    out = set()
    if spec.lead:
        batch = tuple(sizes["batch"])
        out.add(f"lead={len(batch)}")
        if 1 in batch:
            out.add("lead axis=1")
    if spec.floats:
        out.add(np.dtype(sizes["dtype"]).name)
    return out


def _plan(spec: Spec, clause: Clause, rng, want: str) -> tuple:
    """Random sizes (and a family) for ``clause``, nudged toward the edge ``want``."""
    sizes = {ax.name: ax.draw(rng) for ax in spec.axes}
    n_lead = int(rng.integers(0, spec.lead + 1))
    sizes["batch"] = tuple(int(rng.choice([1, 2, 3], p=[0.3, 0.4, 0.3])) for _ in range(n_lead))
    sizes["dtype"] = np.float32 if rng.random() < 0.35 else np.float64
    family = clause.families[int(rng.integers(len(clause.families)))]
    name, _, value = want.partition("=")
    if want == ALL_LARGE:
        sizes.update({ax.name: int(rng.choice(np.arange(ax.small()[-1] + ax.step, ax.high + 1, ax.step)))
                      for ax in spec.axes})
    elif want.startswith("family="):
        family = value
    elif want.startswith("lead=") and spec.lead:
        sizes["batch"] = tuple(int(rng.choice([1, 2, 3])) for _ in range(int(value)))
    elif want in ("float32", "float64"):
        sizes["dtype"] = np.dtype(want).type
    elif name in sizes and value.isdigit():
        sizes[name] = int(value)
    sizes.update(clause.pins)
    return sizes, family


def _valid(clause: Clause, sizes: dict) -> bool:
    return clause.require is None or bool(clause.require(sizes))


def _draw_clause(spec: Spec, clause: Clause, rng, avoid) -> list:
    """Cases for one clause until every edge it allows is reached (raises if one cannot be)."""
    target = edges(spec, clause)
    covered, cases = set(), []
    for want in target:
        if want in covered:
            continue
        best = None
        found = 0
        for _ in range(TRIES):
            sizes, family = _plan(spec, clause, rng, want)
            args = spec.build(rng, sizes, clause.key, family)
            if args is None or any(_same_args(args, a) for a in avoid):
                continue
            got = edges_of(spec, args, family if len(clause.families) > 1 else None)
            if want not in got or not _valid(clause, spec.measure(args)):
                continue
            gain = len((got & set(target)) - covered)
            if best is None or gain > best[0]:
                best = (gain, args, family, got)
            found += 1
            if found >= CANDIDATES:
                break
        if best is None:
            raise ValueError(f"{spec.name}: no case of clause {clause.key!r} reaches the edge {want!r} "
                             f"in {TRIES} plans: list it in the clause's excludes if the contract "
                             "rules it out")
        _, args, family, got = best
        covered |= got
        cases.append((args, family))
    return cases


def draw(spec: Spec, seed: int, avoid_seed: int | None = None) -> list:
    """The generated cases of ``spec`` from ``seed``, every clause at every edge it allows.
    ``avoid_seed``: no case repeats an input of the cases drawn from that seed (the public ones,
    for the hidden). New :class:`Case` objects each call; the draw itself is done once."""
    return [Case(*fields[:2], dtype=fields[2], clauses=fields[3], family=fields[4])
            for fields in _drawn(spec, seed, avoid_seed)]


_DRAWN = {}


def _drawn(spec: Spec, seed: int, avoid_seed: int | None) -> list:
    key = (spec.name, id(spec), seed, avoid_seed)
    if key not in _DRAWN:
        avoid = [f[1] for f in _drawn(spec, avoid_seed, None)] if avoid_seed is not None else []
        rng = np.random.default_rng(seed)
        out = []
        for clause in spec.clauses:
            for args, family in _draw_clause(spec, clause, rng, avoid):
                sizes = spec.measure(args)
                dtype = np.dtype(sizes.get("dtype", np.float64)).type
                tags = (clause.key,) + (("dtype",) if dtype is np.float32 else ())
                out.append((label(spec, clause.key, sizes, family), args, dtype, tags,
                            family if len(clause.families) > 1 else None))
                avoid.append(args)
        _DRAWN[key] = out
    return _DRAWN[key]


def label(spec: Spec, key: str, sizes: dict, family: str) -> str:
    """What a student reads of a case: its clause, its sizes, its value family."""
    parts = [f"{ax.name}={sizes[ax.name]}" for ax in spec.axes]
    if spec.lead:
        parts.append(f"batch {tuple(sizes['batch'])}" if sizes["batch"] else "no batch axes")
    if spec.floats:
        parts.append(np.dtype(sizes["dtype"]).name)
    fam = "" if family == "normal" else f" ({family.replace('_', ' ')})"
    return f"{key}: {', '.join(parts)}{fam}"


def _same_args(a, b) -> bool:
    """Two argument trees hold the same values (arrays by shape and value)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and np.array_equal(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_args(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_args(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------- value families shared by specs
def logits(rng, shape, family, dtype=np.float64):
    """Rows of logits (..., n) of one value family: ``normal``; ``huge`` (~1e3) and ``tiny``
    (~-1e3); ``scales`` (rows offset by -800, 0 or 800); ``peak`` (one entry at a random position
    of each row ~1e3 above the rest); ``later_larger`` (entry j larger than entry j-1 by ~300);
    ``both_signs`` (|x| ~ 1e3 of either sign)."""
    x = rng.normal(size=shape)
    n = shape[-1]
    if family == "huge":
        x = 1000.0 + 50 * x
    elif family == "tiny":
        x = -1000.0 + 5 * x
    elif family == "scales":
        x = x + rng.choice([-800.0, 0.0, 800.0], size=(*shape[:-1], 1))
    elif family == "peak":
        at = rng.integers(n, size=shape[:-1])
        x = x + 1000.0 * (np.arange(n) == at[..., None])
    elif family == "later_larger":
        x = x + 300.0 * np.arange(n)
    elif family == "both_signs":
        x = 1000.0 * x
    return x.astype(dtype)


def some_neg_inf(rng, x):
    """``x`` with about 40 % of its entries -inf and one finite entry per row, at a random position."""
    keep = rng.integers(x.shape[-1], size=x.shape[:-1])[..., None] == np.arange(x.shape[-1])
    return np.where((rng.random(x.shape) < 0.4) & ~keep, -np.inf, x).astype(x.dtype)


def float_dtype(args):
    """The dtype of the first float array in ``args`` (float64 if none)."""
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            return a.dtype.type
        if isinstance(a, dict):
            return float_dtype(list(a.values()))
    return np.float64
