"""The IR: graphs of typed SSA nodes, their text form, verifier and interpreter.

>>> import numpy as np, tracegrad as tg
>>> from tracegrad.ir import interpret, verify
>>> g = verify(tg.trace(lambda x: tg.exp(x) * 2.0, np.zeros(2)))
>>> interpret(g, np.zeros(2))
(array([2., 2.]),)
"""

__all__ = [
    "Graph",
    "Node",
    "format_graph",
    "format_node",
    "interpret",
    "InterpretError",
    "verify",
    "find_problems",
    "VerifyError",
    "clone_graph",
    "clone_graph_with_map",
    "subgraph",
]

from tracegrad.ir.clone import clone_graph, clone_graph_with_map, subgraph
from tracegrad.ir.graph import Graph, Node
from tracegrad.ir.interpret import InterpretError, interpret
from tracegrad.ir.printer import format_graph, format_node
from tracegrad.ir.verify import VerifyError, find_problems, verify
