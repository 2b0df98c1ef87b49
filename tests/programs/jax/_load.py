"""Load a vendored JAX example of this folder under tracegrad (as vendored) or under JAX
(its import lines turned back, line for line, with IMPORTS). matplotlib, imported at the
top but used only by the plotting `__main__` block, and JAX's examples.datasets (MNIST
downloads) are stubs while a program loads."""

import pathlib
import types

from tests.programs._vendored import modules_swapped, original_source, run_program, stub_modules

HERE = pathlib.Path(__file__).resolve().parent

# tracegrad's import line -> the original's (the only lines that differ)
IMPORTS = {
    "from tracegrad import jit, grad, vmap": "from jax import jit, grad, vmap",
    "from tracegrad import random": "from jax import random",
    "import _optimizers as optimizers": "from jax.example_libraries import optimizers",
    "import tracegrad as jnp": "import jax.numpy as jnp",
    "import tracegrad.scipy.stats.norm as norm": "import jax.scipy.stats.norm as norm",
    "from tracegrad import jit, grad": "from jax import jit, grad",
    "from tracegrad.scipy.special import logsumexp": "from jax.scipy.special import logsumexp",
}


def source(name: str, backend: str) -> str:
    if backend == "tracegrad":
        return (HERE / f"{name}.py").read_text()
    assert backend == "jax", backend
    return original_source(HERE / f"{name}.py", IMPORTS)


def load_program(name: str, backend: str) -> types.ModuleType:
    """A fresh module running tests/programs/jax/<name>.py with `backend` ("tracegrad" or
    "jax"). JAX's examples/datasets.py downloads MNIST: only __main__ blocks call it."""
    stubs = stub_modules("tests/programs/jax", "matplotlib.pyplot", "examples.datasets")
    with modules_swapped(stubs, HERE, restore=("_optimizers",)):  # HERE: _optimizers
        return run_program(f"jax_{backend}", HERE / f"{name}.py", source(name, backend))
