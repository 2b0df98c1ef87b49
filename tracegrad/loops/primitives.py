"""Structured control flow in the rule table: scan, cond and while.

Each primitive holds its body as a sub-graph (an IR `Graph` in its attrs),
traced once however many times it runs. Node inputs and body inputs line up:

    scan:  inputs (carry..., xs..., consts...); body (carry, x_t, consts) -> (carry', y_t)
    cond:  inputs (pred, operands...);          true/false: (operands) -> outs
    while: inputs (carry..., consts...);        cond: (carry, consts) -> bool[]
                                                body: (carry, consts) -> carry'

IR nodes hold one array, so a control-flow node's value is its results packed
into one flat array of one dtype (`packing`); the front end
(tracegrad/loops/__init__.py) slices it apart with ordinary getitem/reshape nodes.

Reverse mode:
- scan: a forward scan that also emits each step's starting carry and the step's
  values that are costly to recompute (`_choose_saved`: matmul, transcendental,
  reduction and loop outputs that the VJP reads), then one reversed scan over the
  body's VJP, which reads those and recomputes only the cheap rest (JAX's scan
  saves every residual; `scan(..., remat=True)` saves carries only and recomputes
  the whole step, as `jax.checkpoint` on the body does). The passes merge the
  residual-emitting scan with the primal one (passes/loops.py): one forward.
  The backward step computes only the gradients asked for (a weight gradient
  sum_t P_t^T @ D_t can become one GEMM over the stacked steps after the loop:
  `_MAX_STACKED_ELEMENTS`, off by default).
- cond: a cond over the two branches' VJPs: only the taken branch runs.
- while: no reverse mode (its trip count is data), as in JAX.

Forward mode (each primitive's `jvp`, tracegrad/forward.py): a scan over the
body's JVP (carry and tangent carry side by side), a cond over the branches'
JVPs, a while loop over the body's JVP (forward mode needs no residuals, so
while loops have it), a call of the called graph's JVP; a `custom_jvp`
function calls its user rule, a `custom_vjp` one transposes its `bwd`.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph
from tracegrad.ir.printer import graph_digest  # noqa: F401  (re-exported for the passes)
from tracegrad.ops.core import Aval, DTypeError, ShapeError, TracegradError, primitive
from tracegrad.ops.rulekit import PerOperand, as_aval

# The primitives that hold sub-graphs, and the attrs that hold them (passes run inside
# them; the code generator compiles each body on its own).
SUBGRAPH_ATTRS = {
    "scan": ("body",),
    "while": ("cond", "body"),
    "cond": ("true_branch", "false_branch"),
    "call": ("graph",),
    "custom_vjp_call": ("fun", "fwd", "bwd"),
}


class ControlFlowError(TracegradError, TypeError):
    """A loop or branch whose parts do not fit together (carry types, branch outputs)."""


# ------------------------------------------------------------------- packing


def packed_layout(avals: Sequence[Aval]) -> tuple[np.dtype, list[tuple[int, int, tuple, np.dtype]]]:
    """The one dtype and [(offset, size, shape, dtype)] of results packed into one
    array. Results of several dtypes travel as float64, which holds every bool,
    int32 and float32 exactly, and int64 up to 2**53 (checked when packing)."""
    dtypes = {np.dtype(a.dtype) for a in avals}
    for d in dtypes:
        if d.kind not in "biuf":
            raise ControlFlowError(
                f"loops and branches carry bool, integer or real floating-point values, got {d}"
            )
    dtype = dtypes.pop() if len(dtypes) == 1 else np.dtype(np.float64)
    slots, offset = [], 0
    for a in avals:
        size = int(np.prod(a.shape, dtype=np.int64))
        slots.append((offset, size, tuple(a.shape), np.dtype(a.dtype)))
        offset += size
    return dtype, slots


_EXACT_IN_FLOAT64 = 2**53


def pack(values: Sequence[np.ndarray], dtype) -> np.ndarray:
    if not values:
        return np.zeros(0, dtype)
    parts = []
    for v in values:
        v = np.asarray(v)
        if (
            dtype.kind == "f"
            and v.dtype.kind in "iu"
            and v.dtype.itemsize == 8
            and v.size
            and np.max(np.abs(v.astype(np.float64))) >= _EXACT_IN_FLOAT64
        ):
            raise ControlFlowError(
                f"a loop carries an {v.dtype} value of magnitude >= 2**53 next to values of "
                "other dtypes; tracegrad packs them as float64, which would round it. Carry "
                "it in a loop of its own, or as float64"
            )
        parts.append(v.astype(dtype, copy=False).ravel())
    return np.concatenate(parts)


def unpack(packed, avals: Sequence[Aval]) -> list:
    """Slices of a packed value (arrays or tracers), reshaped and cast back."""
    from tracegrad.ops import api

    dtype, slots = packed_layout(avals)
    out = []
    for off, size, shape, part_dtype in slots:
        part = api.reshape(packed[off : off + size], shape)
        out.append(part if part_dtype == dtype else api.astype(part, part_dtype))
    return out


# --------------------------------------------------------------- running bodies

_RUNNERS: weakref.WeakKeyDictionary[Graph, Any] = weakref.WeakKeyDictionary()


def body_runner(body: Graph):
    """A callable running `body` on arrays: the NumPy interpreter (loop bodies
    are small; each step calls it once)."""
    run = _RUNNERS.get(body)
    if run is None:
        from tracegrad.ir.interpret import interpret

        run = _RUNNERS[body] = functools.partial(interpret, body)
    return run


# ---------------------------------------------------------------------- scan


def _scan_avals(body: Graph, length: int, n_carry: int) -> list[Aval]:
    outs = body.outputs
    return [o.aval for o in outs[:n_carry]] + [
        Aval((length,) + tuple(o.shape), o.dtype) for o in outs[n_carry:]
    ]


def _scan_rule(*operands, body, length, reverse, n_carry, n_xs, remat=False):
    avals = [as_aval(v) for v in operands]
    if len(avals) != len(body.inputs):
        raise ShapeError(f"scan: the body takes {len(body.inputs)} inputs, got {len(avals)}")
    for k, (a, node) in enumerate(zip(avals, body.inputs, strict=True)):
        want = node.shape if not n_carry <= k < n_carry + n_xs else (length,) + node.shape
        if tuple(a.shape) != tuple(want) or np.dtype(a.dtype) != node.dtype:
            raise ShapeError(
                f"scan: operand {k} is {a}, the body expects {Aval(tuple(want), node.dtype)}"
            )
    dtype, slots = packed_layout(_scan_avals(body, length, n_carry))
    total = sum(slot[1] for slot in slots)
    return Aval((total,), dtype)


def _scan_impl(*operands, body, length, reverse, n_carry, n_xs, remat=False):
    run = body_runner(body)
    carry = list(operands[:n_carry])
    xs = operands[n_carry : n_carry + n_xs]
    consts = operands[n_carry + n_xs :]
    y_nodes = body.outputs[n_carry:]
    ys = [np.empty((length,) + tuple(n.shape), n.dtype) for n in y_nodes]
    for t in range(length):
        i = length - 1 - t if reverse else t
        outs = run(*carry, *[x[i] for x in xs], *consts)
        carry = list(outs[:n_carry])
        for y, o in zip(ys, outs[n_carry:], strict=True):
            y[i] = o
    dtype, _ = packed_layout(_scan_avals(body, length, n_carry))
    return pack(carry + ys, dtype)


def _remat_attr(remat: bool) -> dict:
    """The scan node attr of `scan(..., remat=True)`: present only when set, so the
    graphs (and cache keys) of ordinary scans do not change."""
    return {"remat": True} if remat else {}


def _is_float(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating)


_HISTORY_BASE: weakref.WeakKeyDictionary[Graph, weakref.ref] = weakref.WeakKeyDictionary()


def history_base(graph: Graph) -> Graph | None:
    """The body whose history body `graph` is (see passes/loops.py), else None."""
    ref = _HISTORY_BASE.get(graph)
    return ref() if ref is not None else None


def clear_caches() -> None:
    """Forget the reverse- and forward-mode graphs built for bodies (tracegrad.clear_caches)."""
    _scan_backward_parts.cache_clear()
    _cond_backward_branch.cache_clear()
    _jvp_of.cache_clear()
    _scan_jvp_body.cache_clear()
    _while_jvp_graphs.cache_clear()
    _RUNNERS.clear()
    from tracegrad import forward

    forward.clear_caches()


def residual_bytes(graph: Graph) -> int:
    """Memory that the residual-keeping scans of `graph` store for reverse mode:
    length x (each step's starting carries + the saved intermediates, see
    `_scan_backward_parts`)."""
    total = 0
    for node in graph.nodes:
        if node.op == "scan" and history_base(node.attrs["body"]) is not None:
            history = node.attrs["body"]
            n_kept = _HISTORY_KEPT.get(history, node.attrs["n_carry"])
            kept = history.outputs[len(history.outputs) - n_kept :]
            per_step = sum(n.size * n.dtype.itemsize for n in kept)
            total += node.attrs["length"] * per_step
    return total


# history body -> how many of its last outputs are residuals (carries + saved values)
_HISTORY_KEPT: weakref.WeakKeyDictionary[Graph, int] = weakref.WeakKeyDictionary()


def inherit_history(old: Graph, new: Graph) -> None:
    """`new` (an optimized copy of the history body `old`, same outputs) keeps its
    record, so `residual_bytes` still counts it."""
    base = history_base(old)
    if base is not None:
        _HISTORY_BASE[new] = weakref.ref(base)
        if old in _HISTORY_KEPT:
            _HISTORY_KEPT[new] = _HISTORY_KEPT[old]


# Elementwise ops whose values reverse mode saves per step rather than recomputing
# (transcendentals: many cycles per element); matmuls, reductions and the "other"
# kind (softmax, solves, nested loops, ...) are saved too. Cheap elementwise ops,
# shape ops and indexing are recomputed from the saved values and the carries.
_SAVED_ELEMENTWISE = frozenset(
    {
        "exp",
        "expm1",
        "log",
        "log1p",
        "tanh",
        "sigmoid",
        "sin",
        "cos",
        "arcsin",
        "arccos",
        "arctan",
        "arctan2",
        "pow",
        "sqrt",
    }
)


def _worth_saving(node) -> bool:
    """Save `node`'s per-step value for the backward scan instead of recomputing it
    (the rule of `jax.checkpoint_policies.dots_saveable`, widened to transcendentals)."""
    from tracegrad.ops.core import REGISTRY

    if node.op in ("input", "const") or not _is_float(node.dtype):
        return False
    prim = REGISTRY[node.op]
    if prim.nondiff:
        return False
    return prim.kind in ("matmul", "reduction", "other") or node.op in _SAVED_ELEMENTWISE


def _step_varying(body: Graph, n_carry: int, n_xs: int) -> set[int]:
    """Ids of body nodes that depend on the carry or x_t (the others are the same every
    step: saving them per step would only cost memory)."""
    varying = {n.id for n in body.inputs[: n_carry + n_xs]}
    for node in body.nodes:
        if any(i.id in varying for i in node.inputs):
            varying.add(node.id)
    return varying


def _backward_body(
    body: Graph, n_carry: int, n_xs: int, saved: Sequence, wanted: frozenset, max_stacked: int = 0
):
    """The backward step: inputs (ct of carry', acc of const grads | carry_t, x_t,
    ct of y_t, saved values | consts), outputs (ct of carry, acc + const grads, ct
    of x_t; only for the consts and xs in `wanted`, input positions: a gradient
    nobody asked for costs a GEMM per step). The body's forward nodes in `saved`
    are inputs; the rest of the forward is replayed where the VJP reads it.
    A const gradient of the form P_t^T @ D_t or sum(D_t, axis=0), P_t a carry or
    x_t, is not accumulated: the step emits D_t (if it has at most `max_stacked`
    elements) and the caller makes one GEMM over all steps (`_hoistable`).
    Returns (graph, {body node id: graph node} of the replayed forward values,
    float positions of (carries, accumulated consts, xs) with an output, hoisted
    [(const position, kind, per-step source, index of its D output)])."""
    from tracegrad.autodiff import backward_pass
    from tracegrad.ops import api
    from tracegrad.tracing import TraceContext, Tracer, output_node

    n_in = len(body.inputs)
    float_in = [k for k, n in enumerate(body.inputs) if _is_float(n.dtype)]
    float_out = [k for k, n in enumerate(body.outputs) if _is_float(n.dtype)]
    float_carry = [k for k in range(n_carry) if _is_float(body.inputs[k].dtype)]
    consts_float = [k for k in float_in if k >= n_carry + n_xs and k in wanted]
    xs_float = [k for k in float_in if n_carry <= k < n_carry + n_xs and k in wanted]
    wrt = float_carry + consts_float + xs_float
    bctx = TraceContext(f"{body.name}_vjp")
    with bctx.active():
        ct_carry = [
            bctx.new_input(body.outputs[k].aval, f"ct_carry{k}") for k in float_out if k < n_carry
        ]
        acc = [bctx.new_input(body.inputs[k].aval, f"acc{k}") for k in consts_float]
        carry_t = [bctx.new_input(n.aval, f"carry{k}") for k, n in enumerate(body.inputs[:n_carry])]
        x_t = [bctx.new_input(body.inputs[k].aval, f"x{k}") for k in range(n_carry, n_carry + n_xs)]
        ct_y = [bctx.new_input(body.outputs[k].aval, f"ct_y{k}") for k in float_out if k >= n_carry]
        res = [bctx.new_input(n.aval, f"saved{k}") for k, n in enumerate(saved)]
        consts = [
            bctx.new_input(body.inputs[k].aval, f"const{k}") for k in range(n_carry + n_xs, n_in)
        ]
        env = _replay_around(
            body, carry_t + x_t + consts, {n.id: r for n, r in zip(saved, res, strict=True)}, bctx
        )
        seeds: dict = {}
        for k, ct in zip(float_out, ct_carry + ct_y, strict=True):
            nid = body.outputs[k].id  # one node returned twice gets both cotangents
            seeds[nid] = ct if nid not in seeds else api.add(seeds[nid], ct)
        grads = dict(zip(wrt, backward_pass(body, env, bctx, seeds, wrt), strict=True))
        per_step = {t.node.id: ("carry", j) for j, t in enumerate(carry_t)}
        per_step.update({t.node.id: ("x", j) for j, t in enumerate(x_t)})
        kept, hoisted, d_nodes = [], [], []
        for a, k in zip(acc, consts_float, strict=True):
            plan = _hoistable(grads[k], per_step, max_stacked)
            if plan is None:
                kept.append((a, k))
                continue
            kind, src, d = plan
            if d not in d_nodes:
                d_nodes.append(d)
            hoisted.append((k, kind, src, d_nodes.index(d)))
        outs = [grads[k] for k in float_carry]
        outs += [api.add(a, grads[k]) for a, k in kept]
        outs += [grads[k] for k in xs_float]
        for v in outs:
            bctx.graph.outputs.append(
                output_node(bctx, v if isinstance(v, Tracer) else np.asarray(v))
            )
        bctx.graph.outputs.extend(d_nodes)
    graph = bctx.graph
    for a, k in zip(acc, consts_float, strict=True):
        if all(k != kk for _, kk in kept):  # hoisted: no accumulator carry
            graph.inputs.remove(a.node)
            graph.nodes.remove(a.node)
    forward = {nid: v.node for nid, v in env.items() if isinstance(v, Tracer) and v.context is bctx}
    return graph, forward, (float_carry, [k for _, k in kept], xs_float, hoisted)


def _hoistable(grad, per_step: dict, max_stacked: int):
    """How a const's per-step gradient sums over the steps in one operation: ("matmul",
    source, D) for P_t^T @ D_t with P_t the per-step input `source` (sum over t =
    P^T @ D with the steps stacked along the rows: one large GEMM instead of a
    small one and an accumulation per step), ("sum", None, D) for sum(D_t, axis=0);
    else None."""
    node = getattr(grad, "node", None)
    if node is None or max_stacked <= 0:
        return None
    if node.op == "matmul" and len(node.inputs) == 2:
        t, d = node.inputs
        if (
            t.op == "transpose"
            and tuple(t.attrs.get("axes") or ()) == (1, 0)
            and t.inputs[0].id in per_step
            and len(d.shape) == 2
            and d.dtype == node.dtype
            and d.size <= max_stacked
        ):
            return "matmul", per_step[t.inputs[0].id], d
    if (
        node.op == "sum"
        and node.attrs.get("keepdims") is False
        and tuple(np.atleast_1d(node.attrs.get("axis", ()))) == (0,)
        and len(node.inputs[0].shape) == 2
        and node.inputs[0].dtype == node.dtype
        and node.inputs[0].size <= max_stacked
    ):
        return "sum", None, node.inputs[0]
    return None


def _replay_around(body: Graph, args: Sequence, known: dict, ctx) -> dict:
    """`replay` of `body` into `ctx`, except the nodes in `known` (id -> value)."""
    from tracegrad.ops import core
    from tracegrad.ops.core import REGISTRY
    from tracegrad.tracing import Tracer, node_source

    env: dict = {n.id: a for n, a in zip(body.inputs, args, strict=True)}
    env.update(known)
    for node in body.nodes:
        if node.id in env:
            continue
        if node.op == "const":
            env[node.id] = Tracer(ctx, ctx.const_node(node.attrs["value"]))
            continue
        with node_source(node.source):
            env[node.id] = core.bind(
                REGISTRY[node.op], *[env[i.id] for i in node.inputs], **node.attrs
            )
    return env


def _choose_saved(body: Graph, n_carry: int, n_xs: int, wanted: frozenset) -> list:
    """The body's forward nodes whose per-step values the backward scan reads from
    the forward scan: walking the recomputing backward step from its outputs, each
    forward value it needs that is worth saving (`_worth_saving`) and changes per
    step; the walk stops there (what only feeds a saved value is not recomputed)."""
    graph, forward, _ = _backward_body(body, n_carry, n_xs, [], wanted)
    body_of = {}
    for nid, node in forward.items():
        body_of.setdefault(node.id, nid)
    by_id = {n.id: n for n in body.nodes}
    varying = _step_varying(body, n_carry, n_xs)
    live = {n.id for n in graph.outputs}
    saved = set()
    for node in reversed(graph.nodes):
        if node.id not in live:
            continue
        nid = body_of.get(node.id)
        if nid is not None and nid in varying and _worth_saving(by_id[nid]):
            saved.add(nid)
            continue
        live.update(i.id for i in node.inputs)
    return [n for n in body.nodes if n.id in saved]


@functools.lru_cache(maxsize=256)
def _scan_backward_parts(
    body: Graph,
    n_carry: int,
    n_xs: int,
    remat: bool = False,
    wanted: frozenset | None = None,
    length: int = 0,
):
    """(history body, backward body, float positions, where each saved value is among
    the history scan's results) for reverse mode of a scan with this body; built
    once per body.

    The history body is the forward body that also emits the carry it started from
    and the values the backward step reads instead of recomputing (`_choose_saved`;
    none with `remat`: then the backward step recomputes the forward from the carry,
    as `jax.checkpoint` on the body does)."""
    from tracegrad.autodiff import replay
    from tracegrad.ir.clone import pruned_graph
    from tracegrad.tracing import TraceContext, output_node

    if wanted is None:  # every gradient
        wanted = frozenset(range(len(body.inputs)))
    saved = [] if remat else _choose_saved(body, n_carry, n_xs, wanted)
    ctx = TraceContext(f"{body.name}_history")
    history = ctx.graph
    with ctx.active():
        ins = [
            ctx.new_input(n.aval, n.attrs.get("name", f"in{k}")) for k, n in enumerate(body.inputs)
        ]
        env = replay(body, ins, ctx)
        for o in body.outputs:
            history.outputs.append(output_node(ctx, env[o.id]))
        for c in ins[:n_carry]:
            history.outputs.append(output_node(ctx, c))
        # a saved value that is a per-step output is read from the scan's ys: stored once
        y_ids = {o.id: j for j, o in enumerate(body.outputs) if j >= n_carry}
        sources = []
        for n in saved:
            if n.id in y_ids:
                sources.append(y_ids[n.id])
            else:
                sources.append(len(history.outputs))
                history.outputs.append(output_node(ctx, env[n.id]))
    _HISTORY_BASE[history] = weakref.ref(body)  # a strong value would keep body alive
    _HISTORY_KEPT[history] = len(history.outputs) - len(body.outputs)
    max_stacked = _MAX_STACKED_ELEMENTS // max(length, 1)
    backward, _, (float_carry, consts_float, xs_float, hoisted) = _backward_body(
        body, n_carry, n_xs, saved, wanted, max_stacked
    )
    backward = pruned_graph(backward)  # the forward that only fed saved values
    return history, backward, float_carry, consts_float, xs_float, tuple(sources), hoisted


# A hoisted const gradient stacks its per-step factor D_t: at most this many elements
# over all steps; larger ones accumulate in the loop. 0: off. Measured (perf
# lstm_scan_t20, rnn_scan_t100, load 2-4): one GEMM over the stacked steps did not
# beat the per-step GEMMs plus accumulation in the loop (same flops; the stack costs
# a write and a read, and the big GEMM runs in the NumPy driver), so it is off; set
# e.g. 1 << 24 to turn it on (tests/compile/test_scan_residuals.py checks it exact).
_MAX_STACKED_ELEMENTS = 0


def _sum_over_steps(kind: str, d_stack, carry_hist: list, xs: list, src):
    """sum over t of P_t^T @ D_t (or of sum(D_t, axis=0)), with the steps stacked
    along the rows: one GEMM (or one reduction) after the backward loop."""
    from tracegrad.ops import api

    length, m, n = d_stack.shape
    d2 = api.reshape(d_stack, (length * m, n))
    if kind == "sum":
        return api.sum(d2, axis=0)
    where, j = src
    p_stack = carry_hist[j] if where == "carry" else xs[j]
    p2 = api.reshape(p_stack, (length * m, p_stack.shape[-1]))
    return api.matmul(api.transpose(p2), d2)


def _scan_vjp(i, g, out, *operands, body, length, reverse, n_carry, n_xs, remat=False):
    """The cotangent of operand i (see _scan_vjps, which reverse mode calls once)."""
    needed = [k == i for k in range(len(operands))]
    return _scan_vjps(
        needed,
        g,
        out,
        *operands,
        body=body,
        length=length,
        reverse=reverse,
        n_carry=n_carry,
        n_xs=n_xs,
        remat=remat,
    )[i]


def _scan_vjps(needed, g, out, *operands, body, length, reverse, n_carry, n_xs, remat=False):
    """Every operand's cotangent from one reversed scan over the body's VJP, which
    reads each step's starting carry and saved values from a forward scan (the
    passes merge that scan with the primal one, passes/loops.py)."""
    from tracegrad.ops import api

    float_in = [k for k, n in enumerate(body.inputs) if _is_float(n.dtype)]
    if not any(needed[k] for k in float_in):
        return [None] * len(operands)
    # the carries' cotangents run through every step; consts and xs only if asked for
    asked = frozenset(k for k in float_in if needed[k] and k >= n_carry)
    history, backward, float_carry, consts_float, xs_float, sources, hoisted = _scan_backward_parts(
        body, n_carry, n_xs, bool(remat), asked, length
    )
    wanted = set(float_carry) | set(consts_float) | set(xs_float) | {h[0] for h in hoisted}
    carries = list(operands[:n_carry])
    xs = list(operands[n_carry : n_carry + n_xs])
    consts = list(operands[n_carry + n_xs :])
    # forward again, keeping each step's starting carry and saved values
    hist_packed = scan_p(
        *carries,
        *xs,
        *consts,
        body=history,
        length=length,
        reverse=reverse,
        n_carry=n_carry,
        n_xs=n_xs,
    )
    hist_vals = unpack(hist_packed, _scan_avals(history, length, n_carry))
    n_out = len(body.outputs)
    carry_hist = hist_vals[n_out : n_out + n_carry]
    saved_hist = [hist_vals[k] for k in sources]  # (history outputs: outs, carries, saved)
    # the cotangent of this scan's packed value, split
    out_avals = _scan_avals(body, length, n_carry)
    g_parts = unpack(g, out_avals)
    float_out = [k for k, n in enumerate(body.outputs) if _is_float(n.dtype)]
    ct_carry = [g_parts[k] for k in float_out if k < n_carry]
    ct_ys = [g_parts[k] for k in float_out if k >= n_carry]
    acc0 = [api.zeros_like(operands[k]) for k in consts_float]
    bwd = scan_p(
        *ct_carry,
        *acc0,
        *carry_hist,
        *xs,
        *ct_ys,
        *saved_hist,
        *consts,
        body=backward,
        length=length,
        reverse=not reverse,
        n_carry=len(ct_carry) + len(acc0),
        n_xs=len(carry_hist) + len(xs) + len(ct_ys) + len(saved_hist),
    )
    parts = unpack(bwd, _scan_avals(backward, length, len(ct_carry) + len(acc0)))
    stacks = parts[len(ct_carry) + len(acc0) + len(xs_float) :]
    summed = {
        k: _sum_over_steps(kind, stacks[d], carry_hist, xs, src) for k, kind, src, d in hoisted
    }
    grads = []
    for i in range(len(operands)):
        if not needed[i] or i not in wanted:
            grads.append(None)
        elif i in summed:
            grads.append(summed[i])
        elif i in float_carry:
            grads.append(parts[float_carry.index(i)])
        elif i in consts_float:
            grads.append(parts[len(float_carry) + consts_float.index(i)])
        else:
            grads.append(parts[len(float_carry) + len(consts_float) + xs_float.index(i)])
    return grads


# ------------------------------------------------------- forward mode, shared


@functools.lru_cache(maxsize=256)
def _jvp_of(graph: Graph, wrt: tuple) -> Graph:
    """(inputs..., tangents of `wrt`) -> (outputs..., one tangent per output)."""
    from tracegrad.forward import jvp_graph

    return jvp_graph(graph, wrt=list(wrt))


def _float_wrt(graph: Graph, tangents: Sequence, offset: int = 0) -> tuple:
    """Positions (in graph.inputs) of float inputs whose tangent is not None;
    tangents[k + offset] belongs to graph.inputs[k]."""
    return tuple(
        k
        for k, node in enumerate(graph.inputs)
        if _is_float(node.dtype) and tangents[k + offset] is not None
    )


def pack_values(values: Sequence, avals: Sequence[Aval]):
    """`pack` with tracegrad ops (records on tracers); a None value packs as zeros."""
    from tracegrad.ops import api

    dtype, slots = packed_layout(avals)
    parts = []
    for v, (_, size, _, _) in zip(values, slots, strict=True):
        if v is None:
            parts.append(np.zeros(size, dtype))
            continue
        v = api.reshape(v, (size,))
        parts.append(v if np.dtype(v.dtype) == dtype else api.astype(v, dtype))
    return parts[0] if len(parts) == 1 else api.concatenate(parts)


def pack_tangents(tangents: Sequence, avals: Sequence[Aval]):
    """The tangent of a packed value: its parts' tangents packed the same way (None,
    and the tangents of integer parts, are zero); None if every part's is."""
    dtype, _ = packed_layout(avals)
    tangents = [
        t if _is_float(a.dtype) and _is_float(dtype) else None
        for t, a in zip(tangents, avals, strict=True)
    ]
    if all(t is None for t in tangents):
        return None
    return pack_values(tangents, avals)


