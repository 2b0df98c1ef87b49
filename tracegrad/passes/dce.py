"""Dead-code elimination: drop every node no output depends on.

Input nodes always stay, so the graph keeps its signature.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((2,), np.dtype("float64")))
    >>> unused = g.new_node("neg", (x,), {}, x.aval)
    >>> g.outputs.append(g.new_node("exp", (x,), {}, x.aval))
    >>> [n.op for n in dce(g).nodes]
    ['input', 'exp']
"""

from __future__ import annotations

from tracegrad.ir.clone import needed_ids
from tracegrad.ir.graph import Graph
from tracegrad.passes.rewrite import copy_graph


def dce(graph: Graph) -> Graph:
    """A copy of `graph` without the nodes that no output reads."""
    return dce_counted(graph)[0]


def dce_counted(graph: Graph) -> tuple[Graph, int]:
    """`dce` plus the number of nodes removed."""
    new = copy_graph(graph)
    live = live_ids(new)
    kept = [n for n in new.nodes if n.id in live or n.op == "input"]
    removed = len(new.nodes) - len(kept)
    new.nodes = kept
    return new, removed


def live_ids(graph: Graph) -> set[int]:
    """Ids of the nodes some output depends on (iterative: graphs can be deep)."""
    return needed_ids(graph.outputs, set())
