"""The runnable examples in the docstrings of the IR tools and the compiled front end."""

import doctest
import importlib

import pytest

MODULES = [
    "tracegrad.ir",
    "tracegrad.ir.printer",
    "tracegrad.ir.interpret",
    "tracegrad.ir.verify",
    "tracegrad.ir.clone",
    "tracegrad.tracing",
    "tracegrad.autodiff",
    "tracegrad.compiler",
    "tracegrad.compiled_eager",
    "tracegrad.implicit",
    "tracegrad.loops",
    "tracegrad.transforms",
    "tracegrad.loops.primitives",
    "tracegrad.custom",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