def _with_joint(joint):
    """The jvp rule `(primals, tangents, out) -> tangent` of a `joint(primals, tangents)
    -> (out, tangent)` rule, which forward mode calls instead (tracegrad/forward.py:
    one loop computes the primal and its tangent; the plain form serves jacfwd's
    tangent passes, which share one primal)."""

    def rule(primals, tangents, out, **attrs):
        return joint(primals, tangents, **attrs)[1]

    rule.joint = joint
    rule.__name__ = joint.__name__.replace("_joint", "")
    return rule


def _zeros_if_none(t, primal):
    from tracegrad.forward import zeros_like_if_none

    return zeros_like_if_none(t, primal)


@functools.lru_cache(maxsize=256)
def _scan_jvp_body(body: Graph, n_carry: int, n_xs: int, wrt: tuple) -> Graph:
    """The body of a scan over carry and tangent carry: inputs (carry, tangents of the
    float carries, x_t, their tangents, consts, their tangents), outputs (carry',
    tangents of the float carries', y_t, tangents of the float y_t)."""
    from tracegrad.autodiff import replay
    from tracegrad.tracing import TraceContext, output_node

    fwd = _jvp_of(body, wrt)
    n_in, n_out = len(body.inputs), len(body.outputs)
    groups = [range(0, n_carry), range(n_carry, n_carry + n_xs), range(n_carry + n_xs, n_in)]
    ctx = TraceContext(f"{body.name}_jvp")
    with ctx.active():
        primals: list = [None] * n_in
        tangents: dict = {}
        for group in groups:
            for k in group:
                primals[k] = ctx.new_input(body.inputs[k].aval, f"in{k}")
            for k in group:
                if k in wrt:
                    tangents[k] = ctx.new_input(body.inputs[k].aval, f"t_in{k}")
        env = replay(fwd, primals + [tangents[k] for k in wrt], ctx)
        outs = [env[o.id] for o in fwd.outputs[:n_out]]
        touts = [env[o.id] for o in fwd.outputs[n_out:]]
        float_out = [k for k, n in enumerate(body.outputs) if _is_float(n.dtype)]
        order = list(range(n_carry)) + [n_out + k for k in float_out if k < n_carry]
        order += list(range(n_carry, n_out)) + [n_out + k for k in float_out if k >= n_carry]
        for k in order:
            ctx.graph.outputs.append(output_node(ctx, outs[k] if k < n_out else touts[k - n_out]))
    return ctx.graph


