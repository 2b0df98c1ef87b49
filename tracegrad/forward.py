"""Forward mode on the IR: one graph computing outputs and their tangents.

`jvp_graph(graph, wrt)` replays `graph` into a fresh trace and, node by node,
applies each primitive's JVP rule (`jvp_rule(prim)`) to the tangents of
its operands. The rules are written in tracegrad ops, so applying them to
tracers records the tangent half into the same graph, next to the primal nodes
it reads (tag "jvp"); applied to arrays they compute, applied to eager tensors
they record eager ops. Its signature, as `autodiff.vjp_graph`'s:

    inputs:  the primal inputs, then one tangent per `wrt` input
    outputs: the original outputs, then one tangent per output (zeros where
             the output does not depend on a `wrt` input or is not a float)

A tangent of None means zero all along: nodes no tangent reaches cost nothing.
Loops, branches and calls (loops/primitives.py) have rules with a `joint` form that
computes primal and tangent in one loop, so the primal loop does not run twice.

Where the rule table gives no JVP, `derived_jvp` derives one from the VJP rules,
exactly (never a difference quotient):
- elementwise primitives have a diagonal Jacobian (up to broadcasting), so
  `J_i t_i = vjp_i(broadcast(t_i))`: the VJP rule applied to the tangent;
- any other primitive: `vjp_i` is linear in the cotangent `g`, and the gradient
  of `g -> <vjp_i(g), t_i>` is `J_i t_i` (the transpose of the transpose). The
  small graph of that pairing is traced and differentiated by reverse mode.

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x: tg.sum(tg.sin(x) * x), np.ones(3))
    >>> fwd = jvp_graph(g, wrt=[0])
    >>> from tracegrad.ir import interpret
    >>> out, tangent = interpret(fwd, np.array([0.0, 1.0, 2.0]), np.array([1.0, 0.0, 0.0]))
    >>> float(tangent)  # d/dx0 of sum(sin(x) x) at x0 = 0: sin(0) + 0 * cos(0)
    0.0
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node, attrs_key
from tracegrad.ops import core
from tracegrad.ops.core import REGISTRY, Aval, Primitive, TracegradError
from tracegrad.tracing import TraceContext, Tracer, active_contexts, node_source, output_node


class ForwardModeError(TracegradError):
    """A graph cannot be differentiated in forward mode as asked."""


# ------------------------------------------------------------------ the pass


def jvp_graph(
    graph: Graph, wrt: Sequence[int] | None = None, name: str | None = None, joint: bool = True
) -> Graph:
    """The forward-mode graph of `graph`: (primals, tangents of `wrt`) -> (outputs,
    output tangents). `wrt` defaults to every floating-point input. `joint=False`
    keeps every primal node apart from the tangent nodes (loops run twice), so
    that `partial_eval` can split the primal from the linear part.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.ir import interpret
    >>> fwd = jvp_graph(tg.trace(lambda x, y: x * y, np.ones(2), np.ones(2)))
    >>> interpret(fwd, np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.ones(2), np.zeros(2))
    (array([3., 8.]), array([3., 4.]))
    """
    if wrt is None:
        wrt = [k for k, n in enumerate(graph.inputs) if core.is_inexact(n.dtype)]
    for k in wrt:
        node = graph.inputs[k]
        if not core.is_inexact(node.dtype):
            raise ForwardModeError(
                f"jvp: input {node.attrs.get('name', k)} of {graph.name} has dtype {node.dtype}; "
                "tangents need floating-point inputs"
            )
    context = TraceContext(name or f"{graph.name}_jvp")
    with context.active():
        primals = [
            context.new_input(n.aval, n.attrs.get("name", f"arg{k}"))
            for k, n in enumerate(graph.inputs)
        ]
        tangents: list[Any] = [None] * len(graph.inputs)
        for k in wrt:
            node = graph.inputs[k]
            tangents[k] = context.new_input(node.aval, f"t_{node.attrs.get('name', k)}")
        if joint:
            outs, touts = jvp_apply(graph, primals, tangents, context)
        else:
            from tracegrad.autodiff import replay

            env = replay(graph, primals, context)
            seeds = {n.id: t for n, t in zip(graph.inputs, tangents, strict=True) if t is not None}
            tenv = tangent_pass(graph, env, seeds, context)
            outs = [env[n.id] for n in graph.outputs]
            touts = [tenv.get(n.id) for n in graph.outputs]
        for v in outs:
            context.graph.outputs.append(output_node(context, v))
        for v, o in zip(touts, outs, strict=True):
            context.graph.outputs.append(output_node(context, zeros_like_if_none(v, o)))
    return context.graph


def jvp_apply(
    graph: Graph,
    primals: Sequence[Any],
    tangents: Sequence[Any],
    context: TraceContext | None = None,
) -> tuple[list, list]:
    """Run `graph` on `primals` (any value kind) with `tangents` (None: zero);
    return (outputs, output tangents), tangents None where zero.

    Primal and tangent are computed node by node; a rule with a `joint` form
    (loops, branches, calls: `joint(primals, tangents, **attrs) -> (out, tangent)`)
    computes both in one loop instead of running the primal loop twice."""
    context = context if context is not None else _context_among(list(primals) + list(tangents))
    env = {n.id: v for n, v in zip(graph.inputs, primals, strict=True)}
    seeds = {n.id: t for n, t in zip(graph.inputs, tangents, strict=True) if t is not None}
    tenv = _propagate(graph, env, seeds, context, replaying=True)
    return [env[n.id] for n in graph.outputs], [tenv.get(n.id) for n in graph.outputs]


def tangent_pass(
    graph: Graph, env: dict[int, Any], seeds: dict[int, Any], context: TraceContext | None = None
) -> dict[int, Any]:
    """Push the tangents `seeds` (node id -> tangent) forward through `graph`,
    whose primal values are `env` (from `autodiff.replay`); return node id ->
    tangent for every node a tangent reaches. Running it again with other seeds
    reuses the primal values (jacfwd: one pass per basis vector)."""
    return _propagate(graph, env, seeds, context, replaying=False)


def _propagate(
    graph: Graph,
    env: dict[int, Any],
    seeds: dict[int, Any],
    context: TraceContext | None,
    replaying: bool,
) -> dict[int, Any]:
    """The forward-mode walk; with `replaying`, also fills `env` with primal values."""
    tenv = {node.id: _fit(seeds[node.id], node) for node in graph.inputs if node.id in seeds}
    for node in graph.nodes:
        if node.op in ("input", "const"):
            if replaying and node.id not in env:
                env[node.id] = _const_value(node, context)
            continue
        tangents = [tenv.get(i.id) for i in node.inputs]
        prim = REGISTRY[node.op]
        active = not (
            all(t is None for t in tangents) or prim.nondiff or not core.is_inexact(node.dtype)
        )
        operands = tuple(env[i.id] for i in node.inputs)
        rule = jvp_rule(prim) if active else None
        joint = getattr(rule, "joint", None) if replaying else None
        with node_source(node.source):
            if replaying and joint is None:
                env[node.id] = core.bind(prim, *operands, **node.attrs)
            if not active:
                continue
            with _tagging(context):
                if joint is not None:
                    env[node.id], t = joint(operands, tuple(tangents), **node.attrs)
                else:
                    t = rule(operands, tuple(tangents), env[node.id], **node.attrs)
        if t is not None:
            tenv[node.id] = _fit(t, node)
    return tenv


def _const_value(node: Node, context: TraceContext | None):
    value = node.attrs["value"]
    return value if context is None else Tracer(context, context.const_node(value))


def _tagging(context: TraceContext | None):
    """Tangent nodes get tag "jvp" (printed next to them)."""
    return context.tagging("jvp") if context is not None else _no_tagging()


class _no_tagging:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _context_among(values: Sequence[Any]) -> TraceContext | None:
    """The innermost active trace that any of `values` belongs to (None: no tracer)."""
    stack = active_contexts()
    best = None
    for v in values:
        if isinstance(v, Tracer) and v.context in stack:
            if best is None or stack.index(v.context) > stack.index(best):
                best = v.context
    return best


def _api():
    from tracegrad.ops import api

    return api


def _table():
    from tracegrad.ops import table

    return table


def _shape_dtype(value: Any) -> tuple[tuple, np.dtype]:
    aval = core.aval_of(value)
    return tuple(aval.shape), np.dtype(aval.dtype)


def _fit(t: Any, node: Node | Aval) -> Any:
    """A tangent as its primal's shape and dtype (rules may return a broadcastable
    shape or another float dtype)."""
    T = _table()
    shape, dtype = _shape_dtype(t)
    if shape != tuple(node.shape):
        t = T.broadcast_to(t, shape=tuple(node.shape))
    if dtype != np.dtype(node.dtype):
        if dtype.kind == "c" and np.dtype(node.dtype).kind != "c":
            t = T.REGISTRY["real"](t)  # a real primal's tangent is the real part
        t = T.astype(t, dtype=np.dtype(node.dtype).name)
    return t


def zeros_like_if_none(t: Any, primal: Any) -> Any:
    """`t`, or zeros shaped like `primal` (any value kind) for a None (zero) tangent."""
    if t is not None:
        return t
    if _is_static(primal):
        return np.zeros((), np.asarray(primal).dtype)
    return _table().full_like(primal, value=0)


def add_tangents(a: Any, b: Any) -> Any:
    """a + b, where None is zero."""
    if a is None:
        return b
    if b is None:
        return a
    return _table().add(a, b)


# ------------------------------------------------------- partial evaluation


def partial_eval(
    graph: Graph, unknown_inputs: Sequence[int], unknown_outputs: Sequence[int]
) -> tuple[Graph, Graph]:
    """Split `graph` for `linearize`: the nodes that do not depend on the inputs
    `unknown_inputs` (the tangents) run once, the rest run per call.

    Returns (known, rest):
      known: (the other inputs) -> (every output not in `unknown_outputs`, residuals)
      rest:  (residuals, the unknown inputs) -> (the `unknown_outputs`)
    Residuals are the known values the unknown nodes read (and known values that
    are themselves unknown outputs, e.g. a tangent that is zero).
    """
    unknown = {graph.inputs[k].id for k in unknown_inputs}
    for node in graph.nodes:
        if node.id not in unknown and any(i.id in unknown for i in node.inputs):
            unknown.add(node.id)
    residuals: list[Node] = []
    seen: set[int] = set()

    def need(node: Node) -> None:
        if node.id not in unknown and node.op != "const" and node.id not in seen:
            seen.add(node.id)
            residuals.append(node)

    for node in graph.nodes:
        if node.id in unknown:
            for i in node.inputs:
                need(i)
    for k in unknown_outputs:
        need(graph.outputs[k])
    known_inputs = [k for k in range(len(graph.inputs)) if k not in set(unknown_inputs)]
    known_outputs = [o for k, o in enumerate(graph.outputs) if k not in set(unknown_outputs)]
    known = _subgraph(
        graph,
        [graph.inputs[k] for k in known_inputs],
        known_outputs + residuals,
        lambda n: n.id not in unknown,
        f"{graph.name}_known",
    )
    rest = _subgraph(
        graph,
        residuals + [graph.inputs[k] for k in unknown_inputs],
        [graph.outputs[k] for k in unknown_outputs],
        lambda n: n.id in unknown,
        f"{graph.name}_linear",
    )
    return known, rest


def _subgraph(
    graph: Graph,
    inputs: Sequence[Node],
    outputs: Sequence[Node],
    keep: Callable[[Node], bool],
    name: str,
) -> Graph:
    """The nodes of `graph` that `keep` selects, fed by `inputs` (any nodes of
    `graph`, made inputs here), with `outputs`."""
    context = TraceContext(name)
    with context.active():
        env = {n.id: context.new_input(n.aval, n.attrs.get("name", f"r{n.id}")) for n in inputs}
        for node in graph.nodes:
            if node.id in env:
                continue
            if node.op == "const":
                env[node.id] = Tracer(context, context.const_node(node.attrs["value"]))
            elif node.op != "input" and keep(node):
                with node_source(node.source):
                    env[node.id] = core.bind(
                        REGISTRY[node.op], *[env[i.id] for i in node.inputs], **node.attrs
                    )
        for o in outputs:
            context.graph.outputs.append(output_node(context, env[o.id]))
    return context.graph


# ------------------------------------------------------- derived JVP rules


def derived_jvp(prim: Primitive) -> Callable:
    """A JVP rule derived from `prim`'s VJP rules (see the module doc)."""
    rules, make = (
        (_ELEMENTWISE, _elementwise_jvp)
        if prim.kind == "elementwise"
        else (_TRANSPOSED, _transposed_jvp)
    )
    rule = rules.get(prim.name)
    if rule is None:
        rule = rules[prim.name] = make(prim)
    return rule


