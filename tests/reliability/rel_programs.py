"""Random programs over every differentiable primitive, for the property tests.

A program is a list of steps over a growing list of values. Each step applies
one NumPy-named tracegrad op (`tg.exp`, `tg.take_along_axis`, ...) to earlier
values, so the SAME program runs on plain arrays (the NumPy reference), on
eager tensors (dynamic graph) and on tracers (compiled graph). The program's
output is a weighted sum of every value it made, so every step gets a
gradient.

The generator draws its choices from a `Chooser`: hypothesis's `draw` for the
property tests (so failures shrink), or a seeded NumPy RNG for the fixed set
that goes through Numba. It evaluates each step on float64 arrays while it
builds the program, and uses those values to stay away from points where the
gradient is not defined, so finite differences are a valid oracle:
  - log, sqrt, pow bases, divisors: shifted to be >= 0.3;
  - relu, abs, sign, clip, maximum/minimum, where-conditions: no operand
    within DELTA of the kink or tie (a shift is chosen, or the op skipped);
  - max/min reductions: the top two of every reduced slice differ by DELTA
    (a ramp breaks ties, else the step becomes a sum);
  - values are rescaled to |v| <= 2 whenever they exceed 4, so exp chains do
    not overflow and finite differences keep their digits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tracegrad as tg
from tracegrad.ops.core import aval_of

DELTA = 0.05  # distance kept from kinks and ties; finite differences use eps 1e-6
LIMIT = 4.0  # values larger than this are rescaled
SHIFTS = (0.0, 0.13, -0.17, 0.29, -0.31, 0.43, -0.47, 0.61, -0.67, 0.83)


# ------------------------------------------------------------------ choosers


class RngChooser:
    """Choices from a seeded NumPy generator (the fixed, reproducible set)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def pick(self, options):
        options = list(options)
        return options[int(self.rng.integers(len(options)))]

    def bool(self) -> bool:
        return bool(self.rng.integers(2))


class DrawChooser:
    """Choices from hypothesis's `draw`, shrinkable toward the first option.

    Every choice is one wide integer reduced modulo the number of options:
    `st.sampled_from` and narrow `st.integers` lean hard on their first
    values while generating (half the programs were one `abs`); wide integers
    spread evenly, and shrinking still moves each choice toward option 0."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw, self.wide = draw, st.integers(0, 2**16 - 1)

    def int(self, lo: int, hi: int) -> int:
        return lo + self.draw(self.wide) % (hi - lo + 1)

    def pick(self, options):
        options = list(options)
        return options[self.draw(self.wide) % len(options)]

    def bool(self) -> bool:
        return bool(self.draw(self.wide) % 2)


# ------------------------------------------------------------- the op table
# Each entry: name -> fn(*operand values, **params), written with tracegrad ops
# only, so it works on arrays, eager tensors and tracers alike.


def _ramp(a, step):
    """A constant ramp in a's own dtype (a float64 constant would promote float32)."""
    shape, dtype = aval_of(a)
    return (np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape) * step).astype(dtype)


