"""`python -m attention_np`: the guided tour runs and shows what it promises."""

import subprocess
import sys
from pathlib import Path

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]


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


def test_an_unknown_command_lists_the_commands():
    result = run("bogus")
    assert result.returncode == 2 and result.stdout == ""
    assert "unknown command 'bogus'; the commands are: tour (" in result.stderr
    assert all(f"{name} (" in result.stderr for name in ("figures", "train", "diff"))


def test_the_tour_says_how_to_install_what_its_last_line_suggests():
    """The README's commands, torch from its CPU index first (from PyPI: the CUDA build); the last
    line is the README's test command exactly, the one CI runs (one worker per core)."""
    from attention_np.cli.tour import NOTEBOOKS_COMMAND, TEST_COMMAND

    lines = [line.strip() for line in run().stdout.rstrip().splitlines()]
    assert lines[-1] == TEST_COMMAND and NOTEBOOKS_COMMAND in lines
    readme = (ROOT / "README.md").read_text()
    cpu = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && "
    for command in (TEST_COMMAND, NOTEBOOKS_COMMAND):
        assert command.startswith(cpu) and command in readme
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_tour_gradcheck_names_q_k_v():
    out = run().stdout
    for name in ("q", "k", "v"):
        assert f"{name}: max abs error" in out


def run_without(module, *args):
    """`python -m attention_np ARGS` with ``module`` made unimportable (as if not installed)."""
    code = ("import sys, runpy\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] == {module!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Block())\n"
            f"sys.argv = ['attention_np', *{list(args)!r}]\n"
            "runpy.run_module('attention_np', run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_figures_without_matplotlib_names_the_plots_extra(tmp_path):
    result = run_without("matplotlib", "figures", "--out", str(tmp_path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ('error: python -m attention_np figures needs matplotlib (the [plots] extra), which is '
            'not installed: pip install "matplotlib>=3.7"') in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_diff_framework_torch_without_torch_says_so_on_stderr():
    result = run_without("torch", "diff", "--framework", "torch", "--dtype", "float64")
    assert result.returncode == 1
    assert "--framework torch was asked for but is not installed (pip install torch==2.13.0 " \
        "--index-url https://download.pytorch.org/whl/cpu)" in result.stderr
    assert "asked for" not in result.stdout


def test_every_optional_import_names_what_installs_it():
    import pytest

    from attention_np._optional import import_optional, install_hint

    assert install_hint("matplotlib.pyplot") == 'pip install "matplotlib>=3.7"'
    assert install_hint("safetensors.numpy") == 'pip install "safetensors>=0.4" "tokenizers>=0.15"'
    cpu = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert install_hint("torch.nn") == cpu
    assert install_hint("flax.linen") == 'pip install "jax>=0.4.30" "flax>=0.10"'    # no torch
    assert install_hint("jax.numpy") == 'pip install "jax>=0.4.30"'
    assert install_hint("transformers") == cpu + ' && pip install "transformers>=5.15"'
    with pytest.raises(ImportError, match=r"^X needs no_such_module_xyz, which is not installed: "
                                          r"pip install no_such_module_xyz$"):
        import_optional("no_such_module_xyz", "X")


def test_an_optional_dependency_older_than_its_minimum_names_both_versions(monkeypatch):
    """Release numbers compare as numbers (5.9 < 5.15, not as text), and transformers' minimum
    (core.optional.MINIMUM) applies to every import of it by default."""
    import sys
    import types

    import pytest

    from attention_np._optional import MINIMUM, import_optional, version_tuple

    assert version_tuple("5.15.0.dev0") == (5, 15, 0) and version_tuple("5.9") < version_tuple("5.15")
    fake = types.ModuleType("fakepkg_xyz")
    monkeypatch.setitem(sys.modules, "fakepkg_xyz", fake)
    for old in ("5.9.0", "5.14.1", "4.57.6"):
        fake.__version__ = old
        with pytest.raises(ImportError, match=rf"^X needs fakepkg_xyz >= 5\.15, found {old}: "
                                              r'pip install -U "fakepkg_xyz>=5\.15"$'):
            import_optional("fakepkg_xyz", "X", minimum="5.15")
    for new in ("5.15", "5.15.0", "5.23.0", "6.0.0rc1"):
        fake.__version__ = new
        assert import_optional("fakepkg_xyz", "X", minimum="5.15") is fake
    assert MINIMUM["transformers"] == "5.15"


def test_transformers_older_than_the_minimum_is_refused_by_name(monkeypatch, capsys):
    import sys

    import pytest
    require("transformers")

    from attention_np.cli import main
    from attention_np.interop.transformers import compare_transformers_attention
    from attention_np.interop.transformers import family_cases as cases

    module, inputs = cases.case("bert")
    # the module object import_module returns now (transformers replaces its lazy module)
    monkeypatch.setattr(sys.modules["transformers"], "__version__", "5.14.1")
    with pytest.raises(ImportError, match=r"needs transformers >= 5\.15, found 5\.14\.1: "
                                          r'pip install -U "transformers>=5\.15"'):
        compare_transformers_attention(module, **inputs)
    assert main(["diff", "--framework", "transformers"]) == 1
    assert ("error: --framework transformers needs transformers >= 5.15, found 5.14.1"
            in capsys.readouterr().err)


def test_the_tour_runs_the_paper_code_and_shows_the_fast_path_agrees():
    import re

    out = run().stdout
    assert "this is attention_np.paper.sdpa_forward" in out
    found = re.search(r"attention_np.sdpa_forward returns the same out to max \|difference\| (\S+)\)", out)
    assert found and float(found.group(1)) <= 1e-14
    tour = (ROOT / "attention_np" / "cli" / "tour.py").read_text()
    assert "from attention_np.paper import" in tour and "attention_np.core" not in tour
