"""Fixtures for the codegen tests (helpers live in codegen_helpers.py)."""

import pytest


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    return request.param


@pytest.fixture(scope="module")
def skylakex_blas():
    """Code generated as for OpenBLAS's SkylakeX kernels, whose small A @ B.T is slow
    (structured.small_nt_is_slow), whatever CPU runs the tests."""
    from tracegrad.codegen import structured

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(structured, "_small_nt_slow", [True])
        yield
