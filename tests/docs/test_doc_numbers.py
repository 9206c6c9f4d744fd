"""The measured numbers docs/teaching.md prints are what the code measures (instructors.md's are
checked in tests/course/test_course_submissions.py).

Each table is read from the document and compared with a fresh run of the call it names (seeded;
the tolerance is a few units of the last printed digit, so another CPU's rounding passes and a
stale or mistyped number does not) or with the committed results it quotes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from attention_np.lessons.examples import SCALING_D_KS, SEED
from attention_np.studies import scaling

ROOT = Path(__file__).resolve().parents[2]
TEACHING = (ROOT / "docs" / "teaching.md").read_text()


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _table_rows(section: str) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]
    rows = [row for row in rows if not all(set(cell) <= set("-: ") for cell in row)]   # no separator
    return rows[1:]                                                                      # no header


def _number(cell: str) -> float:
    return float(cell.replace("−", "-"))


def test_teaching_footnote4_table_is_dot_product_moments():
    rows = _table_rows(_section(TEACHING, "## Footnote 4, measured"))
    m = scaling.dot_product_moments(SCALING_D_KS, rng=SEED)
    assert [int(r[0]) for r in rows] == list(SCALING_D_KS)
    for row, mean, var, scaled in zip(rows, m["mean"], m["var"], m["var_scaled"], strict=True):
        assert abs(_number(row[1]) - mean) < 1e-3, row
        assert abs(_number(row[2]) / var - 1) < 2e-3, row
        assert abs(_number(row[3]) - scaled) < 2e-3, row


def test_teaching_gradient_table_is_softmax_gradients():
    rows = _table_rows(_section(TEACHING, "## Gradient through the softmax"))
    g = scaling.softmax_gradients(SCALING_D_KS, rng=SEED)
    columns = ("dscores_ratio_median", "dscores_ratio_rms", "dq_ratio_median", "dq_ratio_rms")
    assert [int(r[0]) for r in rows] == list(SCALING_D_KS)
    for i, row in enumerate(rows):
        for cell, name in zip(row[1:], columns, strict=True):
            assert abs(_number(cell) / g[name][i] - 1) < 0.02, (row, name, g[name][i])


def test_teaching_claim9_table_is_the_committed_study():
    rows = _table_rows(_section(TEACHING, "## Claim 9, measured"))
    claim9 = json.loads((ROOT / "notebooks" / "results" / "claim9.json").read_text())
    two = {r["num_heads"]: np.array(r["unexplained"]) for r in claim9["runs"] if r["task"] == "two positions"}
    for h, cell in zip((1, 2, 4), rows[0][1:], strict=True):
        printed = tuple(map(float, re.findall(r"\d\.\d{4}", cell)))
        assert printed == tuple(round(float(x), 4) for x in (two[h].mean(), two[h].min(), two[h].max()))
