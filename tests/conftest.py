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
