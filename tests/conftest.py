"""Shared test setup.

Compiled kernels are cached on disk across the whole run (and across runs), so
each distinct graph pays Numba's compile cost once.
"""
import gc
import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("TRACEGRAD_CACHE_DIR", str(ROOT / ".tracegrad-cache-tests"))

try:  # hypothesis profiles: CI runs "ci"; `--hypothesis-profile=thorough` runs thousands
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=100, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("thorough", max_examples=3000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _freeze_the_import_time_heap() -> None:
    """Move every object alive now (torch, jax, numba, the test modules...) to the
    permanent generation, so that each test's `gc.collect()` scans only what tests made
    since: a full collection of the whole heap costs seconds on a loaded machine, and
    the tests' leak and cycle checks concern their own objects only."""
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session):
    _freeze_the_import_time_heap()


def pytest_runtest_setup(item):
    if gc.get_freeze_count() == 0:  # a test called gc.unfreeze(): freeze again
        _freeze_the_import_time_heap()