APPLY: dict[str, Callable[..., Any]] = {
    # arithmetic (operators and NumPy names; Python scalars on either side)
    "add": lambda a, b: a + b,
    "sub": lambda a, b: tg.subtract(a, b),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: tg.divide(a, b),
    "neg": lambda a: -a,
    "pow": lambda a, b: tg.power(a, b),
    "add_scalar": lambda a, c: a + c,
    "scale": lambda a, c: tg.multiply(a, c),
    "rsub_scalar": lambda a, c: c - a,
    "rdiv_scalar": lambda a, c: c / a,
    "pow_scalar": lambda a, p: a**p,
    "rpow_scalar": lambda a, c: c**a,
    "add_ramp": lambda a, step: a + _ramp(a, step),
    # elementwise functions
    "exp": lambda a: tg.exp(a),
    "log": lambda a: tg.log(a),
    "sqrt": lambda a: tg.sqrt(a),
    "sin": lambda a: tg.sin(a),
    "cos": lambda a: tg.cos(a),
    "tanh": lambda a: tg.tanh(a),
    "sigmoid": lambda a: tg.sigmoid(a),
    "relu": lambda a: tg.relu(a),
    "abs": lambda a: tg.abs(a),
    "times_sign": lambda a, b: a * tg.sign(b),
    "maximum": lambda a, b: tg.maximum(a, b),
    "minimum": lambda a, b: tg.minimum(a, b),
    "where_gt": lambda u, a, b, t: tg.where(u > t, a, b),
    "clip": lambda a, lo, hi: tg.clip(a, lo, hi),
    # reductions
    "sum": lambda a, axis, keepdims: tg.sum(a, axis=axis, keepdims=keepdims),
    "mean": lambda a, axis, keepdims: tg.mean(a, axis=axis, keepdims=keepdims),
    "max": lambda a, axis, keepdims: tg.max(a, axis=axis, keepdims=keepdims),
    "min": lambda a, axis, keepdims: tg.min(a, axis=axis, keepdims=keepdims),
    "var": lambda a, axis, keepdims, ddof: tg.var(a, axis=axis, keepdims=keepdims, ddof=ddof),
    "logsumexp": lambda a, axis, keepdims: tg.logsumexp(a, axis=axis, keepdims=keepdims),
    # softmax family
    "softmax": lambda a, axis: tg.softmax(a, axis=axis),
    "log_softmax": lambda a, axis: tg.log_softmax(a, axis=axis),
    # shape ops
    "reshape": lambda a, shape: tg.reshape(a, shape),
    "transpose": lambda a, axes: tg.transpose(a, axes),
    "expand_dims": lambda a, axis: tg.expand_dims(a, axis),
    "squeeze": lambda a, axis: tg.squeeze(a, axis),
    "broadcast_to": lambda a, shape: tg.broadcast_to(a, shape),
    "concatenate": lambda *xs, axis: tg.concatenate(list(xs), axis=axis),
    "stack": lambda *xs, axis: tg.stack(list(xs), axis=axis),
    # linear algebra
    "matmul": lambda a, b: tg.matmul(a, b),
    "matmul_op": lambda a, b: a @ b,
    "gram": lambda a: tg.matmul(
        a,
        a
        if np.ndim(a) == 1
        else tg.transpose(a, tuple(range(np.ndim(a) - 2)) + (np.ndim(a) - 1, np.ndim(a) - 2)),
    ),
    # indexing
    "getitem": lambda a, index: tg.getitem(a, _unfreeze(index)),
    "take_along_axis": lambda a, idx, axis: tg.take_along_axis(a, _unfreeze(idx), axis=axis),
}


# The same ops spelled with NumPy's functions and methods: on tracers they are captured
# through __array_ufunc__ / __array_function__ (compiled mode only; eager tensors follow
# PyTorch, which does not take part in NumPy's protocols for tensors that need grad).
APPLY_NUMPY: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: np.add(a, b),
    "sub": lambda a, b: np.subtract(a, b),
    "mul": lambda a, b: np.multiply(a, b),
    "div": lambda a, b: np.divide(a, b),
    "neg": lambda a: np.negative(a),
    "pow": lambda a, b: np.power(a, b),
    "exp": lambda a: np.exp(a),
    "log": lambda a: np.log(a),
    "sqrt": lambda a: np.sqrt(a),
    "sin": lambda a: np.sin(a),
    "cos": lambda a: np.cos(a),
    "tanh": lambda a: np.tanh(a),
    "abs": lambda a: np.abs(a),
    "times_sign": lambda a, b: a * np.sign(b),
    "maximum": lambda a, b: np.maximum(a, b),
    "minimum": lambda a, b: np.minimum(a, b),
    "where_gt": lambda u, a, b, t: np.where(u > t, a, b),
    "sum": lambda a, axis, keepdims: np.sum(a, axis=axis, keepdims=keepdims),
    "mean": lambda a, axis, keepdims: a.mean(axis=axis, keepdims=keepdims),
    "max": lambda a, axis, keepdims: np.max(a, axis=axis, keepdims=keepdims),
    "min": lambda a, axis, keepdims: a.min(axis=axis, keepdims=keepdims),
    "var": lambda a, axis, keepdims, ddof: np.var(a, axis=axis, keepdims=keepdims, ddof=ddof),
    "reshape": lambda a, shape: np.reshape(a, shape),
    "transpose": lambda a, axes: np.transpose(a, axes),
    "expand_dims": lambda a, axis: np.expand_dims(a, axis),
    "squeeze": lambda a, axis: np.squeeze(a, axis),
    "broadcast_to": lambda a, shape: np.broadcast_to(a, shape),
    "concatenate": lambda *xs, axis: np.concatenate(list(xs), axis=axis),
    "stack": lambda *xs, axis: np.stack(list(xs), axis=axis),
    "matmul": lambda a, b: np.matmul(a, b),
    "gram": lambda a: (
        a
        @ (
            a
            if np.ndim(a) == 1
            else np.transpose(a, tuple(range(np.ndim(a) - 2)) + (np.ndim(a) - 1, np.ndim(a) - 2))
        )
    ),
    "getitem": lambda a, index: a[_unfreeze(index)],
    "take_along_axis": lambda a, idx, axis: np.take_along_axis(a, _unfreeze(idx), axis=axis),
}


