"""The text form of a graph: one line per node, jaxpr-like.

    graph f(%0: f32[2,3] x, %1: f32[3] w) -> (%4) {
      %2 = mul %0, %1 : f32[2,3]
      %3 = const 2.0 : f32[]
      %4 = sum[axis=None, keepdims=False] %2 : f32[]
      %5 = mul %4, %3 : f32[]            # bwd
      return %4
    }

Static attributes sit in brackets after the op name, as in a jaxpr. A node of
the backward half is marked `# bwd`; a node in a fusion group `# g2`; with
`show_source=True` the user's line that made the node is shown too.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node

# Consts up to this many elements are printed in full; larger ones are abridged.
_MAX_CONST_ELEMENTS = 6
_ANNOTATION_COLUMN = 44


def format_graph(graph: Graph, show_source: bool = False) -> str:
    """Render `graph` as text, one line per node.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph(name="double")
    >>> x = g.add_input(Aval((3,), np.dtype("float32")), "x")
    >>> two = g.add_const(np.float32(2.0))
    >>> y = g.new_node("mul", (x, two), {}, Aval((3,), np.dtype("float32")))
    >>> g.outputs.append(y)
    >>> print(format_graph(g))
    graph double(%0: f32[3] x) -> (%2) {
      %1 = const 2.0 : f32[]
      %2 = mul %0, %1 : f32[3]
      return %2
    }
    """
    params = ", ".join(
        f"{n.name}: {n.type_str()} {n.attrs.get('name', '')}".rstrip() for n in graph.inputs
    )
    outs = ", ".join(n.name for n in graph.outputs)
    lines = [f"graph {graph.name}({params}) -> ({outs}) {{"]
    input_ids = {n.id for n in graph.inputs}
    for node in graph.nodes:
        if node.op == "input" and node.id in input_ids:
            continue
        lines.append("  " + format_node(node, show_source=show_source))
        for key in sorted(node.attrs):  # sub-graphs of loops and branches, nested
            sub = node.attrs[key]
            if isinstance(sub, Graph):
                lines.append(f"    {key} = " + _indent(format_graph(sub, show_source), "    "))
    lines.append(f"  return {outs}")
    lines.append("}")
    return "\n".join(lines)


def format_node(node: Node, show_source: bool = False) -> str:
    """One node: `%3 = mul %1, %2 : f32[16,64]`, plus its annotations."""
    if node.op == "const":
        rhs = f"const {format_const(node.attrs['value'])}"
    elif node.op == "input":
        rhs = f"input {node.attrs.get('name', '')}".rstrip()
    else:
        rhs = node.op + format_attrs(node.attrs)
        if node.inputs:
            rhs += " " + ", ".join(i.name for i in node.inputs)
    text = f"{node.name} = {rhs} : {node.type_str()}"
    notes = []
    if node.tag != "fwd":
        notes.append(node.tag)
    if node.group is not None:
        notes.append(f"g{node.group}")
    if show_source and node.source:
        notes.append(f"@ {node.source}")
    if notes:
        text = text.ljust(_ANNOTATION_COLUMN) + "  # " + " ".join(notes)
    return text


def format_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    parts = [f"{k}={_format_attr_value(attrs[k])}" for k in sorted(attrs)]
    return "[" + ", ".join(parts) + "]"


def _indent(text: str, prefix: str) -> str:
    first, *rest = text.split("\n")
    return "\n".join([first] + [prefix + line for line in rest])


def _format_attr_value(value: Any) -> str:
    if isinstance(value, Graph):
        # the digest covers large consts, which the printed body abbreviates
        return f"{value.name}#{graph_digest(value)[:8]}"
    if isinstance(value, np.ndarray):
        return format_const(value)
    if isinstance(value, np.dtype):
        return str(value.name)
    if isinstance(value, slice):
        return _format_slice(value)
    if isinstance(value, tuple) and any(isinstance(v, slice) for v in value):
        return (
            "("
            + ", ".join(_format_slice(v) if isinstance(v, slice) else repr(v) for v in value)
            + ")"
        )
    return repr(value)


def _format_slice(s: slice) -> str:
    text = f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
    if s.step is not None:
        text += f":{s.step}"
    return text


def format_const(value: Any) -> str:
    """Compact form of a constant: `2.0`, `[1.0, 2.0]`, or `[0.1, 0.2, ... 100 values]`."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        return _format_scalar(arr[()])
    flat = arr.ravel()
    if arr.size <= _MAX_CONST_ELEMENTS:
        return _nested(arr)
    if np.all(flat == flat[0]):
        return f"full({_format_scalar(flat[0])})"
    head = ", ".join(_format_scalar(v) for v in flat[:3])
    return f"[{head}, ... {arr.size} values]"


def _nested(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return _format_scalar(arr[()])
    return "[" + ", ".join(_nested(a) for a in arr) + "]"


def _format_scalar(v: Any) -> str:
    # str() of a NumPy scalar is the shortest text that round-trips in its own dtype.
    return str(v) if isinstance(v, np.generic) else repr(v)


def graph_digest(graph: Graph) -> str:
    """A content hash of a body graph, consts included (its printed form shows
    large consts abbreviated)."""
    h = hashlib.sha256(format_graph(graph).encode())
    for node in graph.nodes:
        if node.op == "const":
            value = np.asarray(node.attrs["value"])
            h.update(value.dtype.str.encode() + repr(value.shape).encode() + value.tobytes())
    return h.hexdigest()[:16]
