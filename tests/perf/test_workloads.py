"""The benchmark workloads are right before they are timed: each one, at a tiny size.

For every workload of perf/workloads.py (issue 14's models included):
  - tracegrad compiled and tracegrad eager give the hand-written NumPy reference's
    value and gradients (float64, 1e-8 relative to each array's largest entry);
  - the hand-written reference itself agrees with PyTorch's autograd on the
    workload's own torch spelling (F.conv2d, F.layer_norm, torch.lstm, ...), so a
    wrong reference cannot make a wrong tracegrad gradient pass;
  - float32 inputs give float32 gradients in both tracegrad modes.
No timing is asserted. The full-size workloads are checked the same way by
perf/run.py before it times anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import systems  # noqa: E402
from perf.workloads import WORKLOAD_NAMES, compare, make_small_workload, reference  # noqa: E402


def _run(system_key: str, workload):
    prepared = systems.SYSTEMS[system_key].prepare(workload)
    return prepared.to_numpy(prepared.call())


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_compiled_gradients_match_reference(name):
    w = make_small_workload(name, "float64")
    value, grads = _run("tracegrad_compiled", w)
    assert compare(w, value, grads) is None


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_eager_gradients_match_reference(name):
    w = make_small_workload(name, "float64")
    value, grads = _run("tracegrad_eager", w)
    assert compare(w, value, grads) is None


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_reference_matches_torch(name):
    pytest.importorskip("torch")
    w = make_small_workload(name, "float64")
    value, grads = _run("torch_eager", w)
    assert compare(w, value, grads) is None


FLOAT32_CASES = ["attention_4h_t64", "lstm_scan_t20", "conv2d_b8_32px", "mlp_layernorm_b64"]


def _check_float32(name, key):
    w = make_small_workload(name, "float32")
    value, grads = _run(key, w)
    assert [g.dtype for g in grads] == [np.dtype(np.float32)] * len(w.params)
    assert compare(w, value, grads) is None


@pytest.mark.parametrize("name", FLOAT32_CASES)
def test_float32_stays_float32_eager(name):
    _check_float32(name, "tracegrad_eager")


@pytest.mark.slow  # four more Numba compiles (~10 s each on a busy machine)
@pytest.mark.parametrize("name", FLOAT32_CASES)
def test_float32_stays_float32_compiled(name):
    _check_float32(name, "tracegrad_compiled")


def test_workloads_are_not_trivial():
    """The checks above could pass on zero gradients; the references are not zero."""
    for name in WORKLOAD_NAMES:
        w = make_small_workload(name, "float64")
        _, ref_grads = reference(w)
        assert all(np.abs(g).max() > 1e-6 for g in ref_grads), name
        assert w.extra.get("flops", 0) > 0, name


def test_compare_catches_a_wrong_gradient():
    w = make_small_workload("lstm_scan_t20", "float64")
    value, grads = reference(w)
    grads = [g.copy() for g in grads]
    grads[1][0, 0] += 1e-3 * np.abs(grads[1]).max()
    assert "grad 1" in compare(w, value, grads)
