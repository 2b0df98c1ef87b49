"""The seed document's snippets (examples/seed_walkthrough.py) give PyTorch's results."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

import tracegrad.eager as tg

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "seed_walkthrough", ROOT / "examples" / "seed_walkthrough.py"
)
walkthrough = importlib.util.module_from_spec(spec)
spec.loader.exec_module(walkthrough)


def results(snippet, module):
    return {what: result for what, result, _, _ in snippet(module)}


def test_known_disagreements_with_the_document():
    step2 = results(walkthrough.step2_backward, tg)
    assert step2["x.grad"] == "tensor([7.])" and step2["y.grad"] == "tensor([2.])"
    inplace = results(walkthrough.mistake3_inplace, tg)
    assert inplace["y = x**2; y += 1; y.backward()"] == "no error; x.grad = tensor([4.])"
    assert "which is output 0 of Exp" in inplace["same with y = x.exp() (saves its output)"]
    detach = results(walkthrough.example3_detach, tg)
    assert detach["x.grad (detached)"] == "tensor([9.])"
    assert detach["x.grad without detach"] == "tensor([27.])"


@pytest.mark.parametrize("snippet", walkthrough.SNIPPETS, ids=lambda s: s.__name__)
def test_snippet_matches_pytorch(snippet):
    torch = pytest.importorskip("torch")
    assert results(snippet, tg) == results(snippet, torch)


def test_walkthrough_runs_and_flags_the_document():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "seed_walkthrough.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.count(">>> DOC IS WRONG") == 3
    assert "3 places where PyTorch disagrees with the document." in out
