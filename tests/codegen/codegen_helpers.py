"""Helpers for the codegen tests: hand-built graphs, compiled vs interpreted.

Numba compiles are the slow part, so each test file builds few kernels, each
covering many primitives; kernels are cached on disk across runs.
"""
from __future__ import annotations

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ir.interpret import interpret
from tracegrad.ops.core import REGISTRY, Aval


class GraphMaker:
    """Builds a Graph node by node, deriving types from the rule table.

        gm = GraphMaker(); x = gm.input((3,)); gm.output(gm.op("neg", x))
    """

    def __init__(self, name: str = "f"):
        self.graph = Graph(name=name)

    def input(self, shape, dtype="float32", name=None) -> Node:
        return self.graph.add_input(Aval(tuple(shape), np.dtype(dtype)), name)

    def const(self, value, dtype="float32") -> Node:
        return self.graph.add_const(np.asarray(value, dtype=dtype))

    def op(self, name: str, *inputs: Node, source: str | None = None, **attrs) -> Node:
        aval = REGISTRY[name].shape_rule(*[i.aval for i in inputs], **attrs)
        return self.graph.new_node(name, inputs, attrs, aval, source=source)

    def output(self, *nodes: Node) -> Graph:
        self.graph.outputs.extend(nodes)
        return self.graph


def assert_matches_interpreter(kernel, graph: Graph, arrays, dtype) -> None:
    """Every output of the compiled kernel equals the interpreter's."""
    got = kernel(*arrays)
    want = interpret(graph, *arrays)
    assert len(got) == len(want)
    tight = np.dtype(dtype) == np.float64
    for node, g, w in zip(graph.outputs, got, want):
        assert g.shape == w.shape, f"{node.name} {node.op}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{node.name} {node.op}: dtype {g.dtype} != {w.dtype}"
        if np.issubdtype(w.dtype, np.floating):
            rtol, atol = (1e-12, 1e-12) if tight else (2e-5, 2e-6)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{node.name} = {node.op}{node.attrs}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{node.name} = {node.op}{node.attrs}")