def _freeze(index):
    """Index arrays become (marker, tuple) so steps print and compare nicely."""
    if isinstance(index, np.ndarray):
        return ("array", index.dtype.str, index.shape, tuple(index.ravel().tolist()))
    if isinstance(index, tuple):
        return tuple(_freeze(i) for i in index)
    return index


def _unfreeze(index):
    if isinstance(index, tuple) and len(index) == 4 and index[0] == "array":
        return np.array(index[3], dtype=np.dtype(index[1])).reshape(index[2])
    if isinstance(index, tuple):
        return tuple(_unfreeze(i) for i in index)
    return index


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple  # value numbers; ("in", k) marks a program input
    params: tuple = ()  # static parameters, (name, value) pairs

    def __repr__(self) -> str:
        args = ", ".join(f"v{a}" for a in self.args)
        params = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.op}({args}{', ' if args and params else ''}{params})"


@dataclass
class Program:
    inputs: list  # float64 arrays
    steps: list  # Step; value i (i >= len(inputs)) is made by steps[i - len(inputs)]
    weights: list = field(default_factory=list)  # one array per value, for the output

    def __repr__(self) -> str:
        n = len(self.inputs)
        lines = [f"v{i} = input {x.shape}" for i, x in enumerate(self.inputs)]
        lines += [f"v{n + i} = {s!r}" for i, s in enumerate(self.steps)]
        return "Program(\n  " + "\n  ".join(lines) + "\n)"

    def values(self, inputs, numpy_spelling: bool = False) -> list:
        vals = list(inputs)
        for step in self.steps:
            fn = APPLY_NUMPY.get(step.op, APPLY[step.op]) if numpy_spelling else APPLY[step.op]
            vals.append(fn(*[vals[a] for a in step.args], **dict(step.params)))
        return vals

    def __call__(self, *inputs, numpy_spelling: bool = False):
        """The program's scalar output: sum over every value of sum(value * weight)."""
        vals = self.values(inputs, numpy_spelling)
        total = 0.0
        for v, w in zip(vals, self.weights, strict=True):
            total = total + tg.sum(v * w)
        return total

    def ops(self) -> set:
        return {s.op for s in self.steps}

    def with_dtype(self, dtype) -> tuple:
        """(inputs, program) with inputs and weights cast to `dtype`."""
        prog = Program(self.inputs, self.steps, [w.astype(dtype) for w in self.weights])
        return [x.astype(dtype) for x in self.inputs], prog


# ------------------------------------------------------------------- builder


