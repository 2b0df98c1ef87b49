"""Loops and branches with JAX's signatures: `scan`, `fori_loop`, `while_loop`, `cond`.

One function serves both kinds of graph:

- on NumPy arrays or eager tensors (dynamic graphs) they are plain Python
  loops and `if`s, so eager mode records one node per step, as PyTorch does;
- while tracing (static graphs) the body is traced once into a sub-graph held
  by one `scan` / `while` / `cond` node (tracegrad/loops/primitives.py), so the graph,
  its compile time and the generated source stay the same size for 10 or
  10,000 steps, where an unrolled Python loop grows with every step.

    >>> import numpy as np, tracegrad as tg
    >>> def cumulative(xs):
    ...     return tg.scan(lambda c, x: (c + x, c + x), np.float64(0.0), xs)
    >>> cumulative(np.arange(4.0))
    (array(6.), array([0., 1., 3., 6.]))
    >>> g = tg.grad(lambda xs: tg.sum(cumulative(xs)[1]), backend="interpret")
    >>> g(np.arange(4.0))
    array([4., 3., 2., 1.])

Limits: all carries and per-step outputs of one loop share one dtype (cast
with `.astype`); `while_loop` has no reverse mode (as in JAX).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracegrad.loops.primitives import (
    ControlFlowError,
    cond_p,
    packed_layout,
    scan_p,
    unpack,
    while_p,
)
from tracegrad.ops import api
from tracegrad.ops.core import Aval
from tracegrad.pytree import TreeDef, tree_flatten, tree_unflatten
from tracegrad.tracing import Tracer, abstract_leaf, active_contexts, trace_subgraph


def _leaves(tree: Any) -> tuple[list, TreeDef]:
    return tree_flatten(tree, arrays_only_scalars=True)


def _as_array(v: Any) -> Any:
    """Python scalars in carries become arrays (a carry's dtype must not change)."""
    return np.asarray(v) if type(v) in (int, float, bool) else v


def _as_arrays(tree: Any) -> Any:
    """NumPy scalars that a Python loop produced become 0-d arrays, as traced results are."""
    leaves, treedef = _leaves(tree)
    return tree_unflatten(
        treedef, [np.asarray(v) if isinstance(v, (np.generic, float, int)) else v for v in leaves]
    )


def _tracing(*leaves: Any) -> bool:
    return bool(active_contexts()) or any(isinstance(v, Tracer) for v in leaves)


def _type_str(avals) -> str:
    return ", ".join(str(a) for a in avals)


# ---------------------------------------------------------------------- scan


def scan(
    f: Callable,
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
    *,
    remat: bool = False,
) -> tuple[Any, Any]:
    """JAX's `lax.scan`: `carry, y = f(carry, x)` over the leading axis of `xs`.

    Returns `(final carry, stacked ys)`; carries and xs may be pytrees.

    Reverse mode stores each step's starting carry and the step's values that are
    costly to recompute (matmul, transcendental, reduction and loop outputs), and
    recomputes the cheap rest in the backward step. `remat=True` stores the
    carries only and recomputes the whole step (less memory, more time), as
    `lax.scan(jax.checkpoint(f), ...)` does.

    >>> import numpy as np, tracegrad as tg
    >>> tg.scan(lambda c, x: (c * x, c), np.float64(1.0), np.array([2.0, 3.0, 4.0]))
    (array(24.), array([1., 2., 6.]))
    """
    carry_leaves, carry_tree = _leaves(init)
    carry_leaves = [_as_array(v) for v in carry_leaves]
    x_leaves, x_tree = _leaves(xs)
    n = _scan_length(x_leaves, length)
    if not _tracing(*carry_leaves, *x_leaves):
        return _scan_python(
            f, tree_unflatten(carry_tree, carry_leaves), x_leaves, x_tree, n, reverse
        )
    carry_avals = [abstract_leaf(v) for v in carry_leaves]
    x_avals = [Aval(tuple(abstract_leaf(v).shape[1:]), abstract_leaf(v).dtype) for v in x_leaves]
    body, out_tree, captures = trace_subgraph(
        f,
        TreeDef("tuple", [carry_tree, x_tree]),
        carry_avals + x_avals,
        f"scan_body_{getattr(f, '__name__', 'f')}".replace("<", "").replace(">", ""),
    )
    if out_tree.kind not in ("tuple", "list") or len(out_tree.children) != 2:
        raise ControlFlowError(
            f"scan: the body must return a pair (carry, y), got structure {out_tree}"
        )
    new_carry_tree, y_tree = out_tree.children
    n_carry = len(carry_leaves)
    carry_out = [o.aval for o in body.outputs[:n_carry]]
    if new_carry_tree != carry_tree or carry_out != carry_avals:
        raise ControlFlowError(
            "scan body function carry input and carry output must have equal types (the "
            f"same structure, shapes and dtypes): the carry goes in as {carry_tree} of "
            f"({_type_str(carry_avals)}) and comes out as {new_carry_tree} of "
            f"({_type_str(carry_out)})"
        )
    packed = scan_p(
        *carry_leaves,
        *x_leaves,
        *captures,
        body=body,
        length=n,
        reverse=reverse,
        n_carry=n_carry,
        n_xs=len(x_leaves),
        **({"remat": True} if remat else {}),
    )
    avals = carry_out + [Aval((n,) + tuple(o.shape), o.dtype) for o in body.outputs[n_carry:]]
    parts = unpack(packed, avals)
    return (tree_unflatten(carry_tree, parts[:n_carry]), tree_unflatten(y_tree, parts[n_carry:]))


def _scan_length(x_leaves: list, length: int | None) -> int:
    lengths = {int(np.shape(v)[0]) if np.ndim(v) else None for v in x_leaves}
    if None in lengths:
        raise ControlFlowError(
            "scan: every leaf of xs needs a leading axis to scan over, got a 0-d value"
        )
    if length is not None:
        lengths.add(int(length))
    if not lengths:
        raise ControlFlowError("scan: give xs or length (the number of steps)")
    if len(lengths) > 1:
        raise ControlFlowError(
            f"scan got values with different leading axis sizes: "
            f"{sorted(lengths)} (xs and length must agree)"
        )
    return lengths.pop()


def _scan_python(f, carry, x_leaves, x_tree, n, reverse):
    """The dynamic-graph form: a Python loop (eager tensors record every step)."""
    ys_by_step: list = [None] * n
    y_tree = None
    for t in range(n):
        i = n - 1 - t if reverse else t
        x = tree_unflatten(x_tree, [v[i] for v in x_leaves])
        result = f(carry, x)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ControlFlowError("scan: the body must return a pair (carry, y)")
        carry, y = result
        ys_by_step[i], y_tree = _leaves(y)
    if n == 0:
        return _as_arrays(carry), None
    stacked = [api.stack([ys_by_step[i][k] for i in range(n)]) for k in range(len(ys_by_step[0]))]
    return _as_arrays(carry), tree_unflatten(y_tree, stacked)


# ----------------------------------------------------------------- fori_loop


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val: Any) -> Any:
    """JAX's `lax.fori_loop`: `val = body_fun(i, val)` for i in [lower, upper).

    Static (Python int) bounds make a differentiable `scan`; traced bounds make a
    `while_loop`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.fori_loop(0, 4, lambda i, v: v * 2.0, np.float64(1.0))
    array(16.)
    """
    if isinstance(lower, Tracer) or isinstance(upper, Tracer):

        def cond_fun(state):
            return state[0] < upper

        def body(state):
            return (state[0] + 1, body_fun(state[0], state[1]))

        return while_loop(cond_fun, body, (lower, init_val))[1]
    lower, upper = int(lower), int(upper)
    if not _tracing(*_leaves(init_val)[0]):
        val = init_val
        for i in range(lower, upper):
            val = body_fun(i, val)
        return _as_arrays(val)
    carry, _ = scan(
        lambda val, i: (body_fun(i, val), None), init_val, np.arange(lower, max(lower, upper))
    )
    return carry


