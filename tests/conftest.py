import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from tests.helpers import IN_CI

settings.register_profile("ci", deadline=None, derandomize=True, max_examples=60)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if IN_CI else "dev")

# Under pytest-xdist (the README's command runs one worker process per core) each worker keeps to one
# BLAS thread and one torch thread: two workers of two threads each on two cores wait for each other
# (attention_np.kernels.threads measured a training step 13x slower with two BLAS threads than with
# one on a busy 2-core machine). A test that needs another count sets it (blas_threads).
if os.environ.get("PYTEST_XDIST_WORKER"):
    from attention_np.kernels.threads import openblas_thread_functions

    if openblas_thread_functions() is not None:
        openblas_thread_functions()[1](1)
    try:
        import torch
    except ImportError:                                 # torch is in the test extra; not required here
        pass
    else:
        torch.set_num_threads(1)


@pytest.fixture
def rng():
    return np.random.default_rng(20170612)  # the paper's arXiv date


@pytest.fixture(params=["reference", "fused"])
def sdpa(request):
    """The module that computes Eq. (1), for tests that hold both paths to one expectation:
    ``kernels/reference.py`` (the reference kernel: Eq. (1) as the paper writes it), then
    ``kernels/fused.py`` (what ``attention_np.sdpa_forward`` runs). Each has ``sdpa_forward``,
    ``sdpa_backward`` and ``scaled_dot_product_attention``."""
    from attention_np.kernels import fused, reference
    return {"reference": reference, "fused": fused}[request.param]


@pytest.fixture(scope="session")
def course_build(tmp_path_factory):
    """One `python -m attention_np course build OUT` for the session (tests/course/test_course.py and
    tests/course/test_autograder.py read it; neither writes into it)."""
    out = tmp_path_factory.mktemp("course")
    r = subprocess.run([sys.executable, "-m", "attention_np", "course", "build", str(out)],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out