def _scan_jvp_joint(primals, tangents, *, body, length, reverse, n_carry, n_xs, remat=False):
    """One scan over the body's JVP; every float carry has a tangent carry (zeros where
    none enters: the xs' tangents reach the carry after one step)."""
    float_carry = [k for k in range(n_carry) if _is_float(body.inputs[k].dtype)]
    given = _float_wrt(body, tangents)
    wrt = tuple(sorted(set(float_carry) | set(given)))
    if not given:
        return scan_p(
            *primals,
            body=body,
            length=length,
            reverse=reverse,
            n_carry=n_carry,
            n_xs=n_xs,
            **_remat_attr(remat),
        ), None
    new_body = _scan_jvp_body(body, n_carry, n_xs, wrt)
    n_in = len(primals)
    carry, xs, consts = (
        primals[:n_carry],
        primals[n_carry : n_carry + n_xs],
        primals[n_carry + n_xs :],
    )
    tcarry = [_zeros_if_none(tangents[k], primals[k]) for k in float_carry]
    txs = [tangents[k] for k in wrt if n_carry <= k < n_carry + n_xs]
    tconsts = [tangents[k] for k in wrt if n_carry + n_xs <= k < n_in]
    new_n_carry = n_carry + len(tcarry)
    packed = scan_p(
        *carry,
        *tcarry,
        *xs,
        *txs,
        *consts,
        *tconsts,
        body=new_body,
        length=length,
        reverse=reverse,
        n_carry=new_n_carry,
        n_xs=n_xs + len(txs),
        **_remat_attr(remat),
    )
    parts = unpack(packed, _scan_avals(new_body, length, new_n_carry))
    out_avals = _scan_avals(body, length, n_carry)
    t_carry = dict(zip(float_carry, parts[n_carry:new_n_carry], strict=True))
    n_y = len(body.outputs) - n_carry
    float_y = [j for j in range(n_y) if _is_float(body.outputs[n_carry + j].dtype)]
    t_y = dict(zip(float_y, parts[new_n_carry + n_y :], strict=True))
    out = pack_values(parts[:n_carry] + parts[new_n_carry : new_n_carry + n_y], out_avals)
    return out, pack_tangents(
        [t_carry.get(k) for k in range(n_carry)] + [t_y.get(j) for j in range(n_y)], out_avals
    )


