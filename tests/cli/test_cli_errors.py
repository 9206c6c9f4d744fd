"""Every command line answers bad input before any work: one line naming the argument, the value
and what is expected, exit status 2 (argparse's usage error), no traceback, nothing written.

Each command runs in a subprocess, as a user would type it; each must exit in well under a
second of work (the timeout would catch a command that started training first).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AN = ("-m", "attention_np")

# (command, the last line of stderr after "error: ") -- the bad commands first
CASES = [
    (AN + ("train", "--length", "0"), "argument --length: got 0, expected an integer from 2 to 18"),
    (AN + ("train", "--length", "1"), "argument --length: got 1, expected an integer from 2 to 18"),
    (AN + ("train", "--steps", "1000000000000"),
     "argument --steps: got 1000000000000, expected an integer from 1 to 100000"),
    (AN + ("train", "--batch-size", "100000"), "argument --batch-size: got 100000, expected an integer "
                                               "from 1 to 4096"),
    (AN + ("train", "--steps", "50", "--cooldown", "60"),
     "argument --cooldown: got 60 with 50 steps, expected at most the number of steps"),
    (AN + ("train", "--task", "dates", "--cooldown", "1201"),
     "argument --cooldown: got 1201 with 1200 steps, expected at most the number of steps"),
    (AN + ("train", "--heads", "3"), "argument --heads: got 3 with --d-model 64, expected a divisor "
                                     "of d_model (d_k = d_model / heads, §3.2.2), e.g. [1, 2, 4, 8, 16]"),
    (AN + ("train", "--task", "dates", "--heads", "3"), "argument --heads: got 3 with --d-model 64, "
                                                        "expected a divisor of d_model"),
    (AN + ("train", "--d-model", "32", "--heads", "3"), "argument --heads: got 3 with --d-model 32, "
                                                        "expected a divisor of d_model"),
    (AN + ("train", "--d-model", "0"), "argument --d-model: got 0, expected a positive integer (>= 1)"),
    (AN + ("train", "--d-model", "6", "--heads", "1", "--d-model", "5"),
     "argument --d-model: got 5, expected an even number"),
    (AN + ("figures", "--out", "{file}"), "argument --out: got '{file}', which is a file, expected a "
                                          "directory"),
    (AN + ("figures", "--out", "{file}/sub"), "argument --out: got '{file}/sub', which cannot be made: "
                                              "'{file}' is not a directory"),
    (AN + ("figures", "--dpi", "0"), "argument --dpi: got 0, expected an integer from 1 to 1000"),
    (AN + ("--seed", "-1"), "argument --seed: got -1, expected a non-negative integer (>= 0)"),
    (AN + ("tour", "--seed", "-1"), "argument --seed: got -1, expected a non-negative integer (>= 0)"),
    (AN + ("train", "--seed", "-1"), "argument --seed: got -1, expected a non-negative integer (>= 0)"),
    (AN + ("diff", "--seed", "-1"), "argument --seed: got -1, expected a non-negative integer (>= 0)"),
    (AN + ("train", "--task", "dates", "--save", "{tmp}/no/such/dir/x.npz"),
     "argument --save: got '{tmp}/no/such/dir/x.npz', expected a file in an existing directory "
     "('{tmp}/no/such/dir' does not exist)"),
    (AN + ("train", "--task", "dates", "--save", "{tmp}/x.txt"),
     "argument --save: got '{tmp}/x.txt', expected a file name ending in .npz"),
    (AN + ("train", "--save", "{tmp}/x.npz"), "argument --save: got '{tmp}/x.npz' with --task reverse, "
                                              "expected --task dates"),
    (AN + ("train", "--layers", "-1"), "argument --layers: got -1, expected a positive integer (>= 1)"),
    (AN + ("train", "--batch-size", "0"), "argument --batch-size: got 0, expected an integer from 1 to 4096"),
    (AN + ("train", "--steps", "ten"), "argument --steps: got 'ten', expected an integer"),
    (AN + ("train", "--target", "1.5"), "argument --target: got 1.5, expected a number from 0 to 1"),
    (AN + ("train", "--task", "dates", "--warmup", "0"), "argument --warmup: got 0, expected a "
                                                         "positive integer (>= 1)"),
    (AN + ("train", "--cooldown", "-1"), "argument --cooldown: got -1, expected a non-negative "
                                         "integer (>= 0)"),
    (AN + ("train", "--task", "dates", "--label-smoothing", "1"),
     "argument --label-smoothing: got 1, expected a number from 0 up to (not including) 1"),
    (AN + ("train", "--task", "dates", "--lr-factor", "nan"), "argument --lr-factor: got 'nan', "
                                                              "expected a finite number"),
    (AN + ("check", "--function", "fn"), "argument --function: got 'fn' without an exercise and a "
                                         "solution file, expected both"),
    (AN + ("check", "--list", "--function", "fn"), "argument --function: got 'fn' without an "
                                                   "exercise and a solution file, expected both"),
    (("-m", "attention_np.lessons.examples"), "the following arguments are required: OUT.npz"),
    (("-m", "attention_np.lessons.examples", "{tmp}/no/such/dir/run.npz"),
     "argument OUT.npz: got '{tmp}/no/such/dir/run.npz', expected a file in an existing directory"),
    (("-m", "attention_np.studies.scoring_in_model"), "the following arguments are required: --out"),
    (("-m", "attention_np.studies.scoring_in_model", "--out", "{tmp}/r.json", "--d-ks", "16", "0"),
     "argument --d-ks: got 0, expected a positive integer (>= 1)"),
    (("-m", "attention_np.studies.scoring_in_model", "--out", "{tmp}"),
     "argument --out: got '{tmp}', which is a directory, expected a file path"),
    (("-m", "attention_np.viz.pretrained", "--dpi", "0"),
     "argument --dpi: got 0, expected an integer from 1 to 1000"),
    (("-m", "attention_np.viz.explorer"), "the following arguments are required: OUT.js"),
    (("-m", "attention_np.viz.explorer", "{tmp}/no/such/dir/data.js"),
     "argument OUT.js: got '{tmp}/no/such/dir/data.js', expected a file in an existing directory"),
]


@pytest.mark.parametrize("command, message", CASES, ids=[" ".join(c[1:]) for c, _ in CASES])
def test_a_bad_command_line_gets_one_clear_line_and_exit_2(tmp_path, command, message):
    (tmp_path / "a_file").write_text("")
    fill = {"tmp": str(tmp_path), "file": str(tmp_path / "a_file")}
    command = [part.format(**fill) for part in command]
    before = sorted(tmp_path.rglob("*"))
    result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    last = result.stderr.rstrip().splitlines()[-1]
    # one line: the program, then the argument, the value and what is expected
    assert last.startswith(f"python -m {command[1]}") and (": error: " + message.format(**fill)) in last, last
    assert sorted(tmp_path.rglob("*")) == before                  # nothing made, nothing written


def test_figures_makes_its_output_directory_before_drawing(tmp_path):
    """``--out`` that does not exist yet is made (and its parents) before any figure is drawn."""
    pytest.importorskip("matplotlib")
    from attention_np.cli import figures

    out = tmp_path / "a" / "b"
    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    args = parser.parse_args(["--out", str(out)])
    figures.check_args(parser, args)
    assert out.is_dir() and list(out.iterdir()) == []