class Builder:
    """Grows a program while evaluating it in float64."""

    def __init__(self, ch):
        self.ch = ch
        self.data_rng = np.random.default_rng(ch.int(0, 2**16))
        self.inputs: list[np.ndarray] = []
        self.steps: list[Step] = []
        self.vals: list[np.ndarray] = []
        self.too_big: set[int] = set()  # values that were rescaled: only their copy is used

    # ---- values
    def new_input(self, shape: tuple) -> int:
        if self.steps:  # inputs come first: renumber by rebuilding
            raise RuntimeError("inputs are created before steps")
        x = self.data_rng.uniform(-1.5, 1.5, shape)
        self.inputs.append(x)
        self.vals.append(x)
        return len(self.vals) - 1

    def emit(self, op: str, args: tuple, **params) -> int:
        value = np.asarray(APPLY[op](*[self.vals[a] for a in args], **params))
        if value.dtype != np.float64:
            raise AssertionError(f"{op} gave {value.dtype}")
        self.steps.append(Step(op, tuple(args), tuple(params.items())))
        self.vals.append(value)
        k = len(self.vals) - 1
        peak = float(np.max(np.abs(value))) if value.size else 0.0
        if peak > LIMIT:  # keep magnitudes small (exp chains, pow)
            self.too_big.add(k)
            return self.emit("scale", (k,), c=2.0 / peak)
        return k

    def shape(self, k: int) -> tuple:
        return self.vals[k].shape

    def pick(self, ok=lambda k: True) -> int | None:
        good = [k for k in range(len(self.vals)) if k not in self.too_big and ok(k)]
        return self.ch.pick(good) if good else None

    def partner(self, k: int, ok=None) -> int:
        """A value that broadcasts against value k (k itself if nothing else does)."""

        def fits(j):
            try:
                np.broadcast_shapes(self.shape(k), self.shape(j))
            except ValueError:
                return False
            return ok is None or ok(j)

        return (
            self.pick(fits)
            if any(fits(j) for j in range(len(self.vals)) if j not in self.too_big)
            else k
        )

    # ---- guards
    def positive(self, k: int, floor: float = 0.3) -> int:
        low = float(np.min(self.vals[k]))
        if low >= floor:
            return k
        return self.emit("add_scalar", (k,), c=round(math.ceil((floor - low) * 100) / 100 + 0.2, 2))

    def shift_away(self, k: int, distance_of) -> int | None:
        """Shift value k by a constant so that min |distance_of(v + c)| > DELTA."""
        for c in SHIFTS:
            if np.min(np.abs(distance_of(self.vals[k] + c)), initial=np.inf) > DELTA:
                return k if c == 0.0 else self.emit("add_scalar", (k,), c=c)
        return None

    def axis_choice(self, ndim: int, single: bool = False):
        if ndim == 0:
            return None
        kind = self.ch.pick(["none", "int", "int", "tuple"] if not single else ["int"])
        if kind == "none":
            return None
        if kind == "int":
            return self.ch.int(-ndim, ndim - 1)
        chosen = [a for a in range(ndim) if self.ch.bool()] or [0]
        return tuple(a - ndim if self.ch.bool() else a for a in chosen)


# ---------------------------------------------------------------- generators
# Each generator adds one op (plus any guard steps) or does nothing if the op
# does not fit the values at hand.


def gen_unary(name):
    def gen(b: Builder):
        b.emit(name, (b.pick(),))

    return gen


def gen_domain(name, floor=0.3):
    def gen(b: Builder):
        b.emit(name, (b.positive(b.pick(), floor),))

    return gen


def gen_kink(name):  # relu, abs: away from 0
    def gen(b: Builder):
        k = b.shift_away(b.pick(), lambda v: v)
        if k is not None:
            b.emit(name, (k,))

    return gen


def gen_times_sign(b: Builder):
    a = b.pick()
    s = b.shift_away(b.partner(a), lambda v: v)
    if s is not None:
        b.emit("times_sign", (a, s))


def gen_binary(name):
    def gen(b: Builder):
        a = b.pick()
        other = b.partner(a)
        b.emit(name, (a, other) if b.ch.bool() else (other, a))

    return gen


def gen_div(b: Builder):
    a = b.pick()
    b.emit("div", (a, b.positive(b.partner(a))))


def gen_pow(b: Builder):
    a = b.positive(b.pick())
    exponent = b.partner(a)
    b.emit("pow", (a, exponent))


def gen_scalar_op(b: Builder):
    kind = b.ch.pick(
        ["add_scalar", "scale", "rsub_scalar", "rdiv_scalar", "pow_scalar", "rpow_scalar"]
    )
    a = b.pick()
    if kind == "rdiv_scalar":
        b.emit(kind, (b.positive(a),), c=b.ch.pick([1.0, -2.5, 3]))
    elif kind == "pow_scalar":
        p = b.ch.pick([2, 3, 0.5, -1, 1.5, 2.0])
        if p != int(p) or p < 0:
            a = b.positive(a)
        b.emit(kind, (a,), p=p)
    elif kind == "rpow_scalar":
        b.emit(kind, (a,), c=b.ch.pick([2.0, 0.5, 3]))
    else:
        b.emit(kind, (a,), c=b.ch.pick([1.5, -0.75, 2, 0.5]))


def gen_extremum_binary(name):
    def gen(b: Builder):
        a = b.pick()
        other = b.partner(a)
        if other == a:
            return
        shifted = b.shift_away(other, lambda v: b.vals[a] - v)
        if shifted is not None:
            b.emit(name, (a, shifted))

    return gen