_scan_jvp = _with_joint(_scan_jvp_joint)


scan_p = primitive(
    "scan",
    impl=_scan_impl,
    shape_rule=_scan_rule,
    kind="other",
    vjps=PerOperand(_scan_vjp, batch=_scan_vjps),
    jvp=_scan_jvp,
    torch_name="ScanBackward",
    saves=(),
    codegen=None,
)


# ---------------------------------------------------------------------- cond


def _cond_rule(pred, *operands, true_branch, false_branch):
    p = as_aval(pred)
    if p.shape != () or np.dtype(p.dtype) != np.bool_:
        raise DTypeError(f"cond: the predicate must be a bool scalar, got {p}")
    avals = [n.aval for n in true_branch.outputs]
    dtype, slots = packed_layout(avals)
    return Aval((sum(slot[1] for slot in slots),), dtype)


def _cond_impl(pred, *operands, true_branch, false_branch):
    branch = true_branch if bool(pred) else false_branch
    outs = body_runner(branch)(*operands)
    dtype, _ = packed_layout([n.aval for n in true_branch.outputs])
    return pack(outs, dtype)


@functools.lru_cache(maxsize=256)
def _cond_backward_branch(branch: Graph):
    """(operands..., ct_packed) -> packed cotangents of every float operand."""
    from tracegrad.autodiff import replay, vjp_graph
    from tracegrad.tracing import TraceContext, output_node

    float_in = [k for k, n in enumerate(branch.inputs) if _is_float(n.dtype)]
    float_out = [k for k, n in enumerate(branch.outputs) if _is_float(n.dtype)]
    joint = vjp_graph(branch, wrt=float_in, diff_outputs=float_out, seed_ones=False)
    out_avals = [n.aval for n in branch.outputs]
    _, slots = packed_layout(out_avals)
    ctx = TraceContext(f"{branch.name}_vjp")
    graph = ctx.graph
    with ctx.active():
        ins = [
            ctx.new_input(n.aval, n.attrs.get("name", f"in{k}"))
            for k, n in enumerate(branch.inputs)
        ]
        total = sum(slot[1] for slot in slots)
        dtype, _ = packed_layout(out_avals)
        g = ctx.new_input(Aval((total,), dtype), "ct")
        parts = unpack(g, out_avals)
        env = replay(joint, ins + [parts[k] for k in float_out], ctx)
        grads = [env[o.id] for o in joint.outputs[len(branch.outputs) :]]
        for v in grads:
            graph.outputs.append(output_node(ctx, v))
    return graph, float_in