_ELEMENTWISE: dict[str, Callable] = {}
_TRANSPOSED: dict[str, Callable] = {}


def _elementwise_jvp(prim: Primitive) -> Callable:
    def rule(primals, tangents, out, **attrs):
        shape, dtype = _shape_dtype(out)
        total = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            t = _fit(t, Aval(shape, dtype))  # the diagonal acts on the broadcast tangent
            contribution = prim.vjps[i](t, out, *primals, **attrs)
            if contribution is not None:
                total = add_tangents(total, contribution)
        return total

    rule.__name__ = f"{prim.name}_jvp_from_vjp"
    rule.__doc__ = f"{prim.name}: its vjp applied to the broadcast tangent (diagonal Jacobian)."
    return rule


def _transposed_jvp(prim: Primitive) -> Callable:
    def rule(primals, tangents, out, **attrs):
        joint, arg_positions = _transposed_graph(prim, primals, tangents, out, attrs)
        if joint is None:  # no operand with a tangent has a gradient
            return None
        api = _api()
        from tracegrad.autodiff import replay

        args = [api.zeros_like(out), out]
        args += [primals[k] for k in arg_positions]
        args += [t for t in tangents if t is not None]
        context = _context_among(args)
        env = replay(joint, args, context)
        return env[joint.outputs[-1].id]

    rule.__name__ = f"{prim.name}_jvp_by_transposition"
    rule.__doc__ = f"{prim.name}: the transpose of its (linear in g) vjp rules."
    return rule


