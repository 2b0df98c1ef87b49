"""Constant folding: evaluate, at compile time, nodes whose operands are known.

A node folds when every operand is a const, or a broadcast of a const, by
running its primitive's NumPy `impl`. To keep graphs (and generated code)
small, a folded value is stored:
  - as a const when it has at most `max_elements` elements;
  - as `broadcast_to(scalar const)` when all its elements are equal, whatever
    its size (a scalar inlines into a loop; a big array would be a kernel input);
  - not at all otherwise (the node stays).
Uniform elementwise ops and single-operand shape ops on a broadcast scalar are
evaluated on the scalar alone, so `tanh(broadcast_to(1.0, (1000, 1000)))`
folds without making a million-element array. Uniform consts themselves are
put in that canonical `broadcast_to(scalar)` form.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> g = Graph()
    >>> two = g.add_const(np.float32(2.0))
    >>> g.outputs.append(g.new_node("mul", (two, two), {}, two.aval))
    >>> fold(g).outputs[0].attrs["value"]
    array(4., dtype=float32)
"""

from __future__ import annotations

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import REGISTRY
from tracegrad.passes.rewrite import Builder, RewriteAbort, rewrite_graph, uniform_scalar

# Largest folded array kept as a const (elements).
MAX_FOLD_ELEMENTS = 4096

# One-operand ops that only move or repeat elements: on a uniform operand
# their result is uniform with the same value.
UNIFORM_PRESERVING_OPS = frozenset({"reshape", "transpose", "broadcast_to", "getitem"})

# Ops that must never run at compile time (none yet: every primitive is pure).
NEVER_FOLD: frozenset[str] = frozenset()


def fold(graph: Graph, max_elements: int = MAX_FOLD_ELEMENTS) -> Graph:
    """A copy of `graph` with every foldable node replaced by its value."""
    return fold_counted(graph, max_elements)[0]


def fold_counted(graph: Graph, max_elements: int = MAX_FOLD_ELEMENTS) -> tuple[Graph, int]:
    """`fold` plus the number of nodes folded."""
    return rewrite_graph(graph, lambda node, b: fold_node(node, b, max_elements))


def fold_node(node: Node, b: Builder, max_elements: int) -> Node | None:
    if node.op == "const":
        return canonical_const(node, b)
    if node.op in NEVER_FOLD or not node.inputs or node.op not in REGISTRY:
        return None
    if not all(is_known(i) for i in node.inputs):
        return None
    if node.op == "broadcast_to" and node.inputs[0].op == "const" and node.inputs[0].ndim == 0:
        return None  # already the canonical form of a uniform value
    prim = REGISTRY[node.op]
    scalars = [scalar_of(i) for i in node.inputs]
    if all(s is not None for s in scalars) and prim.kind == "elementwise":
        return uniform_result(node, b, evaluate(node, scalars))
    if len(scalars) == 1 and scalars[0] is not None and node.op in UNIFORM_PRESERVING_OPS:
        return uniform_result(node, b, scalars[0])
    if max(i.size for i in node.inputs) > max_elements:
        return None  # too big to evaluate now; the uniform cases were handled above
    value = evaluate(node, [materialize(i) for i in node.inputs])
    if value.shape != node.shape:
        return None
    scalar = uniform_scalar(value) if value.size > 1 else None
    if scalar is not None:
        return uniform_result(node, b, scalar)
    if value.size > max_elements:
        return None
    return b.const(value, node.dtype)


def canonical_const(node: Node, b: Builder) -> Node | None:
    """A uniform const with more than one element -> broadcast_to(scalar const)."""
    value = node.attrs["value"]
    if value.size <= 1:
        return None
    scalar = uniform_scalar(value)
    if scalar is None:
        return None
    return b.emit("broadcast_to", b.const(scalar, node.dtype), shape=node.shape)


def is_known(node: Node) -> bool:
    return node.op == "const" or (node.op == "broadcast_to" and node.inputs[0].op == "const")


def scalar_of(node: Node) -> np.ndarray | None:
    """The one value filling `node`, when it is a size-1 const or a broadcast of one."""
    source = node.inputs[0] if node.op == "broadcast_to" else node
    value = source.attrs["value"]
    return value.reshape(()) if value.size == 1 else None


def materialize(node: Node) -> np.ndarray:
    if node.op == "broadcast_to":
        return np.broadcast_to(node.inputs[0].attrs["value"], node.shape)
    return node.attrs["value"]


def evaluate(node: Node, operands: list[np.ndarray]) -> np.ndarray:
    """Run the node's impl; any failure means "do not fold" (it will fail at run time)."""
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(REGISTRY[node.op].impl(*operands, **node.attrs))
        return value.astype(node.dtype, copy=False)
    except Exception as exc:
        raise RewriteAbort(f"cannot fold {node.op}: {exc}") from None


def uniform_result(node: Node, b: Builder, scalar: np.ndarray) -> Node:
    """`scalar` filling the node's shape: a const if it has <= 1 element, else a broadcast."""
    if np.size(scalar) != 1:
        raise RewriteAbort("not a scalar")
    value = np.asarray(scalar, dtype=node.dtype).reshape(())
    if node.size == 0:
        return b.const(np.empty(node.shape, node.dtype), node.dtype)
    if node.size == 1:
        return b.const(value.reshape(node.shape), node.dtype)
    return b.emit("broadcast_to", b.const(value, node.dtype), shape=node.shape)
