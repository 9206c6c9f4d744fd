"""The report of a whole-model diff (:func:`~attention_np.interop.transformers_model.
compare_transformers_model`, :func:`~attention_np.interop.transformers_interface.
compare_attention_kernels`): one :class:`LayerResult` per attention layer call, a
:class:`ModelReport` that reads as a table in a terminal (``str``) and in a notebook (HTML)."""

from __future__ import annotations

from dataclasses import dataclass, field

from attention_np.interop.tolerance import RTOL64


@dataclass
class LayerResult:
    """One attention layer's call: its name (``"encoder.layer.0.attention.self"``, ``#k`` for
    the k-th call of a shared layer), the largest output and gradient errors, the checks."""

    name: str
    module: str
    checks: list
    excluded_rows: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def forward_error(self) -> float:
        return next(c.err for c in self.checks if c.name == "out")

    @property
    def gradient_error(self) -> float:
        return max(c.err for c in self.checks if c.name.startswith("d"))

    @property
    def worst_gradient(self) -> str:
        return max((c for c in self.checks if c.name.startswith("d")), key=lambda c: c.err).name


@dataclass
class ModelReport:
    """What :func:`compare_transformers_model` found: ``layers`` in the order they ran, ``ok``,
    ``first_disagreement`` (a :class:`LayerResult`, None when all agree), ``refused`` (name,
    reason) for attention layers attention_np cannot express."""

    model: str
    layers: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.layers) and not self.refused and all(r.ok for r in self.layers)

    @property
    def first_disagreement(self):
        return next((r for r in self.layers if not r.ok), None)

    def _rows(self):
        for r in self.layers:
            yield (r.name, r.module, f"{r.forward_error:.1e}", f"{r.gradient_error:.1e}",
                   r.worst_gradient, "ok" if r.ok else "MISMATCH",
                   f"{len(r.excluded_rows)} left out" if r.excluded_rows else "")

    def __str__(self) -> str:
        first = self.first_disagreement
        verdict = ("AGREE" if self.ok else "MISMATCH" if first is not None else "INCOMPLETE")
        lines = [f"{self.model} (float64), every attention layer vs attention_np -> {verdict}",
                 f"tolerance float64: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|)"]
        head = ("layer", "module", "out err", "grad err", "worst", "verdict", "rows")
        rows = [head, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]
        if first is not None:
            lines.append(f"first disagreement: {first.name} ({first.module})")
        lines += [f"refused: {name}: {why}" for name, why in self.refused]
        lines += [f"note: {n}" for n in self.notes]
        for r in self.layers:
            if r.excluded_rows:
                lines.append(f"{r.name}: rows (batch, position) with every key masked, left "
                             f"out of the verdict: {r.excluded_rows}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        head = ("layer", "module", "out err", "grad err", "worst", "verdict", "rows")
        cells = "".join(f"<th>{h}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._rows())
        first = self.first_disagreement
        extra = "".join(f"<p>{html.escape(s)}</p>" for s in (
            ([f"first disagreement: {first.name}"] if first else [])
            + [f"refused: {n}: {w}" for n, w in self.refused] + self.notes))
        return (f"<p><b>{html.escape(self.model)}</b>: "
                f"{'AGREE' if self.ok else 'MISMATCH'}</p><table><tr>{cells}</tr>{body}</table>"
                f"{extra}")
