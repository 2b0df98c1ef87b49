"""Copying graphs, so a pass can rewrite a copy and leave its input untouched."""

from __future__ import annotations

from tracegrad.ir.graph import Graph, Node


def clone_graph(graph: Graph, name: str | None = None) -> Graph:
    """A copy of `graph` with fresh Node objects carrying the same ids.

    Attributes dicts are copied shallowly (const arrays are shared, never
    mutated). Use `clone_graph_with_map` to also get old node -> new node.

    >>> import numpy as np
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((2,), np.dtype("float64")))
    >>> g.outputs.append(g.new_node("neg", (x,), {}, x.aval))
    >>> h = clone_graph(g)
    >>> h.outputs[0] is g.outputs[0], h.outputs[0].id == g.outputs[0].id
    (False, True)
    """
    return clone_graph_with_map(graph, name)[0]


def clone_graph_with_map(graph: Graph, name: str | None = None) -> tuple[Graph, dict[int, Node]]:
    """Like `clone_graph`, also returning a dict old node id -> new node."""
    new = Graph(name=name or graph.name)
    mapping: dict[int, Node] = {}
    for node in graph.nodes:
        copy = Node(
            node.id,
            node.op,
            tuple(mapping[i.id] for i in node.inputs),
            dict(node.attrs),
            node.shape,
            node.dtype,
            node.source,
            node.tag,
            node.group,
        )
        mapping[node.id] = copy
        new.nodes.append(copy)
    new.inputs = [mapping[n.id] for n in graph.inputs]
    new.outputs = [mapping[n.id] for n in graph.outputs]
    new._next_id = graph._next_id
    return new, mapping


def pruned_graph(graph: Graph) -> Graph:
    """A copy of `graph` without the nodes no output reads (inputs stay, so the
    signature does too). `tracegrad.passes.dce` is the pass; this is for layers
    below the passes (the loop primitives' reverse mode)."""
    new = clone_graph(graph)
    live = needed_ids(new.outputs, set())
    new.nodes = [n for n in new.nodes if n.id in live or n.op == "input"]
    return new


def subgraph(
    graph: Graph, inputs: list[Node], outputs: list[Node], name: str | None = None
) -> Graph:
    """The part of `graph` that computes `outputs` from `inputs`.

    Each node of `inputs` (any node, not only graph inputs) becomes an input of
    the new graph; nodes needed by `outputs` are copied (same ids, so text forms
    stay comparable); consts are copied along. Raises ValueError when an
    output needs a graph input that is not among `inputs`.
    """
    new = Graph(name=name or graph.name)
    mapping: dict[int, Node] = {}
    for node in inputs:
        if node.id in mapping:
            continue
        copy = Node(
            node.id,
            "input",
            (),
            {"name": _input_name(node)},
            node.shape,
            node.dtype,
            node.source,
            node.tag,
            None,
        )
        mapping[node.id] = copy
        new.nodes.append(copy)
        new.inputs.append(copy)
    needed = needed_ids(outputs, set(mapping))
    for node in graph.nodes:
        if node.id not in needed or node.id in mapping:
            continue
        if node.op == "input":
            raise ValueError(
                f"subgraph: {node.name} ({node.attrs.get('name')}) is needed but "
                "not among the inputs"
            )
        copy = Node(
            node.id,
            node.op,
            tuple(mapping[i.id] for i in node.inputs),
            dict(node.attrs),
            node.shape,
            node.dtype,
            node.source,
            node.tag,
            node.group,
        )
        mapping[node.id] = copy
        new.nodes.append(copy)
    new.outputs = [mapping[n.id] for n in outputs]
    new._next_id = graph._next_id
    return new


def _input_name(node: Node) -> str:
    if node.op == "input":
        return str(node.attrs.get("name", f"v{node.id}"))
    return f"saved{node.id}_{node.op}"


def needed_ids(outputs: list[Node], stop: set[int]) -> set[int]:
    needed: set[int] = set()
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if node.id in needed:
            continue
        needed.add(node.id)
        if node.id not in stop:
            stack.extend(node.inputs)
    return needed
