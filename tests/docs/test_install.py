"""docs/install.md: its page is linked from where a newcomer starts, and its account of the import
clash ("module 'attention_np' has no attribute 'sdpa_forward'") is what Python does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
PROBE = "import attention_np; print(attention_np.__file__, hasattr(attention_np, 'sdpa_forward'))"


def test_the_install_page_is_linked_from_the_readme_the_site_and_the_kit():
    from attention_np.exercises.course_kit import STUDENT_README

    assert "(docs/install.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\ninstall\n" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")   # a toctree entry
    assert "docs/install.md" in STUDENT_README
    assert "`pip install numpy`" in PAGE and "lesson 4" in PAGE and "lesson 9" in PAGE


def _installed_editable() -> bool | None:
    """True for an editable install, False for a wheel, None when not installed. The install's
    own record is the one with pip's direct_url.json: a build's attention_np.egg-info in the
    checkout (on sys.path when the tests run from it) is not an install."""
    found = [d for d in metadata.distributions()
             if (d.metadata["Name"] or "").lower().replace("_", "-") == "attention-np"]
    urls = [u for u in (d.read_text("direct_url.json") for d in found) if u]
    if not urls:
        return None if not found else False
    return bool(json.loads(urls[0]).get("dir_info", {}).get("editable"))


def _probe(cwd: Path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}     # the install, as a user has it
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    file, has = r.stdout.split()
    return file, has == "True"


def test_a_folder_named_attention_np_in_the_current_folder_shadows_an_editable_install(tmp_path):
    """The page's diagnosis, reproduced: from the folder that holds a clone (a folder attention_np/
    with no __init__.py), `import attention_np` gives the empty namespace package when the install
    is editable, the real package when it is a wheel; from any other folder, the real package."""
    editable = _installed_editable()
    if editable is None:
        pytest.skip("attention-np is not installed (the page is about an installed package)")
    holder = tmp_path / "holder"
    (holder / "attention_np" / "tests").mkdir(parents=True)            # a clone's root: no __init__.py
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _probe(elsewhere)[1]
    file, has = _probe(holder)
    if editable:
        assert (file, has) == ("None", False)          # the page's check prints None: the clash
        assert "`pip install -e .`" in PAGE and "None" in PAGE
    else:
        assert has and file.endswith("__init__.py")    # a wheel is found first, as the page says
