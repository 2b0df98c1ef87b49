"""Reverse mode on the IR: one joint forward + backward graph.

`vjp_graph(graph, wrt)` replays `graph` into a fresh trace (the forward half),
then walks its nodes in reverse and applies each primitive's vjp rules to
tracers. The rules are written in tracegrad ops, so applying them records the
backward half into the same graph: forward intermediates (`out`, operands) are
shared, not recomputed. Backward nodes carry tag "bwd".

The joint graph's signature is explicit (as in AOTAutograd's `create_joint`):

    inputs:  the primal inputs, then one cotangent per differentiated output
             (or none: `seed_ones=True` seeds scalar outputs with 1)
    outputs: the original outputs, then one gradient per `wrt` input

Broadcasting is undone once, here (`sum_to_shape`), and cotangents are cast to
their operand's dtype once, here, for all ops.

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x: tg.sum(x * x), np.ones(3))
    >>> joint = vjp_graph(g, wrt=[0], seed_ones=True)
    >>> from tracegrad.ir import interpret
    >>> interpret(joint, np.array([1.0, 2.0, 3.0]))
    (array(14.), array([2., 4., 6.]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops import core
from tracegrad.ops.core import REGISTRY, TracegradError
from tracegrad.tracing import TraceContext, Tracer, node_source


class AutodiffError(TracegradError):
    """A graph cannot be differentiated as asked."""


def replay(
    graph: Graph, args: Sequence[Any], context: TraceContext | None = None
) -> dict[int, Any]:
    """Re-apply every node of `graph` to `args` with `bind`; return node id -> value.

    With tracers as `args` this inlines the graph into their trace; with eager
    tensors it records eager ops; with arrays it computes values. Given the
    trace `context`, consts stay const nodes there (nothing is folded into big
    arrays at trace time).
    """
    if len(args) != len(graph.inputs):
        raise AutodiffError(f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(args)}")
    env: dict[int, Any] = {n.id: a for n, a in zip(graph.inputs, args, strict=True)}
    for node in graph.nodes:
        if node.id in env:
            continue
        if node.op == "const":
            value = node.attrs["value"]
            env[node.id] = value if context is None else Tracer(context, context.const_node(value))
            continue
        prim = REGISTRY[node.op]
        with node_source(node.source):
            env[node.id] = core.bind(prim, *[env[i.id] for i in node.inputs], **node.attrs)
    return env


def vjp_graph(
    graph: Graph,
    wrt: Sequence[int],
    diff_outputs: Sequence[int] | None = None,
    seed_ones: bool = False,
    name: str | None = None,
) -> Graph:
    """The joint forward + backward graph of `graph`.

    wrt:          indices into `graph.inputs` to differentiate with respect to.
    diff_outputs: indices into `graph.outputs` that receive cotangents (default:
                  every floating-point output).
    seed_ones:    seed each differentiated output with 1 (they must be scalars)
                  instead of taking cotangent inputs.
    """
    if diff_outputs is None:
        diff_outputs = [i for i, n in enumerate(graph.outputs) if core.is_inexact(n.dtype)]
    for i in wrt:
        node = graph.inputs[i]
        if not np.issubdtype(node.dtype, np.inexact):
            raise AutodiffError(
                f"cannot differentiate with respect to input {node.attrs.get('name')} of dtype "
                f"{node.dtype}: gradients need floating-point inputs"
            )
    context = TraceContext(name or graph.name)
    with context.active():
        primals = [
            context.new_input(n.aval, n.attrs.get("name", f"arg{k}"))
            for k, n in enumerate(graph.inputs)
        ]
        env = replay(graph, primals, context)
        outputs = [graph.outputs[i] for i in diff_outputs]
        if seed_ones:
            seeds = [_seed_one(context, node) for node in outputs]
        else:
            seeds = [
                context.new_input(node.aval, f"ct_{_output_name(graph, i)}")
                for i, node in zip(diff_outputs, outputs, strict=True)
            ]
        by_id: dict[int, Any] = {}
        for node, seed in zip(outputs, seeds, strict=True):  # one node returned twice gets both
            prev = by_id.get(node.id)
            by_id[node.id] = seed if prev is None else core.bind(REGISTRY["add"], prev, seed)
        grads = backward_pass(graph, env, context, by_id, wrt)
    joint = context.graph
    joint.vjp_origin = context.vjp_origin  # for error messages (check_finite)
    for node in graph.outputs:
        joint.outputs.append(_node_of(context, env[node.id]))
    for _, g in zip(wrt, grads, strict=True):
        joint.outputs.append(_node_of(context, g))
    return joint


def _output_name(graph: Graph, index: int) -> str:
    return "out" if len(graph.outputs) == 1 else f"out{index}"


def _seed_one(context: TraceContext, node: Node):
    if node.shape != ():
        raise AutodiffError(f"seeding a gradient of 1 needs a scalar output, got {node.type_str()}")
    # A const node, not an ndarray: rules applied to it then record nodes instead
    # of folding into full-size constant arrays at trace time.
    with context.tagging("bwd"):
        return Tracer(context, context.const_node(np.ones((), node.dtype)))


def _node_of(context: TraceContext, value: Any) -> Node:
    if isinstance(value, Tracer):
        return value.node
    return context.const_node(np.asarray(value))


def backward_pass(
    graph: Graph,
    env: dict[int, Any],
    context: TraceContext,
    seeds: dict[int, Any],
    wrt: Sequence[int],
) -> list[Any]:
    """Propagate cotangents from `seeds` (node id -> cotangent) back through
    `graph`, whose forward values are `env`; return one gradient per `wrt` input."""
    needs = _needs_gradient(graph, {graph.inputs[i].id for i in wrt})
    cotangents: dict[int, Any] = {nid: ct for nid, ct in seeds.items() if nid in needs}
    with context.tagging("bwd"):
        for node in reversed(graph.nodes):
            ct = cotangents.pop(node.id, None) if node.op != "input" else None
            if ct is None or node.op == "const":
                continue
            _propagate(node, ct, env, needs, cotangents)
        grads = []
        for i in wrt:
            node = graph.inputs[i]
            ct = cotangents.get(node.id)
            if ct is None:  # the output does not depend on this input
                zero = Tracer(context, context.const_node(np.zeros((), node.dtype)))
                ct = _api().broadcast_to(zero, node.shape)
            grads.append(ct)
    return grads


def _propagate(
    node: Node, ct: Any, env: dict[int, Any], needs: set[int], cotangents: dict[int, Any]
) -> None:
    prim = REGISTRY[node.op]
    operands = [env[i.id] for i in node.inputs]
    batch = getattr(prim.vjps, "batch", None)  # one pass for all operands (PerOperand)
    if batch is not None:
        needed = [operand.id in needs for operand in node.inputs]
        with node_source(node.source, vjp_of=f"{node.op} {node.name}"):
            batched = batch(needed, ct, env[node.id], *operands, **node.attrs)
    for k, operand in enumerate(node.inputs):
        if operand.id not in needs:
            continue
        rule = _vjp_rule(prim, k) if batch is None else (lambda *a, _k=k, **kw: batched[_k])
        if rule is None:
            continue
        with node_source(node.source, vjp_of=f"{node.op} {node.name}"):
            contribution = rule(ct, env[node.id], *operands, **node.attrs)
            if contribution is None:
                continue
            contribution = fit_cotangent(contribution, operand)
            previous = cotangents.get(operand.id)
            cotangents[operand.id] = (
                contribution
                if previous is None
                else core.bind(REGISTRY["add"], previous, contribution)
            )


def _vjp_rule(prim, k: int):
    # `vjps` is a tuple, or a PerOperand object for variadic ops (index, no len()).
    try:
        return prim.vjps[k]
    except IndexError:
        if isinstance(prim.vjps, tuple) and not prim.vjps:
            raise AutodiffError(
                f"{prim.name} has no vjp rule, so it cannot be differentiated"
            ) from None
        return None


def fit_cotangent(ct: Any, operand: Node) -> Any:
    """Sum a broadcast cotangent back to the operand's shape and cast it to its dtype."""
    api = _api()
    if tuple(np.shape(ct)) != operand.shape:
        ct = (
            api.sum_to_shape(ct, operand.shape)
            if hasattr(api, "sum_to_shape")
            else _table_sum_to_shape(ct, operand.shape)
        )
    ct_dtype = np.dtype(_dtype_of(ct))
    if ct_dtype != operand.dtype:
        if ct_dtype.kind == "c" and operand.dtype.kind != "c":  # JAX: a real operand's
            ct = api.real(ct)  # cotangent is the real part (the transpose of x -> x + 0i)
        ct = api.astype(ct, operand.dtype)
    return ct


def _table_sum_to_shape(ct, shape):
    from tracegrad.ops.table import sum_to_shape

    return sum_to_shape(ct, shape)


def _dtype_of(value: Any):
    dtype = getattr(value, "dtype", None)
    return dtype if dtype is not None else np.asarray(value).dtype


def _needs_gradient(graph: Graph, sources: set[int]) -> set[int]:
    """Ids of nodes whose value depends differentiably on a `sources` input."""
    needs = set(sources)
    for node in graph.nodes:
        if node.op in ("input", "const") or node.id in needs:
            continue
        prim = REGISTRY[node.op]
        if prim.nondiff or not np.issubdtype(node.dtype, np.inexact):
            continue
        if any(i.id in needs for i in node.inputs):
            needs.add(node.id)
    return needs


def _api():
    from tracegrad.ops import api

    return api
