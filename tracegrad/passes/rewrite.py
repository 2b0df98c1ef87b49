"""The machinery every simplification pass shares: rebuild a graph node by node.

`rewrite_graph(graph, rewrite_node)` walks `graph` in topological order and
builds a *new* graph (the input is never touched). For each node it calls
`rewrite_node(node, builder)`, where `node` already reads the rewritten
operands. The callback returns None to keep the node, or a replacement node:
an existing node of the new graph, or one made with `builder.emit(...)` /
`builder.const(...)`. A replacement must have the node's exact shape and dtype.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((3,), np.dtype("float32")))
    >>> g.outputs.append(g.new_node("neg", (g.new_node("neg", (x,), {}, x.aval),), {}, x.aval))
    >>> def drop_double_neg(node, b):
    ...     if node.op == "neg" and node.inputs[0].op == "neg":
    ...         return node.inputs[0].inputs[0]
    >>> h, changes = rewrite_graph(g, drop_double_neg)
    >>> changes, h.outputs[0] is h.inputs[0]
    (1, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import REGISTRY, Aval


class RewriteAbort(Exception):
    """Raised inside a rule to say "this rewrite does not apply after all"."""


class Builder:
    """Makes the nodes of one replacement.

    New nodes wait in `pending` and join the graph only if the rule succeeds,
    so an abandoned rewrite leaves no dead nodes behind (which would otherwise
    make dead-code elimination report a change on every round).
    """

    def __init__(self, graph: Graph, replacing: Node):
        self.graph = graph
        self.replacing = replacing
        self.pending: list[Node] = []

    def _make(self, op: str, inputs: tuple[Node, ...], attrs: dict, aval: Aval) -> Node:
        node = Node(
            self.graph._next_id,
            op,
            tuple(inputs),
            dict(attrs),
            tuple(aval.shape),
            np.dtype(aval.dtype),
            self.replacing.source,
            self.replacing.tag,
        )
        self.graph._next_id += 1
        self.pending.append(node)
        return node

    def emit(self, op: str, *inputs: Node, **attrs) -> Node:
        """A new `op` node; its shape and dtype come from the rule table.

        Raises RewriteAbort when the op is unknown or its shape rule refuses.
        """
        prim = REGISTRY.get(op)
        if prim is None:
            raise RewriteAbort(f"no primitive {op!r}")
        try:
            aval = prim.shape_rule(*[i.aval for i in inputs], **attrs)
        except Exception as exc:
            raise RewriteAbort(f"{op}: {exc}") from None
        return self._make(op, inputs, attrs, aval)

    def const(self, value, dtype) -> Node:
        """A new const node holding `value` as an array of `dtype`."""
        arr = np.asarray(value, dtype=dtype)
        return self._make("const", (), {"value": arr}, Aval(arr.shape, arr.dtype))

    # ------------------------------------------------- shape/dtype adapters
    def fit(self, x: Node, shape: tuple, dtype: np.dtype) -> Node:
        """`x` made to have exactly `shape` and `dtype` (broadcast, then cast).

        Used when a rule drops an operation: `mul(x, ones)` still has the
        product's broadcast shape and promoted dtype, which `x` may lack.
        """
        if x.dtype != dtype:
            x = self.cast(x, dtype)
        if x.shape != tuple(shape):
            x = self.emit("broadcast_to", x, shape=tuple(shape))
        return x

    def cast(self, x: Node, dtype: np.dtype) -> Node:
        if x.op == "const":  # cast the value itself
            return self.const(x.attrs["value"].astype(dtype), dtype)
        return self.emit("astype", x, dtype=np.dtype(dtype).name)


RewriteFn = Callable[[Node, Builder], "Node | None"]


def rewrite_graph(graph: Graph, rewrite_node: RewriteFn) -> tuple[Graph, int]:
    """A rewritten copy of `graph` and the number of nodes that were replaced.

    Inputs are never offered to `rewrite_node`. A replaced node is left out of
    the new graph (no one reads it any more). Outputs are re-pointed to the
    replacements; `graph.inputs` keeps its order.
    """
    new = dataclasses.replace(graph, nodes=[], inputs=[], outputs=[])
    env: dict[int, Node] = {}
    changes = 0
    for old in graph.nodes:
        node = Node(
            old.id,
            old.op,
            tuple(env[i.id] for i in old.inputs),
            dict(old.attrs),
            old.shape,
            old.dtype,
            old.source,
            old.tag,
            old.group,
        )
        replacement = None
        if old.op != "input":
            builder = Builder(new, node)
            try:
                replacement = rewrite_node(node, builder)
            except RewriteAbort:
                replacement = None
        if replacement is None or replacement is node:
            new.nodes.append(node)
            env[old.id] = node
            continue
        if replacement.shape != node.shape or replacement.dtype != node.dtype:
            raise AssertionError(
                f"rewrite of {node.name} = {node.op} ({node.type_str()}) produced "
                f"{replacement.op} of type {replacement.type_str()}: a rule broke shape/dtype"
            )
        new.nodes.extend(builder.pending)
        env[old.id] = replacement
        changes += 1
    new.inputs = [env[n.id] for n in graph.inputs]
    new.outputs = [env[n.id] for n in graph.outputs]
    return new, changes


# ---------------------------------------------------------- value queries


def const_value(node: Node) -> np.ndarray | None:
    """The constant value of `node`, if it is a const or a broadcast of one.

    For `broadcast_to(const c)` this returns c itself (not the big array):
    callers compare values, which broadcasting does not change.
    """
    if node.op == "const":
        return node.attrs["value"]
    if node.op == "broadcast_to" and node.inputs[0].op == "const":
        return node.inputs[0].attrs["value"]
    return None


def is_filled_with(node: Node, number: float) -> bool:
    """True when every element of `node` is known to equal `number` (never NaN)."""
    value = const_value(node)
    if value is None or value.size == 0 or value.dtype == object:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(value == number))


def uniform_scalar(value: np.ndarray) -> np.ndarray | None:
    """value's single repeated element as a 0-d array, or None if it varies.

    NaNs count as equal to each other, and -0.0 differs from 0.0 (bytes are
    compared), so the scalar rebuilds the array exactly.
    """
    if value.size == 0 or value.dtype == object:
        return None
    flat = np.ascontiguousarray(value).reshape(-1)
    as_bytes = flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    if not (as_bytes == as_bytes[0]).all():
        return None
    return flat[0:1].reshape(()).copy()


def copy_graph(graph: Graph) -> Graph:
    """A copy with fresh Node objects (same ids); const arrays are shared."""
    return rewrite_graph(graph, lambda node, builder: None)[0]
