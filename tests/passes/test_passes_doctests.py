"""The runnable examples in the passes' docstrings stay true."""

import doctest
import importlib

import pytest

MODULES = [
    "tracegrad.passes",
    "tracegrad.passes.rewrite",
    "tracegrad.passes.dce",
    "tracegrad.passes.cse",
    "tracegrad.passes.fold",
    "tracegrad.passes.simplify",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
