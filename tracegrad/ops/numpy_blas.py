"""Triangular solves on NumPy's own OpenBLAS, for the NumPy implementations (eager
mode, the interpreter).

NumPy has no triangular solve, and scipy.linalg's runs on SciPy's copy of OpenBLAS:
a second thread pool, whose workers spin ~0.1 s after each threaded call on the
cores NumPy's pool (matmul, cholesky, and every compiled kernel's BLAS calls) needs
next. Eager mode's `gp_nll_n256` left two pools spinning after each step, and the
compiled kernel run after it took 7-9 ms instead of 2.3 ms. So the impls call CBLAS's
trsm in NumPy's library through ctypes; where NumPy's library is not a
scipy-openblas64 build (MKL, Accelerate, an old wheel), `trsm` returns None and the
caller uses scipy.linalg.

    >>> import numpy as np
    >>> from tracegrad.ops import numpy_blas
    >>> x = numpy_blas.trsm(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 3.0]),
    ...                     lower=True, trans=False, unit_diagonal=False)
    >>> x is None or np.allclose(x, [1.0, 2.0])
    True
"""

from __future__ import annotations

import ctypes

import numpy as np

from tracegrad.ops import blas_threads
from tracegrad.runtime import numpy_openblas

_ROW_MAJOR, _LEFT = 101, 141
_NO_TRANS, _TRANS = 111, 112
_UPPER, _LOWER = 121, 122
_NON_UNIT, _UNIT = 131, 132

_functions: dict = {}  # dtype char -> ctypes function, or None where not found
_looked: list = []


def _trsm_function(char: str):
    if not _looked:
        lib = numpy_openblas.library()
        for c, scalar in (("s", ctypes.c_float), ("d", ctypes.c_double)):
            fn = getattr(lib, f"scipy_cblas_{c}trsm64_", None) if lib is not None else None
            if fn is not None:
                i32, i64, p = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
                fn.argtypes = (i32, i32, i32, i32, i32, i64, i64, scalar, p, i64, p, i64)
                fn.restype = None
            _functions[c] = fn
        _looked.append(True)
    return _functions.get(char)


def trsm(
    a: np.ndarray, b: np.ndarray, *, lower: bool, trans: bool, unit_diagonal: bool
) -> np.ndarray | None:
    """x with op(a) @ x == b for one (n, n) triangular float32/float64 `a` and `b` of
    shape (n,) or (n, k) of the same dtype, as a new array; None where NumPy's OpenBLAS
    offers no trsm (the caller then uses scipy.linalg)."""
    fn = _trsm_function("s" if a.dtype == np.float32 else "d")
    if fn is None or a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
        return None
    if b.size == 0:
        return np.array(b, copy=True)
    n = a.shape[0]
    a = np.ascontiguousarray(a)
    x = np.array(b.reshape(n, -1), order="C", copy=True)
    k = x.shape[1]
    saved = blas_threads.enter()  # at most the idle CPUs, put back after
    try:
        fn(
            _ROW_MAJOR,
            _LEFT,
            _LOWER if lower else _UPPER,
            _TRANS if trans else _NO_TRANS,
            _UNIT if unit_diagonal else _NON_UNIT,
            n,
            k,
            1.0,
            a.ctypes.data,
            n,
            x.ctypes.data,
            k,
        )
    finally:
        blas_threads.leave(saved)
    return x.reshape(b.shape)