def _cond_vjp(i, g, out, pred, *operands, true_branch, false_branch):
    if i == 0:
        return None
    k = i - 1
    t_graph, float_in = _cond_backward_branch(true_branch)
    f_graph, _ = _cond_backward_branch(false_branch)
    if k not in float_in:
        return None
    packed = cond_p(pred, *operands, g, true_branch=t_graph, false_branch=f_graph)
    return unpack(packed, [as_aval(operands[j]) for j in float_in])[float_in.index(k)]


def _cond_jvp_joint(primals, tangents, *, true_branch, false_branch):
    """A cond over the two branches' JVPs: only the taken branch runs."""
    wrt = _float_wrt(true_branch, tangents, offset=1)
    if not wrt:
        return cond_p(*primals, true_branch=true_branch, false_branch=false_branch), None
    t_graph, f_graph = _jvp_of(true_branch, wrt), _jvp_of(false_branch, wrt)
    packed = cond_p(
        primals[0],
        *primals[1:],
        *[tangents[1 + k] for k in wrt],
        true_branch=t_graph,
        false_branch=f_graph,
    )
    n_out = len(true_branch.outputs)
    parts = unpack(packed, [n.aval for n in t_graph.outputs])
    avals = [n.aval for n in true_branch.outputs]
    return pack_values(parts[:n_out], avals), pack_tangents(parts[n_out:], avals)


