import numpy as np
import pytest
from hypothesis import settings

from tests.helpers import IN_CI

settings.register_profile("ci", deadline=None, derandomize=True, max_examples=60)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if IN_CI else "dev")


@pytest.fixture
def rng():
    return np.random.default_rng(20170612)  # the paper's arXiv date


@pytest.fixture(params=["textbook", "fused"])
def sdpa(request):
    """The module that computes Eq. (1), for tests that hold both paths to one expectation:
    ``core/attention.py`` (the textbook, as the paper writes it), then ``core/fused.py`` (what
    ``attention_np.sdpa_forward`` runs). Each has ``sdpa_forward``, ``sdpa_backward`` and
    ``scaled_dot_product_attention``."""
    from attention_np.kernels import fused
    from attention_np.kernels import reference as attention
    return {"textbook": attention, "fused": fused}[request.param]
