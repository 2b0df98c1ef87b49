"""The runnable examples in the docstrings of placement and the CUDA planner (in the
simulator, like every test here)."""

import doctest
import importlib

import pytest

MODULES = ["tracegrad.placement", "tracegrad.codegen.cuda.plan", "tracegrad.codegen.cuda.disk"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
