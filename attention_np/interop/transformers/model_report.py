"""The report of a whole-model diff (:func:`~attention_np.interop.transformers.model_diff.
compare_transformers_model`, :func:`~attention_np.interop.transformers.kernel_diff.
compare_attention_kernels`): one :class:`LayerResult` per attention layer call, a
:class:`ModelReport` that reads as a table in a terminal (``str``) and in a notebook (HTML)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention_np.interop.tolerance import EPS32, RTOL64
from attention_np.interop.transformers.rotary import ULPS_ANGLE


@dataclass
class LayerResult:
    """One attention layer's call: its name (``"encoder.layer.0.attention.self"``, ``#k`` for
    the k-th call of a shared layer), the largest output and gradient errors, the checks."""

    name: str
    module: str
    checks: list
    excluded_rows: list = field(default_factory=list)
    kind: str = "attention"          # or "rotary": a rotary embedding's cos, sin against ours;
    #                                  "cache": a layer's cached keys and values against ours;
    #                                  "tokens": generate()'s tokens (generate_diff)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def forward_error(self) -> float:
        """The output's error (a rotary row: the larger of cos's and sin's)."""
        return max((c.err for c in self.checks if not c.name.startswith("d")), default=np.nan)

    @property
    def gradient_error(self) -> float:
        return max((c.err for c in self.checks if c.name.startswith("d")), default=np.nan)

    @property
    def worst_gradient(self) -> str:
        grads = [c for c in self.checks if c.name.startswith("d")]
        return max(grads, key=lambda c: c.err).name if grads else "-"


@dataclass
class ModelReport:
    """What :func:`compare_transformers_model` found: ``layers`` in the order they ran, ``ok``,
    ``first_disagreement`` (a :class:`LayerResult`, None when all agree), ``refused`` (name,
    reason) for attention layers attention_np cannot express, ``not_run`` (name, class) for
    attention layers the forward never called (a vision tower, given text only): not compared."""

    model: str
    layers: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    not_run: list = field(default_factory=list)
    weights: str = ""           # the weights' stored dtype and the one both ran in

    @property
    def ok(self) -> bool:
        return self.verdict == "AGREE"

    @property
    def verdict(self) -> str:
        """"MISMATCH" when a compared row disagrees; else "INCOMPLETE" when a layer was refused
        or not run, or nothing was compared; else "AGREE". The text, the HTML and ``ok`` all
        read this."""
        if self.first_disagreement is not None:
            return "MISMATCH"
        return "INCOMPLETE" if self.refused or self.not_run or not self.attention else "AGREE"

    def _head(self) -> list:
        return [f"{self.model} (float64), every attention layer vs attention_np -> {self.verdict}",
                f"tolerance float64: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|); a "
                f"rotary embedding's cos, sin (float32 angles): <= {ULPS_ANGLE} * {EPS32:.2g} * "
                "max(1, max|angle|) * max(1, attention factor)",
                *([self.weights] if self.weights else [])]

    def _tail(self) -> list:
        first = self.first_disagreement
        lines = [f"first disagreement: {first.name} ({first.module})"] if first else []
        lines += [f"refused: {name}: {why}" for name, why in self.refused]
        lines += [f"not run: {name} ({cls}) was not called by this forward: not compared"
                  for name, cls in self.not_run]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"{r.name}: rows (batch, position) with every key masked, left out of the "
                  f"verdict: {r.excluded_rows}" for r in self.layers if r.excluded_rows]
        return lines

    @property
    def attention(self) -> list:
        """The rows of attention layer calls (not the rotary embeddings' rows)."""
        return [r for r in self.layers if r.kind == "attention"]

    @property
    def first_disagreement(self):
        return next((r for r in self.layers if not r.ok), None)

    def _rows(self):
        for r in self.layers:
            grad = "-" if np.isnan(r.gradient_error) else f"{r.gradient_error:.1e}"
            yield (r.name, r.module, f"{r.forward_error:.1e}", grad,
                   r.worst_gradient, "ok" if r.ok else "MISMATCH",
                   f"{len(r.excluded_rows)} left out" if r.excluded_rows else "")

    def __str__(self) -> str:
        head = ("layer", "module", "out err", "grad err", "worst", "verdict", "rows")
        rows = [head, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        table = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]
        return "\n".join(self._head() + table + self._tail())

    def _repr_html_(self) -> str:
        import html
        head = ("layer", "module", "out err", "grad err", "worst", "verdict", "rows")
        cells = "".join(f"<th>{h}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._rows())
        title, *rules = self._head()
        extra = "".join(f"<p>{html.escape(s)}</p>" for s in self._tail())
        rule = "".join(f"<p>{html.escape(s)}</p>" for s in rules)
        return (f"<p><b>{html.escape(title)}</b></p>{rule}"
                f"<table><tr>{cells}</tr>{body}</table>{extra}")
