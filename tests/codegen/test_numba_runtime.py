"""runtime.numba_loader: loading kernels does not import scipy.linalg, and Numba's
own BLAS probe still sees SciPy's BLAS (and the real module is importable after)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys
import numpy as np
from tracegrad.codegen import build_kernel
sys.path.insert(0, {here!r}); sys.path.insert(0, {tests!r})
from codegen_helpers import GraphMaker
gm = GraphMaker("runtime_probe")
x = gm.input((3,), "float64", "x")
k = build_kernel(gm.output(gm.op("mul", x, x)))
assert np.array_equal(k(np.arange(3.0))[0], np.arange(3.0) ** 2)
import numba.np.arraymath
print("HAVE_BLAS", numba.np.arraymath._HAVE_BLAS)
print("SCIPY_LINALG", "scipy.linalg" in sys.modules, "scipy.linalg.cython_blas" in sys.modules)
import scipy.linalg.cython_blas as cb
print("REAL", hasattr(cb, "__pyx_capi__"))
"""


def run(tmp_path, **env):
    full_env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=str(tmp_path),
        **env,
        PYTHONPATH=os.pathsep.join(
            [str(HERE.parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        ),
    )
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(here=str(HERE), tests=str(HERE.parent))],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


def test_kernel_load_skips_scipy_but_numba_still_sees_blas(tmp_path):
    pytest.importorskip("scipy.linalg.cython_blas")
    out = run(tmp_path)
    assert "HAVE_BLAS True" in out
    assert "SCIPY_LINALG False False" in out  # the placeholder was removed again
    assert "REAL True" in out  # and the real module imports afterwards


def test_probe_can_be_restored(tmp_path):
    pytest.importorskip("scipy.linalg.cython_blas")
    out = run(tmp_path, TRACEGRAD_NUMBA_SCIPY_PROBE="1")
    assert "HAVE_BLAS True" in out
    assert "SCIPY_LINALG True True" in out


LOAD_CHILD = r"""
import sys
import numpy as np
from tracegrad.codegen import build_kernel
sys.path.insert(0, {here!r}); sys.path.insert(0, {tests!r})
from codegen_helpers import GraphMaker
gm = GraphMaker("runtime_load")
x = gm.input((4, 3), "float32", "x")
y = gm.op("tanh", gm.op("mul", x, x))
k = build_kernel(gm.output(gm.op("sum", y, axis=1, keepdims=False)))
a = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
print("VALUE", repr(k(a)[0].tolist()))
print("FORTRAN", repr(k(np.asfortranarray(a))[0].tolist()))
print("ARRAYMATH", "numba.np.arraymath" in sys.modules)
print("ARRAYOBJ", "numba.np.arrayobj" in sys.modules)
"""


def test_cached_kernel_loads_without_numbas_refresh(tmp_path):
    """A process that only loads a cached kernel does not refresh Numba's target
    context (which imports every implementation module, numba.np.arraymath among
    them): numba_cache rebuilds the compile result with the runtime's symbols alone,
    and the environments of Numba's own implementations without their modules.
    The loaded kernel gives the compiling process's values, also on a Fortran-ordered
    input (the dispatcher's no-match path, then tracegrad's conform)."""
    import numba

    from tracegrad.runtime.numba_cache import LIGHT_LOAD_NUMBA

    if tuple(int(p) for p in numba.__version__.split(".")[:2]) not in LIGHT_LOAD_NUMBA:
        pytest.skip(f"Numba {numba.__version__} loads with its own refresh (LIGHT_LOAD_NUMBA)")
    env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=str(tmp_path),
        PYTHONPATH=os.pathsep.join(
            [str(HERE.parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        ),
    )
    code = LOAD_CHILD.format(here=str(HERE), tests=str(HERE.parent))
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line))
    compiled, loaded = outs
    assert compiled["ARRAYMATH"] == "True"  # a compile refreshes (and imports arraymath)
    assert loaded["ARRAYMATH"] == "False"  # a cache load does not
    # nor does it import numba.np.arrayobj for the globals of np.empty's environment
    assert compiled["ARRAYOBJ"] == "True" and loaded["ARRAYOBJ"] == "False"
    a = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    want = np.tanh(a * a).sum(axis=1)
    for out in outs:
        assert np.allclose(ast.literal_eval(out["VALUE"]), want, rtol=1e-6)
        assert out["FORTRAN"] == out["VALUE"]
    assert loaded["VALUE"] == compiled["VALUE"]