_TRANSPOSED_GRAPHS: collections.OrderedDict[tuple, tuple] = collections.OrderedDict()
_MAX_TRANSPOSED_GRAPHS = 256
_TRANSPOSED_LOCK = threading.Lock()


def _is_static(value: Any) -> bool:
    return type(value) in (int, float, bool) or isinstance(value, np.generic)


def _transposed_graph(prim: Primitive, primals, tangents, out, attrs) -> tuple[Graph, list]:
    """The joint graph of `g -> sum_i <vjp_i(g), t_i>` with respect to g, traced
    once per (primitive, attrs, operand types). Inputs: g, out, the non-static
    primals, the non-None tangents; its last output is the JVP."""
    positions = [k for k, p in enumerate(primals) if not _is_static(p)]
    statics = tuple((k, type(p).__name__, repr(p)) for k, p in enumerate(primals) if _is_static(p))
    avals = tuple(core.aval_of(primals[k]) for k in positions)
    with_tangent = tuple(k for k, t in enumerate(tangents) if t is not None)
    t_avals = tuple(core.aval_of(tangents[k]) for k in with_tangent)
    out_aval = core.aval_of(out)
    try:
        key = (prim.name, attrs_key(attrs), statics, avals, with_tangent, t_avals, out_aval)
        hash(key)
    except TypeError:  # an attr without a hashable form: trace every time
        key = None
    if key is not None:
        with _TRANSPOSED_LOCK:
            if key in _TRANSPOSED_GRAPHS:
                _TRANSPOSED_GRAPHS.move_to_end(key)
                return _TRANSPOSED_GRAPHS[key], positions
    graph = _trace_pairing(prim, primals, positions, with_tangent, t_avals, out_aval, attrs)
    from tracegrad.autodiff import vjp_graph

    joint = (
        None
        if graph is None
        else vjp_graph(graph, wrt=[0], seed_ones=True, name=f"{prim.name}_jvp")
    )
    if key is not None:
        with _TRANSPOSED_LOCK:
            _TRANSPOSED_GRAPHS[key] = joint
            if len(_TRANSPOSED_GRAPHS) > _MAX_TRANSPOSED_GRAPHS:
                _TRANSPOSED_GRAPHS.popitem(last=False)
    return joint, positions


