"""docs/install.md's lessons environment, built fresh: a virtual environment with this checkout
installed with its ``plots`` extra (NumPy and matplotlib from the package index) and nothing else,
in which a lesson's code runs. (The kit's NumPy-only environment: tests/course/test_course.py,
``test_student_checker_runs_with_numpy_alone``.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")


def _clean_env():
    return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
            "MPLBACKEND": "Agg"}


def test_the_page_promises_the_lessons_environment_this_file_builds():
    row, = [line for line in PAGE.splitlines() if line.startswith("| the lessons (")]
    assert '`pip install -e ".[plots]" jupyter`' in row


def _lesson_script(stem: str) -> str:
    """The code cells of a lesson, one script (IPython magics and plt.show() left out)."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return "\n\n".join(re.sub(r"(?m)^\s*[%!].*$", "", c) for c in code)


@pytest.mark.venv
@pytest.mark.skipif(os.environ.get("ATTENTION_NP_VENV") != "1", reason="makes a venv and installs NumPy "
                    "and matplotlib into it (about a minute): set ATTENTION_NP_VENV=1 (.ci/run does)")
def test_a_fresh_lessons_environment_runs_lesson_1(tmp_path):
    src = tmp_path / "checkout"                  # the package and its metadata, not the working tree's state
    shutil.copytree(ROOT / "attention_np", src / "attention_np", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src)
    env_dir = tmp_path / "lessons"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", f"{src}[plots]"], capture_output=True,
                       text=True, timeout=900, env=_clean_env())
    if r.returncode != 0 and ("index" in r.stderr.lower() or "connection" in r.stderr.lower()):
        pytest.skip(f"cannot install into a new venv (no package index?): {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, env=_clean_env()).stdout
    names = {line.split("==")[0].lower() for line in listed.split()}
    assert {"attention-np", "numpy", "matplotlib"} <= names and not names & {"torch", "jax", "jupyter"}
    script = tmp_path / "lesson_01.py"
    script.write_text(_lesson_script("01_scaled_dot_product_attention"))
    r = subprocess.run([str(python), str(script)], capture_output=True, text=True, timeout=600,
                       cwd=ROOT / "notebooks", env=_clean_env())
    assert r.returncode == 0, r.stderr[-2000:]
    assert "each English query's strongest German key" in r.stdout