def gen_where(b: Builder):
    u = b.pick()
    thresholds = [0.0, 0.2, -0.3, 0.55, -0.8, 1.1]
    good = [t for t in thresholds if np.min(np.abs(b.vals[u] - t), initial=np.inf) > DELTA]
    t = b.ch.pick(good) if good else float(np.min(b.vals[u])) - 1.0
    x = b.partner(u)
    y = b.partner(x, ok=lambda j: _broadcasts(b, u, x, j))
    b.emit("where_gt", (u, x, y), t=t)


def _broadcasts(b, *ks):
    try:
        np.broadcast_shapes(*[b.shape(k) for k in ks])
        return True
    except ValueError:
        return False


def gen_clip(b: Builder):
    a = b.pick()
    v = b.vals[a]

    def safe(bound):
        return bound is not None and np.min(np.abs(v - bound), initial=np.inf) > DELTA

    lo = b.ch.pick([None, -0.5, -0.2, 0.1])
    hi = b.ch.pick([None, 0.4, 0.8, 1.2])
    lo = lo if safe(lo) else None
    hi = hi if safe(hi) and (lo is None or hi > lo) else None
    b.emit("clip", (a,), lo=lo, hi=hi)


def gen_reduce(name):
    def gen(b: Builder):
        a = b.pick()
        axis = b.axis_choice(len(b.shape(a)))
        keepdims = b.ch.bool()
        if name == "var":
            b.emit(
                name,
                (a,),
                axis=axis,
                keepdims=keepdims,
                ddof=b.ch.pick([0, 0, 1]) if _reduced_count(b.shape(a), axis) > 1 else 0,
            )
        else:
            b.emit(name, (a,), axis=axis, keepdims=keepdims)

    return gen


def _reduced_count(shape, axis) -> int:
    if axis is None:
        return int(np.prod(shape, dtype=np.int64))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[x] for x in axes], dtype=np.int64))


def _top_gap(v: np.ndarray, axis) -> float:
    """The smallest gap between the largest and second-largest of each slice."""
    if axis is None:
        flat = v.reshape(1, -1)
    else:
        axes = tuple(x % v.ndim for x in ((axis,) if isinstance(axis, int) else axis))
        rest = [d for d in range(v.ndim) if d not in axes]
        flat = np.transpose(v, rest + list(axes)).reshape(
            int(np.prod([v.shape[d] for d in rest], dtype=np.int64)), -1
        )
    if flat.shape[1] < 2:
        return np.inf
    top = np.sort(flat, axis=1)
    return float(np.min(top[:, -1] - top[:, -2]))


def gen_extremum(name):
    def gen(b: Builder):
        a = b.pick()
        axis = b.axis_choice(len(b.shape(a)))
        keepdims = b.ch.bool()
        sign = 1 if name == "max" else -1
        if _top_gap(sign * b.vals[a], axis) <= DELTA:
            a = b.emit("add_ramp", (a,), step=b.ch.pick([0.11, -0.13]))
            if _top_gap(sign * b.vals[a], axis) <= DELTA:
                b.emit("sum", (a,), axis=axis, keepdims=keepdims)
                return
        b.emit(name, (a,), axis=axis, keepdims=keepdims)

    return gen


def gen_softmax(name):
    def gen(b: Builder):
        a = b.pick(lambda k: len(b.shape(k)) >= 1)
        if a is not None:
            nd = len(b.shape(a))
            b.emit(name, (a,), axis=b.ch.int(-nd, nd - 1))

    return gen


