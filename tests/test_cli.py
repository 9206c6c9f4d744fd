"""`python -m attention_np`: the guided tour runs and shows what it promises."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "-m", "attention_np", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_tour_is_the_default_command_and_its_gradient_check_passes():
    result = run()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for step in ("1) scores", "2) weights", "3) out", "4) masked decoder", "5) multi-head",
                 "gradcheck passed"):
        assert step in out
    assert "weights (2, 4, 4, 4)" in out            # (batch, heads, L, S) printed from the cache
    assert run("tour", "--seed", "0").stdout == out  # deterministic, and the explicit name works


def test_help_lists_the_commands():
    result = run("--help")
    assert result.returncode == 0 and "tour" in result.stdout


def test_options_without_a_command_go_to_the_tour():
    result = run("--seed", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == run("tour", "--seed", "3").stdout
    assert result.stdout != run().stdout                  # the seed reached the tour
