"""Graph -> units: the planning both code generators share (CPU/Numba and CUDA).

Nothing here writes code. From a fused graph (`passes/fuse.py` labels the
fusion groups) it decides:

  - `schedule`: the units (a whole fusion group, or one node) in an order that
    respects every dependency (a group runs once all its external operands exist);
  - `storage_lifetimes`: for each storage root (views share their base's storage),
    the last unit that needs it; `memory.py` places values in workspaces from these;
  - `coalesce`: a loop nest's structure, dims merged where every access walks
    them contiguously;
  - `optimized_body`: the graph a loop (`scan`) body runs as, on either backend;
  - `ir_hash`, `widened_float16`: a graph's content name, and its float32 twin.

The emitters (`emit.py`/`fused.py`/`structured.py` for Numba, `cuda/` for the GPU)
turn the units into code; this module imports none of them.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> from tracegrad.passes.fuse import fuse_elementwise
    >>> g = Graph(name="f")
    >>> x = g.add_input(Aval((4,), np.dtype("float64")), "x")
    >>> y = g.new_node("tanh", (x,), {}, x.aval)
    >>> g.outputs.append(g.new_node("sum", (g.new_node("mul", (y, y), {}, x.aval),), {}, Aval((), x.dtype)))
    >>> [kind for kind, _ in schedule(fuse_elementwise(g))]
    ['node', 'group']
"""

from __future__ import annotations

import hashlib
import heapq

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.passes.fuse import is_view

__all__ = [
    "coalesce",
    "ir_hash",
    "optimized_body",
    "schedule",
    "storage_lifetimes",
    "unit_nodes",
    "view_root",
    "widened_float16",
]


def schedule(graph: Graph) -> list[tuple[str, object]]:
    """Units in an executable order: ("group", gid) or ("node", node).

    A group runs as a whole, so it waits for every external operand of every
    member; fuse_elementwise guarantees the unit graph has no cycle."""
    unit_of: dict[int, tuple] = {}
    first_pos: dict[tuple, int] = {}
    for pos, n in enumerate(graph.nodes):
        key = ("group", n.group) if n.group is not None else ("node", n.id)
        unit_of[n.id] = key
        first_pos.setdefault(key, pos)
    deps: dict[tuple, set] = {k: set() for k in first_pos}
    for n in graph.nodes:
        for i in n.inputs:
            if unit_of[i.id] != unit_of[n.id]:
                deps[unit_of[n.id]].add(unit_of[i.id])
    dependents: dict[tuple, list] = {k: [] for k in first_pos}
    for k, ds in deps.items():
        for d in ds:
            dependents[d].append(k)
    waiting = {k: len(ds) for k, ds in deps.items()}
    ready = [(first_pos[k], k) for k, c in waiting.items() if c == 0]
    heapq.heapify(ready)
    order = []
    by_id = {n.id: n for n in graph.nodes}
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for d in dependents[k]:
            waiting[d] -= 1
            if waiting[d] == 0:
                heapq.heappush(ready, (first_pos[d], d))
    if len(order) != len(first_pos):
        raise RuntimeError("fusion groups depend on each other in a cycle")
    return [("group", k[1]) if k[0] == "group" else ("node", by_id[k[1]]) for k in order]


def unit_nodes(graph_groups, unit) -> list[Node]:
    """The nodes one unit of `schedule` computes (`graph_groups`: fuse.groups_of)."""
    kind, v = unit
    return list(graph_groups[v]) if kind == "group" else [v]


def view_root(node: Node) -> Node:
    """The value whose storage `node` reads (itself unless it is a view)."""
    while is_view(node):
        node = node.inputs[0]
    return node


def storage_lifetimes(graph: Graph, groups, units) -> dict[int, int]:
    """Storage root id -> position of the last unit that needs its storage.

    A value is needed by every unit that reads it or any view of it (views are
    index arithmetic on their base's buffer, and so are the copies the emitter
    makes of views: they belong to the base); a value nobody reads is needed
    only by the unit that computes it. Roots of graph outputs are missing:
    their storage must outlive the kernel."""
    dies_after: dict[int, int] = {}
    for p, unit in enumerate(units):
        for n in unit_nodes(groups, unit):
            root = view_root(n).id
            dies_after[root] = max(dies_after.get(root, -1), p)
            for i in n.inputs:
                r = view_root(i).id
                dies_after[r] = max(dies_after.get(r, -1), p)
    for o in graph.outputs:
        dies_after.pop(view_root(o).id, None)
    return dies_after


def coalesce(dims, stride_sets):
    """Drop size-1 dims and merge neighbours that every access walks contiguously.

    Returns (loop dims, per-access strides over those loop dims).

    >>> coalesce([2, 1, 3], [(3, 3, 1), (0, 0, 0)])
    ([6], [(1,), (0,)])
    """
    keep = [i for i, d in enumerate(dims) if d != 1]
    out_dims: list[int] = []
    out_strides: list[list[int]] = [[] for _ in stride_sets]
    for i in keep:
        d = dims[i]
        if out_dims and all(
            st[-1] == s[i] * d for st, s in zip(out_strides, stride_sets, strict=True)
        ):
            out_dims[-1] *= d
            for st, s in zip(out_strides, stride_sets, strict=True):
                st[-1] = s[i]
            continue
        out_dims.append(d)
        for st, s in zip(out_strides, stride_sets, strict=True):
            st.append(s[i])
    return out_dims, [tuple(s) for s in out_strides]


def optimized_body(body: Graph) -> Graph:
    """The graph a `scan` body runs as, once per step: optimized and fused, the
    same on both backends."""
    from tracegrad.passes import optimize
    from tracegrad.passes.fuse import fuse_elementwise

    return fuse_elementwise(optimize(body))


def ir_hash(graph: Graph) -> str:
    """A content name of the graph (its printed IR and its small consts' bytes)."""
    from tracegrad.ir.printer import format_graph

    text = format_graph(graph)
    h = hashlib.sha256(text.encode())
    for n in graph.nodes:  # consts the printer abridges still change literals
        if n.op == "const":
            v = np.asarray(n.attrs["value"])
            if v.size <= 1:
                h.update(v.tobytes() + v.dtype.str.encode())
    return h.hexdigest()[:16]


def widened_float16(graph: Graph) -> Graph:
    """A copy of `graph` computing in float32 where it has float16 (Numba has no
    float16 arrays)."""
    from tracegrad.passes.fuse import copy_graph

    wide = copy_graph(graph)
    for n in wide.nodes:
        if np.dtype(n.dtype) == np.float16:
            n.dtype = np.dtype(np.float32)
            if n.op == "const":
                n.attrs["value"] = np.asarray(n.attrs["value"], np.float32)
        if n.attrs.get("dtype") in ("float16", np.float16):
            n.attrs["dtype"] = "float32"
    return wide
