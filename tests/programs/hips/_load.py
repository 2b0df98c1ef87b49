"""Load a vendored HIPS autograd example of this folder under tracegrad (as vendored) or
under HIPS autograd (its import lines turned back, line for line, with IMPORTS).

Sibling imports (`from optimizers import adam`, `from black_box_svi import ...`) resolve to
the same backend's copy while a program loads. matplotlib, imported at the top of each
example but used only by its plotting `__main__` block, is a stub."""

import pathlib
import sys
import types

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
_COUNT = [0]


def source(name: str, backend: str) -> str:
    text = (HERE / f"{name}.py").read_text()
    if backend == "tracegrad":
        return text
    assert backend == "autograd", backend
    return "\n".join(IMPORTS.get(line, line) for line in text.split("\n"))


def _matplotlib_stub() -> dict:
    """sys.modules entries for a matplotlib whose pyplot raises on use: the programs
    import it at the top, only their `__main__` blocks plot (and pyplot takes seconds to
    import)."""
    pyplot = types.ModuleType("matplotlib.pyplot")

    def unavailable(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise RuntimeError(f"matplotlib.pyplot.{attr}: a stub in tests/programs/hips")

    pyplot.__getattr__ = unavailable
    package = types.ModuleType("matplotlib")
    package.pyplot = pyplot
    return {"matplotlib": package, "matplotlib.pyplot": pyplot}


def load_program(name: str, backend: str, _loaded=None) -> types.ModuleType:
    """A fresh module running tests/programs/hips/<name>.py with `backend` ("tracegrad" or
    "autograd", which needs HIPS autograd installed)."""
    loaded = {} if _loaded is None else _loaded
    stubs = _matplotlib_stub()
    saved = {s: sys.modules.get(s) for s in (*SIBLINGS, "_flatten", *stubs)}
    try:
        sys.modules.update(stubs)
        sys.path.insert(0, str(HERE))  # _flatten (the tracegrad optimizers' helper)
        for sibling in SIBLINGS:
            wanted = f"from {sibling} import" in source(name, backend)
            if sibling != name and wanted and sibling not in loaded:
                loaded[sibling] = load_program(sibling, backend, loaded)
            if sibling in loaded:
                sys.modules[sibling] = loaded[sibling]
        _COUNT[0] += 1
        mod = types.ModuleType(f"_hips_{name}_{backend}_{_COUNT[0]}")
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


def load_pair(name: str) -> dict:
    """{"tracegrad": module, "autograd": module}; skips the test without HIPS autograd."""
    import pytest

    pytest.importorskip("autograd")
    return {b: load_program(name, b) for b in ("tracegrad", "autograd")}