_cond_jvp = _with_joint(_cond_jvp_joint)


cond_p = primitive(
    "cond",
    impl=_cond_impl,
    shape_rule=_cond_rule,
    kind="other",
    vjps=PerOperand(_cond_vjp),
    jvp=_cond_jvp,
    torch_name="CondBackward",
    saves=(),
    codegen=None,
)


# --------------------------------------------------------------------- while


def _while_rule(*operands, cond, body, n_carry):
    pred = cond.outputs[0]
    if pred.shape != () or pred.dtype != np.bool_:
        raise DTypeError(f"while_loop: cond_fun must return a bool scalar, got {pred.aval}")
    dtype, slots = packed_layout([n.aval for n in body.outputs])
    return Aval((sum(slot[1] for slot in slots),), dtype)


def _while_impl(*operands, cond, body, n_carry):
    carry = list(operands[:n_carry])
    consts = operands[n_carry:]
    n_cond_consts = len(cond.inputs) - n_carry
    cond_consts, body_consts = consts[:n_cond_consts], consts[n_cond_consts:]
    run_cond, run_body = body_runner(cond), body_runner(body)
    while bool(run_cond(*carry, *cond_consts)[0]):
        carry = list(run_body(*carry, *body_consts))
    dtype, _ = packed_layout([n.aval for n in body.outputs])
    return pack(carry, dtype)


