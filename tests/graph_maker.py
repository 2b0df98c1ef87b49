"""GraphMaker: hand-built IR graphs for the pass and codegen tests."""

from __future__ import annotations

import numpy as np

from tracegrad.ir.graph import Graph, Node
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

    def op(
        self, name: str, *inputs: Node, tag: str = "fwd", source: str | None = None, **attrs
    ) -> Node:
        aval = REGISTRY[name].shape_rule(*[i.aval for i in inputs], **attrs)
        return self.graph.new_node(name, inputs, attrs, aval, source=source, tag=tag)

    def output(self, *nodes: Node) -> Graph:
        self.graph.outputs.extend(nodes)
        return self.graph
