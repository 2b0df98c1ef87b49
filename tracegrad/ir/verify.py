"""The verifier: checks that a graph is well formed.

It checks SSA order (every operand is defined by an earlier node of the same
graph), unique ids, that inputs and outputs belong to the graph, that consts
match their value, and it re-derives each node's shape and dtype with its
primitive's shape rule. Passes call it in tests after every rewrite.
"""

from __future__ import annotations

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import REGISTRY, TracegradError


class VerifyError(TracegradError):
    """A graph broke one of the IR's invariants."""


def verify(graph: Graph) -> Graph:
    """Raise `VerifyError` listing every broken invariant; return the graph if it is sound.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((2,), np.dtype("float64")))
    >>> g.outputs.append(g.new_node("mul", (x, x), {}, Aval((3,), np.dtype("float64"))))
    >>> verify(g)
    Traceback (most recent call last):
    ...
    tracegrad.ir.verify.VerifyError: graph f is malformed:
      %1 = mul: the graph says f64[3], the shape rule gives f64[2]
    """
    problems = find_problems(graph)
    if problems:
        raise VerifyError(f"graph {graph.name} is malformed:\n  " + "\n  ".join(problems))
    return graph


def find_problems(graph: Graph) -> list[str]:
    """Every broken invariant of `graph`, as readable lines (empty when sound)."""
    problems: list[str] = []
    defined: dict[int, Node] = {}
    for node in graph.nodes:
        if node.id in defined:
            problems.append(f"{node.name}: id used by two nodes")
            continue
        for operand in node.inputs:
            if defined.get(operand.id) is not operand:
                problems.append(
                    f"{node.name} = {node.op}: operand {operand.name} is not "
                    "defined by an earlier node of this graph"
                )
        problems.extend(_check_node(node))
        for key, sub in node.attrs.items():  # bodies of loops, branches, custom rules
            if isinstance(sub, Graph):
                problems.extend(f"{node.name} = {node.op}, {key}: {p}" for p in find_problems(sub))
        defined[node.id] = node
    input_ids = set()
    for node in graph.inputs:
        if defined.get(node.id) is not node:
            problems.append(f"input {node.name} is not a node of the graph")
        if node.op != "input":
            problems.append(f"input {node.name} has op {node.op!r}, expected 'input'")
        input_ids.add(node.id)
    for node in graph.nodes:
        if node.op == "input" and node.id not in input_ids:
            problems.append(f"{node.name} is an input node missing from graph.inputs")
    for node in graph.outputs:
        if defined.get(node.id) is not node:
            problems.append(f"output {node.name} is not a node of the graph")
    if graph.nodes and graph._next_id <= max(defined, default=-1):
        problems.append(f"graph._next_id {graph._next_id} would reuse an existing id")
    return problems


def _check_node(node: Node) -> list[str]:
    if not isinstance(node.dtype, np.dtype) or not isinstance(node.shape, tuple):
        return [f"{node.name}: shape must be a tuple and dtype an np.dtype"]
    if node.op == "input":
        return [f"{node.name}: an input node has operands"] if node.inputs else []
    if node.op == "const":
        value = node.attrs.get("value")
        if not isinstance(value, np.ndarray):
            return [f"{node.name}: const value must be an ndarray"]
        if value.shape != node.shape or value.dtype != node.dtype:
            return [
                f"{node.name}: const value is {value.dtype}{list(value.shape)}, "
                f"the node says {node.type_str()}"
            ]
        return []
    prim = REGISTRY.get(node.op)
    if prim is None:
        return [f"{node.name}: unknown op {node.op!r} (not in the rule table)"]
    try:
        derived = prim.shape_rule(*[i.aval for i in node.inputs], **node.attrs)
    except Exception as exc:  # any failure of the rule is a malformed node
        return [
            f"{node.name} = {node.op}: the shape rule rejects it: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        ]
    if tuple(derived.shape) != node.shape or np.dtype(derived.dtype) != node.dtype:
        return [
            f"{node.name} = {node.op}: the graph says {node.type_str()}, "
            f"the shape rule gives {derived}"
        ]
    return []
