"""Fixtures for the codegen tests (helpers live in codegen_helpers.py)."""

import pytest


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    return request.param
