"""Shared test setup.

Compiled kernels are cached on disk across the whole run (and across runs), so
each distinct graph pays Numba's compile cost once.
"""

import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
os.environ.setdefault("TRACEGRAD_CACHE_DIR", str(ROOT / ".tracegrad-cache-tests"))

# Which backend runs compiled functions that name none. Numba compiles cost ~0.5-1 s
# per kernel, so by default only the tests whose subject is the generated code run on
# Numba (NUMBA_TESTS, or marked `numba`); the rest test transforms and semantics on
# the NumPy interpreter, whose agreement with the kernels those tests check.
# `TRACEGRAD_BACKEND=numba python -m pytest` runs everything on Numba, the tests
# marked `numba_pass` included (CI runs both commands).
# (recorded once: pytest-xdist's workers inherit the environment this file sets)
os.environ.setdefault("_TRACEGRAD_USER_BACKEND", os.environ.get("TRACEGRAD_BACKEND", ""))
_BACKEND_FROM_USER = os.environ["_TRACEGRAD_USER_BACKEND"] or None
NUMBA_TESTS = (  # (tests/distributed: its subject is sharding; the Numba pass compiles it)
    "tests/codegen/",
    "tests/examples/",
    "tests/compile/test_compile_numba.py",
    "tests/compile/test_compile_primitives.py",
    "tests/compile/test_cache_index.py",
    "tests/compile/test_linalg.py",
    "tests/compile/test_new_shapes.py",
    "tests/reliability/test_cache_",
    "tests/reliability/test_blas_threads.py",
    "tests/reliability/test_fork.py",
)
# (the float64 variants of these stay in the default run)
NUMBA_PASS_TESTS = (
    "tests/codegen/test_kernels.py::test_kernel_matches_interpreter[float32-",
    "tests/codegen/test_kernels.py::test_normalizers_with_nan_and_inf_rows_match_the_interpreter[float32]",
    "tests/codegen/test_kernels.py::test_advanced_indexing_gather_and_scatter[float32]",
    # (8.5 s; the planner's own tests stay, and the Numba pass compiles this one)
    "tests/codegen/test_buffer_reuse.py::test_compiled_gradient_matches_the_unoptimized_graph_and_finite_differences",
)
if _BACKEND_FROM_USER is None:
    os.environ["TRACEGRAD_BACKEND"] = "interpret"  # (module-level code at import time)

try:  # hypothesis profiles: CI runs "ci"; `--hypothesis-profile=thorough` runs thousands
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile(
        "thorough", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = pathlib.Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        if path.startswith(NUMBA_TESTS):
            item.add_marker(pytest.mark.numba)
        if item.nodeid.startswith(NUMBA_PASS_TESTS):
            item.add_marker(pytest.mark.numba_pass)
    # The long Numba sweeps (random programs, the cache-attack matrix, 10,000-step
    # memory loops) run in the all-Numba pass only: CI's second command.
    if _BACKEND_FROM_USER != "numba":
        later = [i for i in items if i.get_closest_marker("numba_pass") is not None]
        if later:
            config.hook.pytest_deselected(items=later)
            items[:] = [i for i in items if i.get_closest_marker("numba_pass") is None]


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def run_script(tmp_path):
    """`run(source, *argv, cache_dir=None, unset=(), timeout=600, **env)`: stdout of a
    fresh Python running `source` with this repository importable and its own kernel
    cache; the test fails unless it exits 0 and prints OK, or if it hangs."""

    def run(
        source: str, *argv: str, cache_dir=None, unset=(), timeout: float = 600, **env: str
    ) -> str:
        script = tmp_path / "child.py"
        script.write_text(source)
        full = dict(
            os.environ,
            TRACEGRAD_CACHE_DIR=str(cache_dir or tmp_path / "cache"),
            PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            **env,
        )
        for name in unset:
            full.pop(name, None)
        try:
            proc = subprocess.run(
                [sys.executable, str(script), *argv],
                capture_output=True,
                text=True,
                env=full,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"child.py {' '.join(argv)}: the process hung ({exc.stdout!r})")
        assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
        return proc.stdout

    return run


def _freeze_the_import_time_heap() -> None:
    """Move every object alive now (torch, jax, numba, the test modules...) to the
    permanent generation, so that each test's `gc.collect()` scans only what tests made
    since: a full collection of the whole heap costs seconds on a loaded machine, and
    the tests' leak and cycle checks concern their own objects only."""
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session):
    _freeze_the_import_time_heap()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # TRACEGRAD_BACKEND for this test (set before any fixture, module-scoped ones too):
    # the user's, else numba for `numba` tests
    if _BACKEND_FROM_USER is None:
        numba = item.get_closest_marker("numba") is not None
        os.environ["TRACEGRAD_BACKEND"] = "numba" if numba else "interpret"
    # a library some test used may have replaced the display hook (doctests of
    # expressions then print to the real stdout and "get nothing")
    sys.displayhook = sys.__displayhook__
    _refreeze_once_per_file(item)


_last_file = [None]


def _refreeze_once_per_file(item) -> None:
    """Freeze the heap again if a test called gc.unfreeze(), checked when a new file starts:
    gc.get_freeze_count() walks the whole frozen heap (~40 ms with torch, jax and numba
    loaded), which once per test cost over a minute of CPU per worker."""
    file = item.nodeid.split("::", 1)[0]
    if file == _last_file[0]:
        return
    _last_file[0] = file
    if gc.get_freeze_count() == 0:  # a test called gc.unfreeze(): freeze again
        gc.freeze()  # (no full collect first: that costs seconds per test)


@pytest.fixture(scope="module")
def skylakex_blas():
    """Code generated as for OpenBLAS's SkylakeX kernels, whose small A @ B.T is slow
    (structured.small_nt_is_slow), whatever CPU runs the tests."""
    from tracegrad.codegen import structured

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(structured, "_small_nt_slow", [True])
        yield
