"""Shared test setup.

Compiled kernels are cached on disk across the whole run (and across runs), so
each distinct graph pays Numba's compile cost once.
"""
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
