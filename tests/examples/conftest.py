"""Fixtures of the example tests."""

import pathlib
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def load_example():
    """load_example(name, backend): examples/<name>.py as a fresh module whose imports
    choose "tracegrad" or "torch" (examples/_common.py; the script's --torch switch)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import _common

    return _common.load_example
