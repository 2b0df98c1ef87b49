"""The runnable examples in eager-mode docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "tracegrad.eager",
    "tracegrad.eager._tensor",
    "tracegrad.eager.dtypes",
    "tracegrad.eager.grad_mode",
    "tracegrad.eager.graph",
    "tracegrad.eager.autograd",
    "tracegrad.eager.creation",
    "tracegrad.eager.nn",
    "tracegrad.eager.nn.functional",
    "tracegrad.eager.optim",
    "tracegrad.eager.checkpointing",
    "tracegrad.eager.gradcheck",
    "tracegrad.eager.autograd_functional",
    "tracegrad.eager.nn.modules",
    "tracegrad.eager.indexing",
    "tracegrad.eager.more_ops",
    "tracegrad.eager.special",
    "tracegrad.eager.nn.more_functional",
    "tracegrad.eager.nn.transformer",
    "tracegrad.eager.nn.more_modules",
    "tracegrad.eager.nn.utils.rnn",
    "tracegrad.eager.nn.backward_hooks",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
