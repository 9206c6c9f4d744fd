"""The benchmark script runs (its --quick smoke mode); its numbers are for docs/performance.md, not for CI."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_attention.py"


def test_benchmark_quick_mode_prints_a_time_row_per_case_and_a_memory_row_per_length(capsys):
    spec = importlib.util.spec_from_file_location("bench_attention", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--quick", "--no-torch", "--memory-L", "64", "128"]) == 0
    out = capsys.readouterr().out
    time_rows = re.findall(r"^\| 1, 2, 64, 16 \| (no|yes) \|(.*)\|$", out, re.MULTILINE)
    assert [causal for causal, _ in time_rows] == ["no", "yes"]
    for _, cells in time_rows:
        ours = [float(c) for c in cells.split("|") if c.strip() and c.strip() != "nan"
                and not c.strip().endswith("x")]
        assert len(ours) == 5 and all(t >= 0 for t in ours)      # dense, tiled and floor timings
        assert ours[0] > 0 and ours[1] > 0
    memory_rows = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \|", out, re.MULTILINE)
    assert [int(L) for L, _, _ in memory_rows] == [64, 128]


def _load(name):
    path = SCRIPT.parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_float32_accuracy_prints_a_ratio_per_array_for_each_case(capsys):
    from tests.helpers import require
    require("torch")
    assert _load("float32_accuracy").main(["--cases", "1", "--L", "16", "--d", "8", "--heads", "1"]) is None
    out = capsys.readouterr().out
    rows = re.findall(r"^\s+(dense|tiled)\s+(1|4|16)\s+(True|False)((?:\s+[\d.]+){4})\s+[\d.e+-]+$",
                      out, re.MULTILINE)
    assert len(rows) == 12                                  # 2 kernels x 3 sharpnesses x causal or not
    assert all(float(r) > 0 for *_, ratios in rows for r in ratios.split())
    assert re.search(r"largest ratio, dense: [\d.]+", out) and re.search(r"largest ratio, tiled: [\d.]+", out)


def test_the_performance_page_has_a_section_per_benchmark_and_no_number_in_its_intro():
    page = _load("performance_page")
    assert not re.search(r"\d\.\d|\d+x\b|\d+ ms", page.INTRO)     # numbers come from the runs only
    assert page.INTRO.rstrip().endswith("---")


def test_the_sinks_benchmark_prints_a_row_per_case_with_both_sinks_paths_agreeing(capsys):
    assert _load("sinks").main(["--quick", "--backward"]) == 0
    rows = re.findall(r"^\| (float32|float64) \| (\w+) \|(.*)\|$", capsys.readouterr().out, re.MULTILINE)
    assert [(dt, name) for dt, name, _ in rows] == [
        (dt, name) for dt in ("float32", "float64") for name in ("none", "causal", "mask", "bias")]
    for dt, _, cells in rows:
        diff = float(cells.split("|")[-1])                       # term vs key: out and every gradient
        assert diff < (1e-5 if dt == "float32" else 1e-13)


def test_floor_prints_each_kernel_over_the_floor_and_the_causal_floor(capsys):
    assert _load("floor").main(["--shape", "1", "2", "32", "8", "--rounds", "1", "--threads", "1",
                                "--no-torch"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (dense fwd|dense f\+b|tiled f\+b)( causal)? \| 1 \| ([\d.]+)x \|", out,
                      re.MULTILINE)
    assert len(rows) == 6 and all(float(r) > 0 for *_, r in rows)
    assert out.count("| (info) |") == 3                   # the causal rows are information
