"""Triangular solves on NumPy's own OpenBLAS (tracegrad/ops/numpy_blas.py) agree with
scipy.linalg.solve_triangular, and the NumPy impl of triangular_solve uses them."""

import numpy as np
import pytest

from tracegrad.ops import linalg as L
from tracegrad.ops import numpy_blas

sl = pytest.importorskip("scipy.linalg")


def _have_trsm() -> bool:
    return (
        numpy_blas.trsm(np.eye(1), np.ones(1), lower=True, trans=False, unit_diagonal=False)
        is not None
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k", [(5, None), (5, 3), (64, 7), (1, 1), (0, None), (3, 0), (0, 2)])
def test_trsm_matches_scipy(dtype, n, k):
    if not _have_trsm():
        pytest.skip("NumPy's BLAS is not a scipy-openblas64 build")
    rng = np.random.default_rng(n * 10 + (k or 0))
    a = (rng.standard_normal((n, n)) / max(n, 1) ** 0.5 + 2 * np.eye(n)).astype(dtype)
    b = rng.standard_normal((n,) if k is None else (n, k)).astype(dtype)
    a_before, b_before = a.copy(), b.copy()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for lower in (True, False):
        for trans in (False, True):
            for unit in (False, True):
                x = numpy_blas.trsm(a, b, lower=lower, trans=trans, unit_diagonal=unit)
                want = sl.solve_triangular(a, b, lower=lower, trans=int(trans), unit_diagonal=unit)
                assert x.shape == want.shape and x.dtype == want.dtype
                np.testing.assert_allclose(x, want, **tol)
    np.testing.assert_array_equal(a, a_before)  # the operands are not written
    np.testing.assert_array_equal(b, b_before)


def test_a_strided_operand_is_read_as_its_values():
    if not _have_trsm():
        pytest.skip("NumPy's BLAS is not a scipy-openblas64 build")
    rng = np.random.default_rng(1)
    big = rng.standard_normal((12, 12)) + 4 * np.eye(12)
    a, b = big[::2, ::2], rng.standard_normal((6, 8))[:, ::2]  # neither is contiguous
    x = numpy_blas.trsm(a, b, lower=False, trans=True, unit_diagonal=False)
    np.testing.assert_allclose(x, sl.solve_triangular(a, b, lower=False, trans=1), rtol=1e-12)


def test_the_numpy_impl_solves_without_scipy(monkeypatch):
    """The impl (eager mode, the interpreter) runs on NumPy's OpenBLAS: SciPy's copy
    would start a second thread pool that spins beside NumPy's."""
    if not _have_trsm():
        pytest.skip("NumPy's BLAS is not a scipy-openblas64 build")

    def no_scipy():
        raise AssertionError("scipy.linalg was used")

    monkeypatch.setattr(L, "_scipy_linalg", no_scipy)
    rng = np.random.default_rng(2)
    a = np.tril(rng.standard_normal((3, 4, 4))) + 3 * np.eye(4)
    b = rng.standard_normal((3, 4, 2))
    x = L._triangular_solve_impl(a, b, lower=True, trans=False)
    np.testing.assert_allclose(a @ x, b, rtol=1e-12, atol=1e-12)


def test_without_numpy_trsm_scipy_answers(monkeypatch):
    monkeypatch.setattr(numpy_blas, "trsm", lambda *a, **k: None)
    a = np.array([[2.0, 0.0], [1.0, 1.0]])
    x = L._triangular_solve_impl(a, np.array([2.0, 3.0]), lower=True)
    np.testing.assert_allclose(x, [1.0, 2.0])