# ---------------------------------------------------------------- while_loop


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """JAX's `lax.while_loop`: `while cond_fun(val): val = body_fun(val)`.

    Forward only: reverse-mode gradients raise, as in JAX.

    >>> import numpy as np, tracegrad as tg
    >>> float(tg.while_loop(lambda v: v < 10, lambda v: v * 3.0, np.float64(1.0)))
    27.0
    """
    leaves, tree = _leaves(init_val)
    leaves = [_as_array(v) for v in leaves]
    if not _tracing(*leaves):
        val = tree_unflatten(tree, leaves)
        while bool(cond_fun(val)):
            val = body_fun(val)
        return _as_arrays(val)
    avals = [abstract_leaf(v) for v in leaves]
    cond_graph, cond_tree, cond_caps = trace_subgraph(
        cond_fun, TreeDef("tuple", [tree]), avals, "while_cond"
    )
    body_graph, body_tree, body_caps = trace_subgraph(
        body_fun, TreeDef("tuple", [tree]), avals, "while_body"
    )
    if cond_tree.kind != "array":
        raise ControlFlowError(
            f"while_loop: cond_fun must return one bool scalar, got structure {cond_tree}"
        )
    out = [o.aval for o in body_graph.outputs]
    if body_tree != tree or out != avals:
        raise ControlFlowError(
            "while_loop body function carry input and carry output must have equal types: "
            f"in {tree} of ({_type_str(avals)}), out {body_tree} of ({_type_str(out)})"
        )
    packed = while_p(
        *leaves, *cond_caps, *body_caps, cond=cond_graph, body=body_graph, n_carry=len(leaves)
    )
    return tree_unflatten(tree, unpack(packed, avals))


