"""One forward loop where reverse mode made two.

Reverse mode of a `scan` (ops/control.py) adds a second forward scan whose
body also emits each step's starting carry (the residuals). Its packed value
begins with exactly the original scan's value, so the original scan is
replaced by a slice of it: the forward runs once.

    scan(B, ops)  and  scan(history(B), ops)   ->   h = scan(history(B), ops); h[:n]
"""
from __future__ import annotations

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import Aval
from tracegrad.passes.rewrite import copy_graph


def _loop_key(node: Node, body: Graph) -> tuple:
    a = node.attrs
    return (id(body), tuple(i.id for i in node.inputs), a["length"], a["reverse"],
            a["n_carry"], a["n_xs"])


def share_scan_residuals_counted(graph: Graph) -> tuple[Graph, int]:
    from tracegrad.ops.control import history_base
    histories = {}
    for node in graph.nodes:
        if node.op == "scan":
            base = history_base(node.attrs["body"])
            if base is not None:
                histories.setdefault(_loop_key(node, base), node)
    if not histories:
        return graph, 0
    forward = [n for n in graph.nodes if n.op == "scan"
               and _loop_key(n, n.attrs["body"]) in histories]
    if not forward:
        return graph, 0
    graph = copy_graph(graph)
    by_id = {n.id: n for n in graph.nodes}
    replaced: dict[int, Node] = {}
    for old in forward:
        s1 = by_id[old.id]
        s2 = by_id[histories[_loop_key(old, old.attrs["body"])].id]
        size = s1.shape[0]
        graph.nodes.remove(s2)
        at = graph.nodes.index(s1)
        graph.nodes.insert(at, s2)  # its operands are s1's: defined before s1
        s2.tag = s1.tag
        part = Node(graph._next_id, "getitem", (s2,), {"spec": (("slice", 0, size, 1),)},
                    (size,), s1.dtype, s1.source, s1.tag)
        graph._next_id += 1
        graph.nodes[graph.nodes.index(s1)] = part
        replaced[s1.id] = part
    for n in graph.nodes:
        if any(i.id in replaced for i in n.inputs):
            n.inputs = tuple(replaced.get(i.id, i) for i in n.inputs)
    graph.outputs = [replaced.get(o.id, o) for o in graph.outputs]
    return graph, len(replaced)
