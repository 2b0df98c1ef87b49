"""Test kit for the rule table: a tiny tape-based reverse mode over the primitives.

`Rec` is a value kind (priority 5, below eager's 10 and the tracer's 20) that
records every primitive applied to it. Each call also runs the primitive's
shape rule and checks it against the value that `impl` produced, so every op
exercised here checks its shape/dtype rule too.

`grad(f)` differentiates a scalar function by running the vjp rules ON Rec
values, so the backward pass is itself recorded and `grad(grad-ish(f))`
works: this is how the tests prove that every vjp is written in tracegrad ops.
"""

from __future__ import annotations

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import aval_of, register_value_kind
from tracegrad.ops.operators import ArrayMethods, ArrayOperators


class Rec(ArrayOperators, ArrayMethods):
    """An ndarray plus the tape entry that made it."""

    __slots__ = ("value", "parents")
    TAPE: list = []
    # NumPy defers `ndarray + Rec` to Rec.__radd__, and np.cos(Rec) raises: a vjp that
    # calls NumPy directly instead of tracegrad ops fails here instead of going concrete.
    __array_ufunc__ = None

    def __init__(self, value, parents=None):
        self.value = np.asarray(value)
        self.parents = parents  # (prim, args, attrs) or None for a leaf

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim)

    def __array__(self, dtype=None, copy=None):
        return self.value if dtype is None else self.value.astype(dtype)

    def __repr__(self) -> str:
        return f"Rec({self.value!r})"


def _unwrap(a):
    return a.value if isinstance(a, Rec) else a


def _apply(prim, args, attrs):
    values = [_unwrap(a) for a in args]
    out = np.asarray(prim.impl(*values, **attrs))
    aval = prim.shape_rule(*[a if T.is_static_scalar(a) else aval_of(a) for a in values], **attrs)
    assert tuple(aval.shape) == out.shape, (prim.name, attrs, aval, out.shape)
    assert np.dtype(aval.dtype) == out.dtype, (prim.name, attrs, aval, out.dtype)
    node = Rec(out, (prim, tuple(args), dict(attrs)))
    Rec.TAPE.append(node)
    return node


register_value_kind(Rec, 5, _apply)


def backward(out: Rec, wrt: list[Rec]) -> list:
    """Cotangents of `out` (scalar) for each of `wrt`; the backward ops are recorded."""
    tape = [n for n in Rec.TAPE]  # snapshot: ops recorded by the vjps are not walked now
    # as the real drivers, run a vjp only for an operand that depends on `wrt` (a shape
    # parameter without a gradient rule, betainc's a, raises when asked for one)
    needs = {id(w) for w in wrt}
    for node in tape:
        if node.parents is not None and any(id(a) in needs for a in node.parents[1]):
            needs.add(id(node))
    cts = {id(out): T.full_like(out, value=1)}
    for node in reversed(tape):
        ct = cts.pop(id(node), None)
        if ct is None or node.parents is None:
            continue
        prim, args, attrs = node.parents
        if prim.nondiff:
            continue
        for i, a in enumerate(args):
            if not isinstance(a, Rec) or not np.issubdtype(a.dtype, np.floating):
                continue
            if id(a) not in needs:
                continue
            c = prim.vjps[i](ct, node, *args, **attrs)
            if c is None:
                continue
            c = T.sum_to_shape(c, a.shape)
            if aval_of(c).dtype != a.dtype:
                c = T.astype(c, dtype=a.dtype.name)
            cts[id(a)] = c if id(a) not in cts else T.add(cts[id(a)], c)
    return [cts.get(id(w)) for w in wrt]


def grad(f, argnums=0):
    """grad of a scalar f at ndarray or Rec arguments; returns Rec values (for nesting)."""

    def grad_f(*args):
        if not any(isinstance(a, Rec) for a in args):
            Rec.TAPE.clear()  # outermost call: nothing older can be reached
        recs = [a if isinstance(a, Rec) else Rec(a) for a in args]
        out = f(*recs)
        assert out.shape == (), f"grad needs a scalar output, got {out.shape}"
        idx = (argnums,) if isinstance(argnums, int) else argnums
        cts = backward(out, [recs[i] for i in idx])
        cts = [
            T.full_like(recs[i], value=0) if c is None else c for i, c in zip(idx, cts, strict=True)
        ]
        return cts[0] if isinstance(argnums, int) else tuple(cts)

    return grad_f


def value(v) -> np.ndarray:
    return np.asarray(_unwrap(v))


def numeric_grad(f, args, argnum, eps=1e-6):
    """Central finite differences of scalar f (on ndarrays, float64) wrt args[argnum]."""
    x = np.array(args[argnum], dtype=np.float64)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        a_plus = list(args)
        a_plus[argnum] = plus
        a_minus = list(args)
        a_minus[argnum] = minus
        out[i] = (float(value(f(*a_plus))) - float(value(f(*a_minus)))) / (2 * eps)
    return out