def _factor_shapes(shape: tuple) -> list:
    size = int(np.prod(shape, dtype=np.int64))
    out = [(size,), (-1,), tuple(reversed(shape)), (1,) + tuple(shape), tuple(shape) + (1,)]
    out += [(p, size // p) for p in range(2, size) if size % p == 0]
    if size == 1:
        out += [(), (1, 1)]
    return out


def gen_reshape(b: Builder):
    a = b.pick()
    b.emit("reshape", (a,), shape=b.ch.pick(_factor_shapes(b.shape(a))))


def gen_transpose(b: Builder):
    a = b.pick(lambda k: len(b.shape(k)) >= 2)
    if a is None:
        return
    nd = len(b.shape(a))
    perms = list(itertools.permutations(range(nd)))
    axes = b.ch.pick([None] + perms[1:])
    if axes is not None and b.ch.bool():
        axes = tuple(x - nd for x in axes)  # negative axes too
    b.emit("transpose", (a,), axes=axes)


def gen_expand_squeeze(b: Builder):
    a = b.pick()
    shape = b.shape(a)
    units = [i for i, d in enumerate(shape) if d == 1]
    if units and b.ch.bool():
        b.emit("squeeze", (a,), axis=b.ch.pick([None] + units + [u - len(shape) for u in units]))
    else:
        nd = len(shape) + 1
        b.emit("expand_dims", (a,), axis=b.ch.int(-nd, nd - 1))


def gen_broadcast_to(b: Builder):
    a = b.pick()
    shape = b.shape(a)
    options = [(2,) + shape]
    options += [shape[:i] + (3,) + shape[i + 1 :] for i, d in enumerate(shape) if d == 1]
    b.emit("broadcast_to", (a,), shape=b.ch.pick(options))


def gen_concatenate(b: Builder):
    a = b.pick(lambda k: len(b.shape(k)) >= 1)
    if a is None:
        return
    shape = b.shape(a)
    nd = len(shape)
    axis = b.ch.int(-nd, nd - 1)
    ax = axis % nd

    def fits(j):
        s = b.shape(j)
        return len(s) == nd and all(s[d] == shape[d] for d in range(nd) if d != ax)

    parts = [a] + [b.pick(fits) for _ in range(b.ch.int(1, 2))]
    b.emit("concatenate", tuple(parts), axis=axis)


def gen_stack(b: Builder):
    a = b.pick()
    shape = b.shape(a)
    other = b.pick(lambda j: b.shape(j) == shape)
    nd = len(shape) + 1
    b.emit("stack", (a, other), axis=b.ch.int(-nd, nd - 1))


def gen_matmul(b: Builder):
    """a @ W or W @ a with a new input W (inputs are drawn first: W is made of
    values instead, through a reshape of an existing value when sizes allow)."""
    a = b.pick(lambda k: len(b.shape(k)) >= 1)
    if a is None:
        return
    shape = b.shape(a)
    form = b.ch.pick(["right", "left", "gram"])
    if form == "gram":
        b.emit("gram", (a,))
        return
    # the other operand: a reshaped copy of some value with the needed inner dim
    k_dim = shape[-1] if form == "right" else (shape[-2] if len(shape) >= 2 else shape[0])
    donors = [j for j in range(len(b.vals)) if b.vals[j].size % k_dim == 0 and j not in b.too_big]
    d = b.ch.pick(donors)
    m = b.vals[d].size // k_dim
    if form == "right":
        w_shape = b.ch.pick([(k_dim, m), (k_dim * m,)] if m == 1 else [(k_dim, m)])
        if m > 1 and m % 2 == 0 and len(shape) == 2 and b.ch.bool():
            w_shape = (2, k_dim, m // 2)  # a batched right operand
        w = b.emit("reshape", (d,), shape=w_shape)
        b.emit(b.ch.pick(["matmul", "matmul_op"]), (a, w))
    else:
        w = b.emit("reshape", (d,), shape=(m, k_dim) if m > 1 or b.ch.bool() else (k_dim,))
        b.emit(b.ch.pick(["matmul", "matmul_op"]), (w, a))


def gen_getitem(b: Builder):
    a = b.pick()
    shape = b.shape(a)
    for _attempt in range(4):
        index = _random_index(b.ch, shape)
        try:
            result = b.vals[a][_unfreeze(index)]
        except IndexError:
            continue
        if result.size:
            b.emit("getitem", (a,), index=index)
            return


def _random_index(ch, shape: tuple):
    """A NumPy index: ints, slices (negative steps too), None, ..., index arrays, masks."""
    nd = len(shape)
    if nd and ch.int(0, 4) == 0:  # an integer index array (repeats) or a bool mask on one axis
        ax = ch.int(0, nd - 1)
        n = shape[ax]
        if ch.bool():
            arr = np.array([ch.int(-n, n - 1) for _ in range(ch.int(1, 4))], dtype=np.int64)
            if ch.bool() and arr.size % 2 == 0:
                arr = arr.reshape(2, -1)
        else:
            arr = np.array([ch.bool() for _ in range(n)])
            arr[ch.int(0, n - 1)] = True
        return _freeze((slice(None),) * ax + (arr,))
    entries = []
    used = 0
    ellipsis = False
    while used < nd:
        kind = ch.pick(["int", "slice", "slice", "none", "full"] + ([] if ellipsis else ["..."]))
        if kind == "...":
            entries.append(Ellipsis)
            ellipsis = True
            used = nd  # the ellipsis takes what is left
            continue
        n = shape[used]
        if kind == "int":
            entries.append(ch.int(-n, n - 1))
        elif kind == "slice":
            step = ch.pick([1, 2, -1, -2, None])
            start = ch.pick([None, 0, 1, -1, n - 1])
            stop = ch.pick([None, n, 1, -n - 1, -1])
            entries.append(slice(start, stop, step))
        elif kind == "full":
            entries.append(slice(None))
        else:
            entries.append(None)
            continue
        used += 1
    return tuple(entries)


def gen_take_along_axis(b: Builder):
    a = b.pick(lambda k: len(b.shape(k)) >= 1)
    if a is None:
        return
    shape = b.shape(a)
    nd = len(shape)
    axis = b.ch.int(-nd, nd - 1)
    ax = axis % nd
    n = shape[ax]
    idx_shape = tuple(
        b.ch.int(1, 3) if d == ax else (shape[d] if b.ch.bool() else 1) for d in range(nd)
    )
    size = int(np.prod(idx_shape, dtype=np.int64))
    idx = np.array([b.ch.int(0, n - 1) for _ in range(size)], dtype=np.int64).reshape(idx_shape)
    b.emit("take_along_axis", (a,), idx=_freeze(idx), axis=axis)


GENERATORS: dict[str, Callable[[Builder], None]] = {
    "exp": gen_unary("exp"),
    "sin": gen_unary("sin"),
    "cos": gen_unary("cos"),
    "tanh": gen_unary("tanh"),
    "sigmoid": gen_unary("sigmoid"),
    "neg": gen_unary("neg"),
    "log": gen_domain("log"),
    "sqrt": gen_domain("sqrt"),
    "relu": gen_kink("relu"),
    "abs": gen_kink("abs"),
    "times_sign": gen_times_sign,
    "add": gen_binary("add"),
    "sub": gen_binary("sub"),
    "mul": gen_binary("mul"),
    "div": gen_div,
    "pow": gen_pow,
    "scalar": gen_scalar_op,
    "maximum": gen_extremum_binary("maximum"),
    "minimum": gen_extremum_binary("minimum"),
    "where": gen_where,
    "clip": gen_clip,
    "sum": gen_reduce("sum"),
    "mean": gen_reduce("mean"),
    "var": gen_reduce("var"),
    "logsumexp": gen_reduce("logsumexp"),
    "max": gen_extremum("max"),
    "min": gen_extremum("min"),
    "softmax": gen_softmax("softmax"),
    "log_softmax": gen_softmax("log_softmax"),
    "reshape": gen_reshape,
    "transpose": gen_transpose,
    "expand_squeeze": gen_expand_squeeze,
    "broadcast_to": gen_broadcast_to,
    "concatenate": gen_concatenate,
    "stack": gen_stack,
    "matmul": gen_matmul,
    "getitem": gen_getitem,
    "take_along_axis": gen_take_along_axis,
}


def generate(ch, max_steps: int = 6, only: list[str] | None = None, first: tuple = ()) -> Program:
    """A random program: 1-3 inputs of broadcastable shapes, then the generators
    named in `first`, then 1..max_steps ops drawn from `only` (default: all)."""
    b = Builder(ch)
    # (a chooser's "simplest" choice is option 0: rank 2, full dims, one input)
    rank = ch.pick([2, 1, 3, 0, 2, 3, 1, 2])
    base = tuple(ch.pick([2, 3, 1]) for _ in range(rank))
    for _ in range(ch.int(1, 3)):
        drop = ch.pick([0, 0, 1, rank])
        b.new_input(tuple(1 if ch.int(0, 3) == 3 else d for d in base[min(drop, rank) :]))
    names = only or list(GENERATORS)
    for name in first:
        GENERATORS[name](b)
    for _ in range(ch.int(1, max_steps)):
        GENERATORS[ch.pick(names)](b)
    weights = [b.data_rng.uniform(0.5, 1.5, v.shape) for v in b.vals]
    return Program(b.inputs, b.steps, weights)
