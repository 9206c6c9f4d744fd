"""docs/references.md: every citation link of a lesson lands on an entry, every entry is cited by a
lesson, and each entry names its year and (but for Glorot & Bengio 2010, which has none) its arXiv id."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = (ROOT / "docs" / "references.md").read_text()
ANCHORS = re.findall(r'<a id="([a-z]+\d{4})"></a>', REFERENCES)


def _lesson_text() -> dict:
    texts = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        texts[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return texts


def test_every_lesson_citation_lands_on_an_entry_and_every_entry_is_cited():
    cited = {}
    for name, text in _lesson_text().items():
        for anchor in re.findall(r"\]\(\.\./docs/references\.md#([^)\s]+)\)", text):
            cited.setdefault(anchor, []).append(name)
    assert ANCHORS and len(ANCHORS) == len(set(ANCHORS))
    assert sorted(set(cited) - set(ANCHORS)) == [], "links to no entry"
    uncited = sorted(set(ANCHORS) - set(cited) - {"vaswani2017"})   # the paper: linked by every lesson header
    assert uncited == [], f"entries no lesson cites: {uncited}"


def test_every_entry_has_its_year_and_arxiv_id():
    entries = re.split(r'(?=<a id=")', REFERENCES)[1:]
    for entry in entries:
        anchor = re.match(r'<a id="([a-z]+)(\d{4})"', entry)
        assert anchor.group(2) in entry.split("</a>", 1)[1], anchor.group(0)
        if anchor.group(1) != "glorot":
            arxiv = r"arXiv:\[(\d{4}\.\d{4,5})\]\(https://arxiv\.org/abs/\1\)"
            assert re.search(arxiv, entry), anchor.group(0)
    assert "arXiv:[1706.03762](https://arxiv.org/abs/1706.03762)" in REFERENCES
