"""The IR: a flat list of typed SSA nodes.

A `Node` is one value: the primitive that makes it (`op`, a name in the rule
table, or "input" / "const"), its operand nodes, its static attributes, and its
shape and dtype. A `Graph` owns nodes in topological order, its inputs and its
outputs. Printing gives one line per node:

    %3 = mul %1, %2 : f32[16,64]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracegrad.ops.core import Aval


@dataclass(eq=False)
class Node:
    id: int
    op: str
    inputs: tuple[Node, ...]
    attrs: dict[str, Any]
    shape: tuple[int, ...]
    dtype: np.dtype
    source: str | None = None  # "file:line" of the user's code that made it
    tag: str = "fwd"  # "fwd" or "bwd": which half of a joint graph
    group: int | None = None  # fusion group id, set by passes.fuse

    @property
    def aval(self) -> Aval:
        return Aval(self.shape, self.dtype)

    @property
    def name(self) -> str:
        return f"%{self.id}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def type_str(self) -> str:
        return str(self.aval)

    def key(self) -> tuple[Any, ...]:
        """Structural identity, used by common-subexpression elimination."""
        return (
            self.op,
            tuple(i.id for i in self.inputs),
            attrs_key(self.attrs),
            self.shape,
            self.dtype.str,
        )


def attrs_key(attrs: dict[str, Any]) -> tuple[Any, ...]:
    items = []
    for k in sorted(attrs):
        v = attrs[k]
        if isinstance(v, np.ndarray):
            v = ("ndarray", v.dtype.str, v.shape, v.tobytes())
        elif isinstance(v, list):
            v = tuple(v)
        elif isinstance(v, slice):
            v = ("slice", v.start, v.stop, v.step)
        items.append((k, v))
    return tuple(items)


@dataclass(eq=False)
class Graph:
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    name: str = "f"
    _next_id: int = 0

    def new_node(
        self,
        op: str,
        inputs: Iterable[Node],
        attrs: dict[str, Any],
        aval: Aval,
        source: str | None = None,
        tag: str = "fwd",
    ) -> Node:
        node = Node(
            self._next_id,
            op,
            tuple(inputs),
            dict(attrs),
            tuple(aval.shape),
            np.dtype(aval.dtype),
            source,
            tag,
        )
        self._next_id += 1
        self.nodes.append(node)
        return node

    def add_input(self, aval: Aval, name: str | None = None) -> Node:
        node = self.new_node("input", (), {"name": name or f"arg{len(self.inputs)}"}, aval)
        self.inputs.append(node)
        return node

    def add_const(self, value: Any, dtype: Any = None, tag: str = "fwd") -> Node:
        arr = np.asarray(value, dtype=dtype)
        return self.new_node("const", (), {"value": arr}, Aval(arr.shape, arr.dtype), tag=tag)

    def users(self) -> dict[int, list[Node]]:
        """Map node id -> the nodes that read it."""
        out: dict[int, list[Node]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i.id].append(n)
        return out

    def __str__(self) -> str:
        from tracegrad.ir.printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"
