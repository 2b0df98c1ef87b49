"""The OpenBLAS that NumPy ships, found once for everything that calls it by symbol.

NumPy's wheels bundle a scipy-openblas64 build under `numpy.libs/`; it is loaded
with NumPy, so opening it again returns the same handle and costs no import. The
compiled kernels' GEMM and LAPACK intrinsics (runtime/intrinsics.py,
runtime/lapack.py), the NumPy impls' triangular solve (ops/numpy_blas.py) and the
BLAS thread handling after a fork (ops/blas_threads.py) all mean this library.

    >>> from tracegrad.runtime import numpy_openblas
    >>> lib = numpy_openblas.library()
    >>> lib is None or numpy_openblas.path() is not None
    True
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os


@functools.lru_cache(maxsize=1)
def _found() -> tuple[str, ctypes.CDLL] | None:
    import numpy as np

    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for candidate in sorted(glob.glob(os.path.join(libdir, "libscipy_openblas64_*"))):
        try:
            return os.path.realpath(candidate), ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


def library() -> ctypes.CDLL | None:
    """NumPy's OpenBLAS (its scipy-openblas64 build), or None where NumPy ships
    another BLAS (MKL, Accelerate, an older wheel's OpenBLAS)."""
    found = _found()
    return found[1] if found else None


def path() -> str | None:
    """The real path of that library file, or None."""
    found = _found()
    return found[0] if found else None
