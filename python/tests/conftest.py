"""pytest set-up: the package from this source tree (python/), and one
context for the whole run (kernels are compiled once per context)."""
import os
import sys
import zlib

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
    # a seed per test from its name (crc32: hash() of a str changes from one
    # process to the next), so a failure repeats; FLASHCL_TEST_SEED (an
    # integer, default 0) draws another set of inputs for every test
    extra = int(os.environ.get("FLASHCL_TEST_SEED", "0"))
    return np.random.default_rng([zlib.crc32(request.node.name.encode()), extra])
