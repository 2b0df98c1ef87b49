"""Load a vendored JAX example of this folder under tracegrad (as vendored) or under JAX
(its import lines turned back, line for line, with IMPORTS). matplotlib, imported at the
top but used only by the plotting `__main__` block, and JAX's examples.datasets (MNIST
downloads) are stubs while a program loads."""

import pathlib
import sys
import types

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
_COUNT = [0]


def source(name: str, backend: str) -> str:
    text = (HERE / f"{name}.py").read_text()
    if backend == "tracegrad":
        return text
    assert backend == "jax", backend
    return "\n".join(IMPORTS.get(line, line) for line in text.split("\n"))


def _matplotlib_stub() -> dict:
    pyplot = types.ModuleType("matplotlib.pyplot")

    def unavailable(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise RuntimeError(f"{attr}: a stub in tests/programs/jax (matplotlib, datasets)")

    pyplot.__getattr__ = unavailable
    package = types.ModuleType("matplotlib")
    package.pyplot = pyplot
    # JAX's examples/datasets.py downloads MNIST; only the __main__ blocks call it
    datasets = types.ModuleType("examples.datasets")
    datasets.__getattr__ = unavailable
    examples = types.ModuleType("examples")
    examples.datasets = datasets
    return {
        "matplotlib": package,
        "matplotlib.pyplot": pyplot,
        "examples": examples,
        "examples.datasets": datasets,
    }


def load_program(name: str, backend: str) -> types.ModuleType:
    """A fresh module running tests/programs/jax/<name>.py with `backend` ("tracegrad" or
    "jax")."""
    stubs = _matplotlib_stub()
    saved = {s: sys.modules.get(s) for s in stubs}
    sys.modules.update(stubs)
    sys.path.insert(0, str(HERE))  # _optimizers
    try:
        _COUNT[0] += 1
        mod = types.ModuleType(f"_jax_example_{name}_{backend}_{_COUNT[0]}")
        mod.__file__ = str(HERE / f"{name}.py")
        exec(compile(source(name, backend), mod.__file__, "exec"), mod.__dict__)
        return mod
    finally:
        sys.path.remove(str(HERE))
        for s, m in saved.items():
            if m is None:
                sys.modules.pop(s, None)
            else:
                sys.modules[s] = m