# ---------------------------------------------------------------------- cond


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """JAX's `lax.cond`: `true_fun(*operands) if pred else false_fun(*operands)`.

    With a traced `pred` both branches are traced once; only the taken branch
    runs, and its gradient is the one that flows (no NaN from the other branch,
    unlike `where`).

    >>> import numpy as np, tracegrad as tg
    >>> f = lambda x: tg.cond(x > 0, tg.sqrt, lambda x: x * 0.0, x)
    >>> float(tg.grad(f, backend="interpret")(4.0)), float(tg.grad(f, backend="interpret")(-4.0))
    (0.25, 0.0)
    """
    leaves, tree = _leaves(tuple(operands))
    leaves = [_as_array(v) for v in leaves]
    if not isinstance(pred, Tracer):
        branch = true_fun if bool(np.asarray(getattr(pred, "_data", pred))) else false_fun
        return branch(*operands)
    if np.dtype(pred.dtype) != np.bool_:
        pred = api.not_equal(pred, 0)
    if pred.shape != ():
        raise ControlFlowError(f"cond: the predicate must be a scalar, got shape {pred.shape}")
    avals = [abstract_leaf(v) for v in leaves]
    t_graph, t_tree, t_caps = trace_subgraph(lambda *a: true_fun(*a), tree, avals, "cond_true")
    f_graph, f_tree, f_caps = trace_subgraph(lambda *a: false_fun(*a), tree, avals, "cond_false")
    t_out, f_out = [o.aval for o in t_graph.outputs], [o.aval for o in f_graph.outputs]
    if t_tree != f_tree or t_out != f_out:
        raise ControlFlowError(
            "true_fun and false_fun output must have identical types: true_fun gives "
            f"{t_tree} of ({_type_str(t_out)}), false_fun gives {f_tree} of "
            f"({_type_str(f_out)})"
        )
    packed_layout(t_out)  # one dtype, checked before the node is made
    # Both branches take every operand: (operands, true's captures, false's captures).
    n = len(leaves)
    t_graph.inputs[:] = t_graph.inputs + _dummy_inputs(t_graph, f_caps)
    f_graph.inputs[:] = f_graph.inputs[:n] + _dummy_inputs(f_graph, t_caps) + f_graph.inputs[n:]
    packed = cond_p(pred, *leaves, *t_caps, *f_caps, true_branch=t_graph, false_branch=f_graph)
    return tree_unflatten(t_tree, unpack(packed, t_out))


def _dummy_inputs(graph, caps) -> list:
    nodes = []
    for cap in caps:
        node = graph.new_node("input", (), {"name": "unused"}, cap.aval)
        graph.nodes.remove(node)
        graph.nodes.insert(0, node)
        nodes.append(node)
    return nodes
