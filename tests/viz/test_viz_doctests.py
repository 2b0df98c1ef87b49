"""The runnable examples in tracegrad.viz's docstrings."""

import doctest

import pytest

import tracegrad.viz.dot
import tracegrad.viz.eager
import tracegrad.viz.ir


@pytest.mark.parametrize("module", [tracegrad.viz.dot, tracegrad.viz.eager, tracegrad.viz.ir])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
