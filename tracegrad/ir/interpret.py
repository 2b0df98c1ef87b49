"""The NumPy reference interpreter: runs any graph node by node.

It calls each primitive's `impl` from the rule table, so it is the oracle the
tests hold passes and generated kernels against. It is slow by design (a
Python loop over nodes) and never used on the compiled hot path, except with
`backend="interpret"`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import REGISTRY, TracegradError


class InterpretError(TracegradError):
    """The interpreter met a graph it cannot run, or arguments that do not fit it."""


def interpret(graph: Graph, *arrays: Any) -> tuple[np.ndarray, ...]:
    """Run `graph` on `arrays` (one per graph input); return one ndarray per output.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((2,), np.dtype("float64")))
    >>> g.outputs.append(g.new_node("mul", (x, x), {}, x.aval))
    >>> interpret(g, np.array([2.0, 3.0]))
    (array([4., 9.]),)
    """
    if len(arrays) != len(graph.inputs):
        raise InterpretError(
            f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(arrays)}"
        )
    env: dict[int, np.ndarray] = {}
    for node, value in zip(graph.inputs, arrays, strict=True):
        env[node.id] = _check_input(node, value)
    for node in graph.nodes:
        if node.id in env:
            continue
        env[node.id] = _run_node(node, env)
    return tuple(env[n.id] for n in graph.outputs)


def _check_input(node: Node, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != node.shape:
        raise InterpretError(
            f"input {node.name} ({node.attrs.get('name')}) expects "
            f"{node.type_str()}, got shape {arr.shape}"
        )
    if arr.dtype != node.dtype:
        if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
            return np.asarray(value, dtype=node.dtype)  # Python scalars are weakly typed
        raise InterpretError(
            f"input {node.name} ({node.attrs.get('name')}) expects "
            f"{node.type_str()}, got dtype {arr.dtype}"
        )
    return arr


def _run_node(node: Node, env: dict[int, np.ndarray]) -> np.ndarray:
    if node.op == "const":
        return np.asarray(node.attrs["value"])
    if node.op == "input":
        raise InterpretError(f"{node.name} is an input node missing from graph.inputs")
    prim = REGISTRY.get(node.op)
    if prim is None:
        raise InterpretError(f"{node.name}: unknown op {node.op!r} (not in the rule table)")
    try:
        operands = [env[i.id] for i in node.inputs]
    except KeyError as exc:
        raise InterpretError(
            f"{node.name} = {node.op}: operand %{exc.args[0]} is not defined before it"
        ) from None
    result = np.asarray(prim.impl(*operands, **node.attrs))
    if result.shape != node.shape:
        raise InterpretError(
            f"{node.name} = {node.op}: impl returned shape {result.shape}, "
            f"the graph says {node.type_str()}"
        )
    if result.dtype != node.dtype:
        # NumPy's promotion of 0-d operands can differ from the shape rule's; the
        # graph's dtype is the contract every backend follows.
        result = result.astype(node.dtype)
    return result
