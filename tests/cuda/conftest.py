"""CUDA tests run the generated kernels in Numba's CUDA simulator (CI has no GPU).

The simulator must be chosen before numba.cuda is first imported: this conftest
turns it on for the worker that collects tests/cuda, unless numba.cuda is already
loaded (then tests run on whatever it is: a real GPU, or they skip) or the
environment asks for the real GPU (TRACEGRAD_CUDA_TESTS=gpu). Turning it on
changes nothing for the CPU path: it only decides what numba.cuda is.
"""

import os
import sys

import pytest

if "numba.cuda" not in sys.modules and os.environ.get("TRACEGRAD_CUDA_TESTS") != "gpu":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba read its environment already: tell it too
        config.ENABLE_CUDASIM = True


@pytest.fixture(autouse=True)
def _cuda_or_skip():
    """Every test here needs numba.cuda (the simulator, or a GPU)."""
    from tracegrad.placement import cuda_available

    if not cuda_available():
        pytest.skip("no CUDA device, and numba.cuda was loaded before the simulator was chosen")


@pytest.fixture
def real_gpu():
    """Skip unless a real GPU (not the simulator) runs the kernels."""
    from tracegrad.placement import cuda_available, is_simulated

    if not cuda_available() or is_simulated():
        pytest.skip("needs a real CUDA GPU")
