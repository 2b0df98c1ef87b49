"""perf/isolated.py: the best peer and the ratio it reports, and its table."""

from __future__ import annotations

import pytest

from perf import isolated


def test_ratio_is_tracegrad_over_the_fastest_peer_by_median():
    row = {
        "tracegrad_compiled": (2.0e-3, 1.5e-3),
        "jax": (4.0e-3, 1.0e-3),  # a better min does not make it the best peer
        "torch_eager": (2.5e-3, 2.4e-3),
    }
    ratio, best = isolated._ratios(row)
    assert best == "torch_eager"
    assert ratio == pytest.approx(0.8)


def test_a_workload_without_tracegrad_or_peers_has_no_ratio():
    assert isolated._ratios({"jax": (1e-3, 1e-3)}) is None
    assert isolated._ratios({"tracegrad_compiled": (1e-3, 1e-3)}) is None


def test_markdown_marks_a_missing_system():
    result = {"gp_nll_n256:float64": {"tracegrad_compiled": (2e-3, 2e-3), "jax": (4e-3, 4e-3)}}
    table = isolated.markdown(result, ["tracegrad_compiled", "jax", "torch_eager"])
    lines = table.strip().split("\n")
    assert lines[0].startswith("| workload | tracegrad_compiled | jax | torch_eager |")
    assert lines[2] == "| `gp_nll_n256:float64` | 2.000 ms | 4.000 ms | n/a | 0.50× (jax) |"
