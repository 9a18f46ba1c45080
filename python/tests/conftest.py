"""pytest set-up: the package from this source tree (python/), and one
context for the whole run (kernels are compiled once per context)."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flashcl  # noqa: E402


@pytest.fixture(scope="session")
def ctx():
    return flashcl.default_context()


@pytest.fixture
def rng(request):
    # a seed per test, from its name: reproducible, different across tests
    return np.random.default_rng(abs(hash(request.node.name)) % (2 ** 32))
