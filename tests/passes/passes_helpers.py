"""Helpers for the pass tests: build graphs by hand, compare before/after."""

from __future__ import annotations

import numpy as np
from graph_maker import GraphMaker  # noqa: F401  (re-exported for the pass tests)

from tracegrad.ir import interpret, verify
from tracegrad.ir.graph import Graph


def random_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for node in graph.inputs:
        if np.issubdtype(node.dtype, np.floating):
            arrays.append(rng.standard_normal(node.shape).astype(node.dtype))
        elif node.dtype == np.bool_:
            arrays.append(rng.random(node.shape) < 0.5)
        else:
            arrays.append(rng.integers(-5, 6, node.shape).astype(node.dtype))
    return arrays


def assert_same_results(before: Graph, after: Graph, *arrays, rtol=1e-5, atol=1e-6) -> None:
    """`after` is valid and computes what `before` does (exactly for integers)."""
    verify(after)
    arrays = arrays or tuple(random_inputs(before))
    expected = interpret(before, *arrays)
    got = interpret(after, *arrays)
    assert len(expected) == len(got)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def ops(graph: Graph) -> list[str]:
    """The ops of the graph's nodes, inputs left out, in order."""
    return [n.op for n in graph.nodes if n.op != "input"]


def snapshot(graph: Graph):
    """Everything a pass must not change in its input graph."""
    return (
        [(n, n.key(), n.inputs, n.source, n.tag, n.group) for n in graph.nodes],
        list(graph.inputs),
        list(graph.outputs),
        str(graph),
        graph._next_id,
        graph.name,
    )
