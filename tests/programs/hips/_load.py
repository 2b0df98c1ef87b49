"""Load a vendored HIPS autograd example of this folder under tracegrad (as vendored) or
under HIPS autograd (its import lines turned back, line for line, with IMPORTS).

Sibling imports (`from optimizers import adam`, `from black_box_svi import ...`) resolve to
the same backend's copy while a program loads. matplotlib, imported at the top of each
example but used only by its plotting `__main__` block, is a stub."""

import pathlib
import types

from tests.programs._vendored import modules_swapped, original_source, run_program, stub_modules

HERE = pathlib.Path(__file__).resolve().parent

# tracegrad's import line -> the original's (the only lines that differ)
IMPORTS = {
    "import tracegrad as np": "import autograd.numpy as np",
    "import numpy.random as npr": "import autograd.numpy.random as npr",
    "import tracegrad.scipy.stats.multivariate_normal as mvn": "import autograd.scipy.stats.multivariate_normal as mvn",
    "from tracegrad import grad": "from autograd import grad",
    "from tracegrad import value_and_grad": "from autograd import value_and_grad",
    "from optimizers import adam": "from autograd.misc.optimizers import adam",
    "from tracegrad.scipy.stats import norm": "from autograd.scipy.stats import norm",
    "from tracegrad.ops.linalg import solve": "from autograd.numpy.linalg import solve",
}
SIBLINGS = ("optimizers", "black_box_svi")  # what the programs import from this folder


def source(name: str, backend: str) -> str:
    if backend == "tracegrad":
        return (HERE / f"{name}.py").read_text()
    assert backend == "autograd", backend
    return original_source(HERE / f"{name}.py", IMPORTS)


def load_program(name: str, backend: str, _loaded=None) -> types.ModuleType:
    """A fresh module running tests/programs/hips/<name>.py with `backend` ("tracegrad" or
    "autograd", which needs HIPS autograd installed)."""
    loaded = {} if _loaded is None else _loaded
    siblings = {}
    for sibling in SIBLINGS:
        wanted = f"from {sibling} import" in source(name, backend)
        if sibling != name and wanted and sibling not in loaded:
            loaded[sibling] = load_program(sibling, backend, loaded)
        if sibling in loaded:
            siblings[sibling] = loaded[sibling]
    entries = {**stub_modules("tests/programs/hips", "matplotlib.pyplot"), **siblings}
    # (HERE on sys.path: _flatten, the tracegrad optimizers' helper)
    with modules_swapped(entries, HERE, restore=("_flatten",)):
        return run_program(f"hips_{backend}", HERE / f"{name}.py", source(name, backend))


def load_pair(name: str) -> dict:
    """{"tracegrad": module, "autograd": module}; skips the test without HIPS autograd."""
    import pytest

    pytest.importorskip("autograd")
    return {b: load_program(name, b) for b in ("tracegrad", "autograd")}
