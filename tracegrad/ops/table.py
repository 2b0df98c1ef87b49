"""The rule table: every primitive tracegrad knows, one definition each.

Each entry holds its NumPy implementation, its shape/dtype rule, one
vector-Jacobian rule per input (written in tracegrad ops, so the rule works on
eager tensors, on tracers and on plain arrays), the PyTorch name of its eager
backward node, what that node saves, and its code generation.

For elementwise primitives `codegen` is a scalar expression template over the
operands `{0}`, `{1}`, ... (fast math helpers such as `tg_exp` live in
tracegrad.codegen.mathlib). For structured primitives `codegen` names a loop
template in tracegrad.codegen that reads the node's attrs.

Gradients returned by a rule may have the broadcast output shape; the autodiff
drivers sum them back to each input's shape (`sum_to_shape`), once, for all ops.
"""
from __future__ import annotations

import numpy as np

from tracegrad.ops.core import Aval, DTypeError, ShapeError, op_error, primitive, promote

# ------------------------------------------------------------------ helpers


def broadcast_shapes(name, *avals):
    shapes = [a.shape if isinstance(a, Aval) else () for a in avals]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise op_error(name, [a for a in avals if isinstance(a, Aval)],
                       "shapes cannot be broadcast together") from None


def elementwise_rule(name, float_only=False):
    def rule(*avals, **attrs):
        shape = broadcast_shapes(name, *avals)
        dtype = promote(*avals)
        if float_only and not np.issubdtype(dtype, np.floating):
            raise op_error(name, [a for a in avals if isinstance(a, Aval)],
                           f"expected floating-point operands, got {dtype}", cls=DTypeError)
        return Aval(shape, dtype)
    return rule


def comparison_rule(name):
    def rule(*avals, **attrs):
        return Aval(broadcast_shapes(name, *avals), np.dtype(bool))
    return rule


# --------------------------------------------------------------- arithmetic

add = primitive(
    "add", impl=np.add, shape_rule=elementwise_rule("add"), kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: g),
    torch_name="AddBackward0", saves=(), codegen="({0} + {1})")

sub = primitive(
    "sub", impl=np.subtract, shape_rule=elementwise_rule("sub"), kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: neg(g)),
    torch_name="SubBackward0", saves=(), codegen="({0} - {1})")

mul = primitive(
    "mul", impl=np.multiply, shape_rule=elementwise_rule("mul"), kind="elementwise",
    vjps=(lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(g, x)),
    torch_name="MulBackward0", saves=(0, 1), codegen="({0} * {1})")

div = primitive(
    "div", impl=np.true_divide, shape_rule=elementwise_rule("div", float_only=False),
    kind="elementwise",
    vjps=(lambda g, out, x, y: div(g, y),
          lambda g, out, x, y: neg(div(mul(g, x), mul(y, y)))),
    torch_name="DivBackward0", saves=(0, 1), codegen="({0} / {1})")

neg = primitive(
    "neg", impl=np.negative, shape_rule=elementwise_rule("neg"), kind="elementwise",
    vjps=(lambda g, out, x: neg(g),),
    torch_name="NegBackward0", saves=(), codegen="(-{0})")

# ------------------------------------------------------ elementwise functions

exp = primitive(
    "exp", impl=np.exp, shape_rule=elementwise_rule("exp", float_only=True), kind="elementwise",
    vjps=(lambda g, out, x: mul(g, out),),
    torch_name="ExpBackward0", saves=("out",), codegen="tg_exp({0})")

tanh = primitive(
    "tanh", impl=np.tanh, shape_rule=elementwise_rule("tanh", float_only=True),
    kind="elementwise",
    vjps=(lambda g, out, x: mul(g, sub(1.0, mul(out, out))),),
    torch_name="TanhBackward0", saves=("out",), codegen="tg_tanh({0})")

# --------------------------------------------------------------- reductions


def _norm_axis(name, aval, axis):
    if axis is None:
        return tuple(range(aval.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -aval.ndim <= a < max(aval.ndim, 1):
            raise op_error(name, [aval], f"axis {a} is out of range for {aval.ndim}-d input")
        out.append(a % max(aval.ndim, 1))
    return tuple(sorted(set(out)))


def reduce_rule(name):
    def rule(x, axis=None, keepdims=False):
        axes = _norm_axis(name, x, axis)
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return Aval(shape, x.dtype)
    return rule


def _sum_vjp(g, out, x, axis=None, keepdims=False):
    # Put the reduced axes back as size-1 dims, then broadcast.
    if not keepdims:
        g = reshape(g, shape=_kept_shape(np.shape(x), axis))
    return broadcast_to(g, shape=tuple(np.shape(x)))


def _kept_shape(shape, axis):
    nd = len(shape)
    axes = range(nd) if axis is None else [a % nd for a in ((axis,) if isinstance(axis, int) else axis)]
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


sum_ = primitive(
    "sum", impl=lambda x, axis=None, keepdims=False: np.asarray(np.sum(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("sum"), kind="reduction",
    vjps=(_sum_vjp,),
    torch_name=lambda x, axis=None, keepdims=False: "SumBackward0" if axis is None else "SumBackward1",
    saves=(), codegen="reduce_sum")

# --------------------------------------------------------------- shape ops


def _reshape_rule(x, shape):
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64)):
        raise op_error("reshape", [x], f"cannot reshape to {tuple(shape)}")
    return Aval(tuple(shape), x.dtype)


reshape = primitive(
    "reshape", impl=lambda x, shape: np.reshape(x, shape), shape_rule=_reshape_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: reshape(g, shape=tuple(np.shape(x))),),
    torch_name="ViewBackward0", saves=(), codegen="reshape")


def _broadcast_to_rule(x, shape):
    try:
        np.broadcast_shapes(x.shape, tuple(shape))
        ok = len(shape) >= x.ndim and tuple(np.broadcast_shapes(x.shape, tuple(shape))) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise op_error("broadcast_to", [x], f"cannot broadcast to {tuple(shape)}")
    return Aval(tuple(shape), x.dtype)


broadcast_to = primitive(
    "broadcast_to", impl=lambda x, shape: np.broadcast_to(x, shape), shape_rule=_broadcast_to_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: g,),  # the driver sums g back to x's shape
    torch_name="ExpandBackward0", saves=(), codegen="broadcast")


def sum_to_shape(g, shape):
    """Undo broadcasting: sum `g` down to `shape`. Used once, by the AD drivers."""
    shape = tuple(shape)
    gshape = tuple(np.shape(g))
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and gshape[i + lead] != 1)
    if axes:
        g = sum_(g, axis=axes, keepdims=False)
    if tuple(np.shape(g)) != shape:
        g = reshape(g, shape=shape)
    return g


# ------------------------------------------------------------------- matmul


def _matmul_rule(x, y):
    if x.ndim == 0 or y.ndim == 0:
        raise op_error("matmul", [x, y], "both operands must have at least one dimension")
    k1 = x.shape[-1]
    k2 = y.shape[-2] if y.ndim >= 2 else y.shape[0]
    if k1 != k2:
        raise op_error("matmul", [x, y],
                       f"inner dimensions differ ({k1} vs {k2})")
    xb = x.shape[:-2] if x.ndim >= 2 else ()
    yb = y.shape[:-2] if y.ndim >= 2 else ()
    batch = broadcast_shapes("matmul", Aval(xb, x.dtype), Aval(yb, y.dtype))
    core = (x.shape[-2],) if x.ndim >= 2 else ()
    core += (y.shape[-1],) if y.ndim >= 2 else ()
    return Aval(batch + core, promote(x, y))