def _while_vjp(i, g, out, *operands, cond, body, n_carry):
    from tracegrad.autodiff import AutodiffError

    raise AutodiffError(
        "Reverse-mode differentiation does not work for tracegrad.while_loop: its trip "
        "count depends on data, so the residuals of every step cannot be stored in a "
        "static graph (JAX says the same). Use tracegrad.fori_loop with static bounds or "
        "tracegrad.scan, which are differentiable."
    )


@functools.lru_cache(maxsize=256)
def _while_jvp_graphs(cond: Graph, body: Graph, n_carry: int, wrt: tuple):
    """(cond, body) of a while loop over carry and tangent carry: cond (carry, tangents
    of the float carries, cond consts) ignores the tangents; body (carry, tangents,
    body consts, their tangents) -> (carry', tangents')."""
    from tracegrad.autodiff import replay
    from tracegrad.tracing import TraceContext, output_node

    float_carry = [k for k in wrt if k < n_carry]
    fwd = _jvp_of(body, wrt)
    ctx = TraceContext(f"{body.name}_jvp")
    with ctx.active():
        carry = [ctx.new_input(body.inputs[k].aval, f"carry{k}") for k in range(n_carry)]
        tcarry = [ctx.new_input(body.inputs[k].aval, f"t_carry{k}") for k in float_carry]
        consts = [ctx.new_input(n.aval, f"const{k}") for k, n in enumerate(body.inputs[n_carry:])]
        tconsts = [ctx.new_input(body.inputs[k].aval, f"t_const{k}") for k in wrt if k >= n_carry]
        env = replay(fwd, carry + consts + tcarry + tconsts, ctx)
        n_out = len(body.outputs)
        for o in fwd.outputs[:n_out]:
            ctx.graph.outputs.append(output_node(ctx, env[o.id]))
        for k in float_carry:
            ctx.graph.outputs.append(output_node(ctx, env[fwd.outputs[n_out + k].id]))
    new_body = ctx.graph
    cctx = TraceContext(f"{cond.name}_jvp")
    with cctx.active():
        carry = [cctx.new_input(cond.inputs[k].aval, f"carry{k}") for k in range(n_carry)]
        for k in float_carry:
            cctx.new_input(cond.inputs[k].aval, f"t_carry{k}")
        consts = [cctx.new_input(n.aval, f"const{k}") for k, n in enumerate(cond.inputs[n_carry:])]
        env = replay(cond, carry + consts, cctx)
        cctx.graph.outputs.append(output_node(cctx, env[cond.outputs[0].id]))
    return cctx.graph, new_body


