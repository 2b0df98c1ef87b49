"""Common-subexpression elimination: one node per distinct computation.

Two nodes merge when they have the same op, the same (already merged)
operands, equal attributes, shape and dtype (`Node.key()`); consts merge when
their values are bitwise equal. For commutative ops the operand order does not
matter: `x*y` and `y*x` merge (IEEE addition and multiplication commute
exactly). The first occurrence survives, with its source and tag. Inputs never
merge.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((2,), np.dtype("float64")))
    >>> a, b = (g.new_node("exp", (x,), {}, x.aval) for _ in range(2))
    >>> g.outputs.append(g.new_node("add", (a, b), {}, x.aval))
    >>> h = cse(g)
    >>> h.outputs[0].inputs[0] is h.outputs[0].inputs[1]
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.passes.rewrite import Builder, rewrite_graph


def cse(graph: Graph) -> Graph:
    """A copy of `graph` where repeated computations are computed once."""
    return cse_counted(graph)[0]


def cse_counted(graph: Graph) -> tuple[Graph, int]:
    """`cse` plus the number of nodes merged away."""
    seen: dict[Any, Node] = {}

    def merge(node: Node, _builder: Builder) -> Node | None:
        key = structural_key(node)
        first = seen.get(key)
        if first is None:
            seen[key] = node
        return first

    return rewrite_graph(graph, merge)


# Ops whose result does not depend on operand order, bit for bit.
# (Not maximum/minimum: which of 0.0 and -0.0 they return depends on the order.)
COMMUTATIVE_OPS = frozenset({"add", "mul", "eq", "ne", "logical_and", "logical_or"})


def structural_key(node: Node):
    """`Node.key()`, made hashable when attrs hold nested slices or lists."""
    key = node.key()
    if node.op in COMMUTATIVE_OPS:
        op, input_ids, *rest = key
        key = (op, tuple(sorted(input_ids)), *rest)
    try:
        hash(key)
        return key
    except TypeError:
        return freeze(key)


def freeze(value):
    """A hashable stand-in for `value` (tuples, lists, dicts, slices, arrays)."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, freeze(v)) for k, v in sorted(value.items())))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value
