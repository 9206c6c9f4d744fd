"""``python -m attention_np figures --out DIR`` writes exactly the committed figures/ files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from attention_np.cli import figures, main
from attention_np.lessons import examples
from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    require("matplotlib")
    out = tmp_path_factory.mktemp("figures")
    assert main(["figures", "--out", str(out)]) == 0
    return out


def _png_size(path: Path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", head[16:24])                  # width, height from IHDR


def test_figures_command_writes_exactly_the_committed_file_names(written):
    made = sorted(p.name for p in written.iterdir())
    committed = sorted(p.name for p in (ROOT / "figures").glob("*.png"))
    assert made == committed == sorted(figures.FIGURES)


def test_the_claim6_figure_is_lesson_06s_fair_experiment(written, capsys):
    # drawn from the committed results lesson 06 loads, not from the retrieval toy
    assert figures.CLAIM6 == ROOT / "notebooks" / "results" / "claim6.json"
    assert "Claim 6 inside a trained encoder" in figures.FIGURES["additive_vs_dot.png"]
    with pytest.raises(SystemExit) as stop:
        main(["figures", "--out", str(written), "--claim6", str(written / "absent.json")])
    assert stop.value.code == 2
    assert "argument --claim6: got" in capsys.readouterr().err


def test_readme_shows_the_committed_figures_with_their_captions():
    readme = (ROOT / "README.md").read_text()
    for name in ("scaling_variance.png", "scaling_gradients.png", "additive_vs_dot.png"):
        assert f"(figures/{name})" in readme, name
    assert "retrieval" not in readme.split("(figures/additive_vs_dot.png)")[1].split("\n\n")[0]


def test_every_figure_is_a_modest_png(written):
    total = 0
    for path in written.iterdir():
        width, height = _png_size(path)
        assert 200 < width <= 1600 and 200 < height <= 1000, (path.name, width, height)
        total += path.stat().st_size
    assert total < 600_000


def test_example_sentence_gives_repeated_words_the_same_vector():
    tokens, x = examples.example_sentence()
    assert tokens[0] == tokens[4] == "the"
    assert (x[0] == x[4]).all() and x.shape == (len(tokens), 8)
    with pytest.raises(ValueError, match="d_k must be at least 5"):
        examples.example_sentence(d_k=3)