def _trace_pairing(prim, primals, positions, with_tangent, t_avals, out_aval, attrs) -> Graph:
    from tracegrad.autodiff import fit_cotangent

    T = _table()
    context = TraceContext(f"{prim.name}_pairing")
    graph = context.graph
    with context.active():
        g = context.new_input(out_aval, "g")
        out = context.new_input(out_aval, "out")
        ps = list(primals)
        for k in positions:
            ps[k] = context.new_input(core.aval_of(primals[k]), f"p{k}")
        ts = {k: context.new_input(a, f"t{k}") for k, a in zip(with_tangent, t_avals, strict=True)}
        batch = getattr(prim.vjps, "batch", None)
        if batch is not None:
            needed = [k in ts for k in range(len(ps))]
            cts = batch(needed, g, out, *ps, **attrs)
        else:
            cts = [prim.vjps[k](g, out, *ps, **attrs) for k in ts]
            cts = dict(zip(ts, cts, strict=True))
            cts = [cts.get(k) for k in range(len(ps))]
        total = None
        for k, t in ts.items():
            ct = cts[k]
            if ct is None:
                continue
            ct = fit_cotangent(ct, ps[k].node)
            term = T.sum_(T.mul(ct, t))
            total = term if total is None else T.add(total, term)
        if total is None:  # no operand with a tangent has a gradient
            return None
        graph.outputs.append(output_node(context, total))
    return graph


def clear_caches() -> None:
    """Forget the traced transposition graphs."""
    with _TRANSPOSED_LOCK:
        _TRANSPOSED_GRAPHS.clear()


def jvp_rule(prim) -> Callable:
    """The forward-mode rule of `prim`: the table's `jvp`, else one derived from its vjps
    (exact either way): an elementwise op's Jacobian is diagonal, so its vjp applied to
    the tangent is the JVP; any other op's JVP is the transpose of its (linear) vjp."""
    return prim.jvp if prim.jvp is not None else derived_jvp(prim)
