"""Helpers for the codegen tests: hand-built graphs, compiled vs interpreted.

Numba compiles are the slow part, so each test file builds few kernels, each
covering many primitives; kernels are cached on disk across runs.
"""

from __future__ import annotations

import numpy as np
from graph_maker import GraphMaker  # noqa: F401  (re-exported for the codegen tests)

from tracegrad.ir.graph import Graph
from tracegrad.ir.interpret import interpret


def assert_matches_interpreter(kernel, graph: Graph, arrays, dtype) -> None:
    """Every output of the compiled kernel equals the interpreter's."""
    got = kernel(*arrays)
    want = interpret(graph, *arrays)
    assert len(got) == len(want)
    tight = np.dtype(dtype) == np.float64
    for node, g, w in zip(graph.outputs, got, want, strict=True):
        assert g.shape == w.shape, f"{node.name} {node.op}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{node.name} {node.op}: dtype {g.dtype} != {w.dtype}"
        if np.issubdtype(w.dtype, np.floating):
            rtol, atol = (1e-12, 1e-12) if tight else (2e-5, 2e-6)
            np.testing.assert_allclose(
                g,
                w,
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"{node.name} = {node.op}{node.attrs}",
            )
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{node.name} = {node.op}{node.attrs}")
