"""The runnable examples in the docstrings of the complex-number modules (issue 26)."""

import doctest
import importlib

import pytest

MODULES = [
    "tracegrad.ops.complex_ops",
    "tracegrad.ops.fourier",
    "tracegrad.ops.linalg_eig",
    "tracegrad.eager.complex_ops",
    "tracegrad.eager.fft",
    "tracegrad.eager.linalg",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
