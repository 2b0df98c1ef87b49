"""Algebraic simplification: a table of local rewrite rules.

Each rule looks at one node (whose operands are already simplified) and
returns a cheaper node with the *exact* same shape and dtype, or None. When a
rule drops an operation whose result was broadcast or promoted, `Builder.fit`
re-adds the broadcast/cast, so `mul(x[3], broadcast_to(1.0, (2, 3)))` becomes
`broadcast_to(x, (2, 3))`.

Floating-point care: only identities that hold for every float value are
used. `x*0 -> 0` would turn inf and NaN into 0, so it applies to integers only.
(`x + 0 -> x` keeps a -0.0 that IEEE addition would turn into +0.0; the two
compare equal.) A few rules are exact only up to rounding, which the tests'
tolerances cover: sum of n broadcast copies -> x * n, mean of copies -> x.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((3,), np.dtype("float32")))
    >>> one = g.add_const(np.float32(1.0))
    >>> g.outputs.append(g.new_node("mul", (x, one), {}, x.aval))
    >>> h = simplify(g)
    >>> h.outputs[0] is h.inputs[0]
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops.core import REGISTRY
from tracegrad.passes.rewrite import (
    Builder,
    RewriteAbort,
    const_value,
    is_filled_with,
    rewrite_graph,
)

RuleFn = Callable[[Node, Builder], "Node | None"]


@dataclass(frozen=True)
class Rule:
    op: str  # the op of the node the rule looks at ("*": any elementwise op)
    algebra: str  # what it does, as algebra
    apply: RuleFn


def simplify(graph: Graph, rules: list[Rule] | None = None) -> Graph:
    """A copy of `graph` with the algebraic rewrite rules applied once per node."""
    return simplify_counted(graph, rules)[0]


def simplify_counted(graph: Graph, rules: list[Rule] | None = None) -> tuple[Graph, int]:
    """`simplify` plus the number of nodes rewritten."""
    by_op = rules_by_op(RULES if rules is None else rules)

    def rewrite(node: Node, b: Builder) -> Node | None:
        for rule in by_op.get(node.op, ()) + by_op.get("*", ()):
            if rule.op == "*" and not is_elementwise(node):
                continue
            made = len(b.pending)
            try:
                result = rule.apply(node, b)
            except RewriteAbort:
                result = None
            if result is not None:
                return result
            del b.pending[made:]  # a rule that gave up leaves no nodes behind
        return None

    return rewrite_graph(graph, rewrite)


def describe_rules(rules: list[Rule] | None = None) -> str:
    """The rewrite table as text, one rule per line.

    >>> print(describe_rules()[:40])
    mul           x*1 -> x, 1*x -> x (broadc
    """
    return "\n".join(
        f"{rule.op:<13} {rule.algebra}" for rule in (RULES if rules is None else rules)
    )


def rules_by_op(rules: list[Rule]) -> dict[str, tuple[Rule, ...]]:
    table: dict[str, tuple[Rule, ...]] = {}
    for rule in rules:
        table[rule.op] = table.get(rule.op, ()) + (rule,)
    return table


# ------------------------------------------------------------ small helpers


def is_elementwise(node: Node) -> bool:
    prim = REGISTRY.get(node.op)
    return prim is not None and prim.kind == "elementwise"


def is_int_like(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.integer) or dtype == np.bool_


def same(node: Node, b: Builder, x: Node) -> Node:
    """`x` standing in for `node`: broadcast/cast if the dropped op did that."""
    return b.fit(x, node.shape, node.dtype)


def identity_operand(node: Node, b: Builder, value: float, sides: tuple[int, ...]) -> Node | None:
    """If operand `side` is all `value` (an identity of the op), return the other one."""
    for side in sides:
        if is_filled_with(node.inputs[side], value):
            return same(node, b, node.inputs[1 - side])
    return None


def zeros_like_node(node: Node, b: Builder) -> Node:
    return same(node, b, b.const(np.zeros((), node.dtype), node.dtype))


# ------------------------------------------------------------ arithmetic


def mul_by_one(node, b):  # x*1 -> x, 1*x -> x (also broadcast ones)
    return identity_operand(node, b, 1, (1, 0))


def mul_by_minus_one(node, b):  # x*(-1) -> -x, (-1)*x -> -x
    for side in (1, 0):
        if is_filled_with(node.inputs[side], -1):
            return same(node, b, b.emit("neg", node.inputs[1 - side]))
    return None


def mul_by_zero_int(node, b):  # x*0 -> 0, integers only (in float inf*0 and nan*0 are nan)
    if is_int_like(node.dtype) and any(is_filled_with(i, 0) for i in node.inputs):
        return zeros_like_node(node, b)
    return None


def add_zero(node, b):  # x+0 -> x, 0+x -> x
    return identity_operand(node, b, 0, (1, 0))


def sub_zero(node, b):  # x-0 -> x
    return identity_operand(node, b, 0, (1,))


def zero_sub(node, b):  # 0-x -> -x
    if is_filled_with(node.inputs[0], 0):
        return same(node, b, b.emit("neg", node.inputs[1]))
    return None


def sub_self_int(node, b):  # x-x -> 0, integers only (inf-inf is nan)
    x, y = node.inputs
    if x is y and is_int_like(node.dtype):
        return zeros_like_node(node, b)
    return None


def add_neg(node, b):  # x+(-y) -> x-y, (-x)+y -> y-x   (exact in IEEE arithmetic)
    x, y = node.inputs
    if y.op == "neg":
        return same(node, b, b.emit("sub", x, y.inputs[0]))
    if x.op == "neg":
        return same(node, b, b.emit("sub", y, x.inputs[0]))
    return None


def sub_neg(node, b):  # x-(-y) -> x+y
    x, y = node.inputs
    if y.op == "neg":
        return same(node, b, b.emit("add", x, y.inputs[0]))
    return None


def div_by_one(node, b):  # x/1 -> x
    return identity_operand(node, b, 1, (1,))


def scalar_const(node: Node) -> np.ndarray | None:
    """The value of a one-element const (or a broadcast of one), as a 0-d array."""
    value = const_value(node)
    return value.reshape(()) if value is not None and value.size == 1 else None


def is_power_of_two(value: np.ndarray) -> bool:
    scalar = float(value)
    if scalar == 0 or not np.isfinite(scalar):
        return False
    mantissa, exponent = np.frexp(abs(scalar))
    return mantissa == 0.5 and abs(exponent) < 100


def mul_const_const(
    node, b
):  # c1*(c2*x) -> (c1*c2)*x if c1 or c2 is ±2^k (exact but for under/overflow)
    for side in (0, 1):
        outer, inner = scalar_const(node.inputs[side]), node.inputs[1 - side]
        if outer is None or inner.op != "mul" or not np.issubdtype(node.dtype, np.floating):
            continue
        for inner_side in (0, 1):
            c2, x = scalar_const(inner.inputs[inner_side]), inner.inputs[1 - inner_side]
            if c2 is not None and (is_power_of_two(outer) or is_power_of_two(c2)):
                product = np.asarray(outer, node.dtype) * np.asarray(c2, node.dtype)
                return same(node, b, b.emit("mul", x, b.const(product, node.dtype)))
    return None


def neg_neg(node, b):  # -(-x) -> x
    if node.inputs[0].op == "neg":
        return same(node, b, node.inputs[0].inputs[0])
    return None


def sink_broadcasts(node, b):  # op(broadcast_to(x), y) -> broadcast_to(op(x, y)) or op(x, y)
    """Elementwise ops commute with broadcasting, so compute on the small
    operands and broadcast the result (once, or not at all when implicit
    broadcasting already gives the output shape). XLA's simplifier sinks
    broadcasts the same way."""
    operands = [o.inputs[0] if o.op == "broadcast_to" else o for o in node.inputs]
    if all(o is i for o, i in zip(operands, node.inputs, strict=True)):
        return None
    return same(node, b, b.emit(node.op, *operands, **node.attrs))


# ------------------------------------------------------------ shape ops


def reshape_same(node, b):  # reshape(x, x.shape) -> x
    x = node.inputs[0]
    return x if x.shape == node.shape else None


def reshape_reshape(node, b):  # reshape(reshape(x, s1), s2) -> reshape(x, s2)
    x = node.inputs[0]
    if x.op == "reshape":
        inner = x.inputs[0]
        return inner if inner.shape == node.shape else b.emit("reshape", inner, shape=node.shape)
    return None


def broadcast_same(node, b):  # broadcast_to(x, x.shape) -> x
    x = node.inputs[0]
    return x if x.shape == node.shape else None


def broadcast_broadcast(node, b):  # broadcast_to(broadcast_to(x, s1), s2) -> broadcast_to(x, s2)
    x = node.inputs[0]
    if x.op == "broadcast_to":
        return b.emit("broadcast_to", x.inputs[0], shape=node.shape)
    return None


def broadcast_of_unit_reshape(
    node, b
):  # broadcast_to(reshape(x, (1,)+x.shape), s) -> broadcast_to(x, s)
    x = node.inputs[0]
    if x.op == "reshape" and strip_leading_ones(x.shape) == strip_leading_ones(x.inputs[0].shape):
        return b.emit("broadcast_to", x.inputs[0], shape=node.shape)
    return None


def strip_leading_ones(shape: tuple) -> tuple:
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return tuple(shape[k:])


def transpose_axes(node: Node) -> tuple[int, ...]:
    axes = node.attrs.get("axes")
    ndim = node.ndim
    return tuple(reversed(range(ndim))) if axes is None else tuple(a % max(ndim, 1) for a in axes)


def transpose_identity(node, b):  # transpose(x, (0, 1, ..)) -> x
    if transpose_axes(node) == tuple(range(node.ndim)):
        return same(node, b, node.inputs[0])
    return None


def transpose_transpose(node, b):  # transpose(transpose(x, p), q) -> transpose(x, p∘q), or x
    x = node.inputs[0]
    if x.op != "transpose":
        return None
    inner, outer = transpose_axes(x), transpose_axes(node)
    composed = tuple(inner[k] for k in outer)
    if composed == tuple(range(node.ndim)):
        return same(node, b, x.inputs[0])
    return b.emit("transpose", x.inputs[0], axes=composed)


def astype_same(node, b):  # astype(x, x.dtype) -> x
    x = node.inputs[0]
    return x if x.dtype == node.dtype and x.shape == node.shape else None


# ------------------------------------------------------------ reductions


def reduced_axes(node: Node) -> tuple[int, ...]:
    """The axes a reduction node sums over, normalized and sorted."""
    x = node.inputs[0]
    axis = node.attrs.get("axis")
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted({int(a) % max(x.ndim, 1) for a in axes}))


def sum_trivial(node, b):  # sum(x, axes of length 1 or none) -> reshape(x)  (nothing is added)
    x = node.inputs[0]
    if all(x.shape[a] == 1 for a in reduced_axes(node)):
        return same(node, b, x if x.shape == node.shape else b.emit("reshape", x, shape=node.shape))
    return None


def reduce_of_broadcast(node, b):  # sum/mean/max/min(broadcast_to(x), A): reduce x, not its copies
    """B are the axes broadcast_to repeated x along. Reducing n repeated copies
    is: sum -> times n; mean, max, min -> the value itself. Only the axes A\\B
    still need reducing, on the small x; the remaining axes of the output stay
    repeated (a smaller broadcast)."""
    bcast = node.inputs[0]
    if bcast.op != "broadcast_to" or 0 in bcast.shape:  # empty: sum is 0 even where x is inf
        return None
    x, full = bcast.inputs[0], bcast.shape
    x_full = (1,) * (len(full) - x.ndim) + x.shape  # x with full's rank
    repeated = {i for i, d in enumerate(full) if x_full[i] == 1 and d != 1}
    axes = set(reduced_axes(node))
    if not axes & repeated:
        return None
    keepdims = bool(node.attrs.get("keepdims"))
    y = x
    if axes - repeated:  # reduce what really differs
        if x.shape != x_full:
            y = b.emit("reshape", x, shape=x_full)
        # all of A at once: the repeated axes have size 1 in x, so this gives the small shape
        y = b.emit(node.op, y, axis=tuple(sorted(axes)), keepdims=keepdims)
    count = int(np.prod([full[i] for i in axes & repeated]))
    if node.op == "sum" and count != 1:
        y = b.fit(y, y.shape, node.dtype)  # multiply in the sum's dtype (int32 -> int64)
        y = b.emit("mul", y, b.const(np.asarray(count, node.dtype), node.dtype))
    small = tuple(1 if i in axes else d for i, d in enumerate(x_full) if keepdims or i not in axes)
    if y.shape != small:
        y = b.emit("reshape", y, shape=small)
    return same(node, b, y)


KEEPDIMS_REDUCTIONS = ("sum", "mean", "max", "min", "logsumexp", "var")


def reshape_of_reduction(node, b):  # reshape(sum(x, A), kept shape) -> sum(x, A, keepdims=True)
    r = node.inputs[0]
    if r.op not in KEEPDIMS_REDUCTIONS:
        return None
    x, axes = r.inputs[0], reduced_axes(r)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    dropped = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    for keepdims, shape in ((True, kept), (False, dropped)):
        if node.shape == shape and bool(r.attrs.get("keepdims")) != keepdims:
            return b.emit(r.op, x, **{**r.attrs, "keepdims": keepdims})
    return None


# ------------------------------------------------------------ others


def full_like_const(node, b):  # full_like(x, v) -> broadcast_to(v): x is only read for its shape
    value = np.asarray(node.attrs["value"], dtype=node.dtype)
    return same(node, b, b.const(value, node.dtype))


def pow_small_int(node, b):  # x**1 -> x, x**2 -> x*x, x**0 -> 1 (also for nan, as IEEE pow)
    x, exponent = node.inputs
    if is_filled_with(exponent, 1):
        return same(node, b, x)
    if is_filled_with(exponent, 2):
        return same(node, b, b.emit("mul", x, x))
    if is_filled_with(exponent, 0):
        return same(node, b, b.const(np.ones((), node.dtype), node.dtype))
    return None


def where_known(node, b):  # where(True, x, y) -> x, where(False, x, y) -> y, where(c, x, x) -> x
    cond, x, y = node.inputs
    if x is y:
        return same(node, b, x)
    if is_filled_with(cond, True):
        return same(node, b, x)
    if is_filled_with(cond, False):
        return same(node, b, y)
    return None


def logical_absorbing(
    node, b
):  # and(False, x) -> False, or(True, x) -> True; and(True, x) -> x, or(False, x) -> x
    absorbing = node.op == "logical_or"  # True absorbs in or, False in and
    for side in (0, 1):
        if is_filled_with(node.inputs[side], absorbing):
            return same(node, b, b.const(np.asarray(absorbing), np.dtype(np.bool_)))
    for side in (0, 1):
        other = node.inputs[1 - side]
        if is_filled_with(node.inputs[side], not absorbing) and other.dtype == np.bool_:
            return same(node, b, other)
    return None


def div_by_power_of_two(node, b):  # x / 2^k -> x * 2^-k (exact: both only change the exponent)
    x, divisor = node.inputs
    value = scalar_const(divisor)
    if value is None or not np.issubdtype(node.dtype, np.floating) or not is_power_of_two(value):
        return None
    inverse = b.const(np.asarray(1.0 / float(value), node.dtype), node.dtype)
    return same(node, b, b.emit("mul", x, inverse))


# ------------------------------------------------------------ the table
# One line per rewrite. Within an op the first rule that applies wins; the
# "*" rules (any elementwise op) are tried after the op's own.
RULES: list[Rule] = [
    # arithmetic
    Rule("mul", "x*1 -> x, 1*x -> x (broadcast ones: broadcast_to(x))", mul_by_one),
    Rule("mul", "x*(-1) -> -x", mul_by_minus_one),
    Rule("mul", "x*0 -> 0 for integers (not floats: inf*0 is nan)", mul_by_zero_int),
    Rule("mul", "c1*(c2*x) -> (c1*c2)*x when c1 or c2 is a power of two (exact)", mul_const_const),
    Rule("add", "x+0 -> x, 0+x -> x", add_zero),
    Rule("add", "x+(-y) -> x-y, (-x)+y -> y-x", add_neg),
    Rule("sub", "x-0 -> x", sub_zero),
    Rule("sub", "0-x -> -x", zero_sub),
    Rule("sub", "x-x -> 0 for integers (inf-inf is nan)", sub_self_int),
    Rule("sub", "x-(-y) -> x+y", sub_neg),
    Rule("div", "x/1 -> x", div_by_one),
    Rule("div", "x / 2^k -> x * 2^-k", div_by_power_of_two),
    Rule("neg", "-(-x) -> x", neg_neg),
    Rule("pow", "x**1 -> x, x**2 -> x*x, x**0 -> 1", pow_small_int),
    Rule(
        "where", "where(True, x, y) -> x, where(False, x, y) -> y, where(c, x, x) -> x", where_known
    ),
    Rule("logical_and", "and(False, x) -> False, and(True, x) -> x", logical_absorbing),
    Rule("logical_or", "or(True, x) -> True, or(False, x) -> x", logical_absorbing),
    Rule("full_like", "full_like(x, v) -> broadcast_to(v)", full_like_const),
    Rule("astype", "astype(x, x.dtype) -> x", astype_same),
    Rule(
        "*",
        "op(broadcast_to(x), y) -> broadcast_to(op(x, y)), or op(x, y) if that has the shape",
        sink_broadcasts,
    ),
    # shape ops
    Rule("reshape", "reshape(x, x.shape) -> x", reshape_same),
    Rule("reshape", "reshape(reshape(x)) -> reshape(x)", reshape_reshape),
    Rule(
        "reshape",
        "reshape(sum(x, A), x.shape with 1s at A) -> sum(x, A, keepdims=True), and back",
        reshape_of_reduction,
    ),
    Rule("broadcast_to", "broadcast_to(x, x.shape) -> x", broadcast_same),
    Rule("broadcast_to", "broadcast_to(broadcast_to(x)) -> broadcast_to(x)", broadcast_broadcast),
    Rule(
        "broadcast_to",
        "broadcast_to(reshape(x) adding leading 1s) -> broadcast_to(x)",
        broadcast_of_unit_reshape,
    ),
    Rule("transpose", "transpose(x, identity) -> x", transpose_identity),
    Rule(
        "transpose", "transpose(transpose(x, p), q) -> transpose(x, p∘q) or x", transpose_transpose
    ),
    # reductions
    Rule("sum", "sum over no axes / size-1 axes -> reshape(x)", sum_trivial),
    Rule(
        "sum",
        "sum(broadcast_to(x), repeated axes B) -> x * count(B), re-broadcast",
        reduce_of_broadcast,
    ),
    Rule("mean", "mean(broadcast_to(x), repeated axes) -> x, re-broadcast", reduce_of_broadcast),
    Rule("max", "max(broadcast_to(x), repeated axes) -> x, re-broadcast", reduce_of_broadcast),
    Rule("min", "min(broadcast_to(x), repeated axes) -> x, re-broadcast", reduce_of_broadcast),
]
