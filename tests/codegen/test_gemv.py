"""tg_gemm with one output column goes through BLAS's gemv (runtime/intrinsics.py):
every transpose combination, a C column inside a wider matrix, beta = 1, both dtypes,
against NumPy."""

import itertools

import numpy as np
import pytest
from numba import njit

from tracegrad.runtime.intrinsics import NUMPY_CBLAS, tg_gemm

pytestmark = pytest.mark.skipif(not NUMPY_CBLAS, reason="NumPy's bundled OpenBLAS not found")


@njit
def _gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, offc, ldc):
    tg_gemm(ta, tb, m, n, k, a, 0, lda, b, 0, ldb, beta, c, offc, ldc)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ta,tb,beta", list(itertools.product((0, 1), (0, 1), (0.0, 1.0))))
def test_one_output_column_matches_numpy(dtype, ta, tb, beta):
    rng = np.random.default_rng(ta * 4 + tb * 2 + int(beta))
    m, k, ldc, col = 7, 5, 3, 1  # C is (m, 3): its column 1 is written
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    # B's column 0 of a (k, 2) matrix (stride 2), or a (1, k) row read transposed
    b = rng.standard_normal((1, k) if tb else (k, 2)).astype(dtype)
    c = rng.standard_normal((m, ldc)).astype(dtype)
    want = c.copy()
    want[:, col] = (a.T if ta else a) @ (b.T if tb else b)[:, 0] + beta * c[:, col]
    if not tb:
        b[:, 1] = np.nan  # the other column must not be read
    lda, ldb = a.shape[1], b.shape[1]
    _gemm(ta, tb, m, 1, k, a.ravel(), lda, b.ravel(), ldb, beta, c.ravel(), col, ldc)
    c_flat = c.ravel()  # (a view: the kernel wrote into c)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(c_flat.reshape(m, ldc), want, rtol=tol, atol=tol)


def test_more_columns_still_use_gemm():
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    c = np.zeros((4, 2))
    _gemm(0, 0, 4, 2, 3, a.ravel(), 3, b.ravel(), 2, 0.0, c.ravel(), 0, 2)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