def _while_jvp_joint(primals, tangents, *, cond, body, n_carry):
    """A while loop over the body's JVP (the same trip count as the primal loop)."""
    n_cond_consts = len(cond.inputs) - n_carry
    body_tangents = list(tangents[:n_carry]) + list(tangents[n_carry + n_cond_consts :])
    given = _float_wrt(body, body_tangents)
    if not given:
        return while_p(*primals, cond=cond, body=body, n_carry=n_carry), None
    float_carry = [k for k in range(n_carry) if _is_float(body.inputs[k].dtype)]
    wrt = tuple(sorted(set(float_carry) | set(given)))
    new_cond, new_body = _while_jvp_graphs(cond, body, n_carry, wrt)
    carry = primals[:n_carry]
    cond_consts = primals[n_carry : n_carry + n_cond_consts]
    body_consts = primals[n_carry + n_cond_consts :]
    tcarry = [_zeros_if_none(tangents[k], primals[k]) for k in float_carry]
    tconsts = [body_tangents[k] for k in wrt if k >= n_carry]
    packed = while_p(
        *carry,
        *tcarry,
        *cond_consts,
        *body_consts,
        *tconsts,
        cond=new_cond,
        body=new_body,
        n_carry=n_carry + len(tcarry),
    )
    parts = unpack(packed, [n.aval for n in new_body.outputs])
    t_carry = dict(zip(float_carry, parts[n_carry:], strict=True))
    avals = [n.aval for n in body.outputs]
    return (
        pack_values(parts[:n_carry], avals),
        pack_tangents([t_carry.get(k) for k in range(n_carry)], avals),
    )


_while_jvp = _with_joint(_while_jvp_joint)


while_p = primitive(
    "while",
    impl=_while_impl,
    shape_rule=_while_rule,
    kind="other",
    vjps=PerOperand(_while_vjp),
    jvp=_while_jvp,
    torch_name="WhileBackward",
    saves=(),
    codegen=None,
)


# ---------------------------------------------------------------------- call


def _call_rule(*operands, graph):
    if len(operands) != len(graph.inputs):
        raise ShapeError(
            f"call: {graph.name} takes {len(graph.inputs)} inputs, got {len(operands)}"
        )
    dtype, slots = packed_layout([n.aval for n in graph.outputs])
    return Aval((sum(slot[1] for slot in slots),), dtype)


def _call_impl(*operands, graph):
    outs = body_runner(graph)(*operands)
    dtype, _ = packed_layout([n.aval for n in graph.outputs])
    return pack(outs, dtype)


def _call_vjp(i, g, out, *operands, graph):
    """Reverse mode through the called graph (its VJP graph, called the same way)."""
    backward, float_in = _cond_backward_branch(graph)
    if i not in float_in:
        return None
    packed = call_p(*operands, g, graph=backward)
    return unpack(packed, [as_aval(operands[j]) for j in float_in])[float_in.index(i)]


def _call_jvp_joint(primals, tangents, *, graph):
    """A call of the called graph's JVP."""
    wrt = _float_wrt(graph, tangents)
    if not wrt:
        return call_p(*primals, graph=graph), None
    fwd = _jvp_of(graph, wrt)
    packed = call_p(*primals, *[tangents[k] for k in wrt], graph=fwd)
    parts = unpack(packed, [n.aval for n in fwd.outputs])
    n_out, avals = len(graph.outputs), [n.aval for n in graph.outputs]
    return pack_values(parts[:n_out], avals), pack_tangents(parts[n_out:], avals)


_call_jvp = _with_joint(_call_jvp_joint)


call_p = primitive(
    "call",
    impl=_call_impl,
    shape_rule=_call_rule,
    kind="other",
    vjps=PerOperand(_call_vjp),
    jvp=_call_jvp,
    torch_name="CallBackward",
    saves=(),
    codegen=None,
)


# ---------------------------------------------------------- custom_vjp_call


def _custom_rule(*operands, fun, fwd, bwd, n_out):
    return _call_rule(*operands, graph=fun)


def _custom_impl(*operands, fun, fwd, bwd, n_out):
    return _call_impl(*operands, graph=fun)


def _custom_vjp(i, g, out, *operands, fun, fwd, bwd, n_out):
    """The user's rule: residuals from `fwd`, then `bwd(residuals, g)`."""
    if not _is_float(fun.inputs[i].dtype):
        return None
    fwd_avals = [n.aval for n in fwd.outputs]
    fwd_parts = unpack(call_p(*operands, graph=fwd), fwd_avals)
    residuals = fwd_parts[n_out:]
    g_parts = unpack(g, [n.aval for n in fun.outputs])
    grads = unpack(call_p(*residuals, *g_parts, graph=bwd), [n.aval for n in bwd.outputs])
    return grads[i]


def _custom_jvp(primals, tangents, out, *, fun, fwd, bwd, n_out):
    """A `custom_jvp` function's own rule (tracegrad/custom.py stores its traced graph,
    (primals..., tangents...) -> (outs..., tangents...), on `fun` as `custom_jvp_rule`);
    otherwise (custom_vjp) the transpose of the user's `bwd`, exact as it is linear."""
    rule = getattr(fun, "custom_jvp_rule", None)
    if rule is None:
        from tracegrad.forward import derived_jvp

        return derived_jvp(custom_vjp_p)(
            primals, tangents, out, fun=fun, fwd=fwd, bwd=bwd, n_out=n_out
        )
    packed = call_p(
        *primals,
        *[_zeros_if_none(t, p) for p, t in zip(primals, tangents, strict=True)],
        graph=rule,
    )
    parts = unpack(packed, [n.aval for n in rule.outputs])
    return pack_tangents(parts[n_out:], [n.aval for n in fun.outputs])


custom_vjp_p = primitive(
    "custom_vjp_call",
    impl=_custom_impl,
    shape_rule=_custom_rule,
    kind="other",
    vjps=PerOperand(_custom_vjp),
    jvp=_custom_jvp,
    torch_name="CustomVjpBackward",
    saves=(),
    codegen=None,
)
