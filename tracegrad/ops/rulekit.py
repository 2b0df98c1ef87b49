"""Building blocks for the rule table (tracegrad/ops/table.py).

Shape and dtype rules shared by many primitives (broadcasting, reduction axes,
NumPy indexing), the `PerOperand` holder for the vjps of variadic primitives,
and small helpers the rules use. table.py then reads as one list of primitives.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tracegrad.ops.core import Aval, DTypeError, ShapeError, aval_of, op_error, promote

# ------------------------------------------------------------ values and dtypes


def as_aval(v) -> Aval:
    return v if isinstance(v, Aval) else aval_of(v)


def array_avals(*vs):
    """The operands that are arrays (Python scalars are left out of error texts)."""
    return [v for v in vs if isinstance(v, Aval)]


def is_static_scalar(v) -> bool:
    """A Python (or NumPy) scalar operand: static, weakly typed, never differentiated."""
    return isinstance(v, (int, float, complex, np.generic)) and not isinstance(v, np.ndarray)


def dtype_name(v) -> str:
    """The NumPy dtype name of any value kind ("float32", ...), for `astype` attrs."""
    return np.dtype(aval_of(v).dtype).name


def returns_array(fn):
    """Wrap a NumPy function so 0-d results are ndarrays, not NumPy scalars."""
    ndarray = np.ndarray
    asarray = np.asarray

    def impl(*args, **attrs):
        out = fn(*args, **attrs)
        return out if type(out) is ndarray else asarray(out)  # skip asarray when already one

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


# ------------------------------------------------------------ elementwise rules


def broadcast_shapes(name, *avals):
    shapes = [a.shape if isinstance(a, Aval) else () for a in avals]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise op_error(name, array_avals(*avals), "shapes cannot be broadcast together") from None


def elementwise_rule(name, float_only=False, no_bool=False, float_out=False):
    """Broadcast shapes, promote dtypes (Python scalars are weak).

    float_only: int/bool operands are a DTypeError (exp, log, ...).
    no_bool: bool operands are a DTypeError (sub, neg, as in NumPy/PyTorch).
    float_out: int operands give float64, as NumPy's true_divide does.
    """

    def rule(*avals, **attrs):
        shape = broadcast_shapes(name, *avals)
        dtype = promote(*avals)
        if float_only and not np.issubdtype(dtype, np.inexact):
            raise op_error(
                name,
                array_avals(*avals),
                f"expected floating-point operands, got {dtype}",
                cls=DTypeError,
            )
        if no_bool and dtype == np.bool_:
            raise op_error(
                name, array_avals(*avals), "not supported for bool operands", cls=DTypeError
            )
        if float_out and not np.issubdtype(dtype, np.inexact):
            dtype = np.dtype(np.float64)
        return Aval(shape, np.dtype(dtype))

    return rule


def comparison_rule(name):
    def rule(*avals, **attrs):
        return Aval(broadcast_shapes(name, *avals), np.dtype(bool))

    return rule


class PerOperand:
    """The vjps of a variadic primitive: `vjps[i]` is `rule(i, g, out, *operands, **attrs)`.

    `batch`, if given, is `batch(needed, g, out, *operands, **attrs)` -> one gradient
    (or None) per operand, computed in one pass: eager backward calls it once per node
    instead of the per-operand rule once per operand (n calls of n operands each is
    quadratic in the operand count)."""

    def __init__(self, rule, batch=None):
        self.rule = rule
        self.batch = batch

    def __getitem__(self, i: int):
        return functools.partial(self.rule, i)

    def __repr__(self) -> str:
        return f"PerOperand({self.rule.__name__})"


def no_grad(*_args, **_attrs):
    return None


def literal(value) -> str:
    """A Python literal for a static scalar in generated code (inf and nan spelled via np)."""
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


# ------------------------------------------------------------- reduction rules


def normalize_axes(name, aval, axis) -> tuple:
    """`axis` (None, int or tuple) as a sorted tuple of non-negative axes."""
    aval = as_aval(aval)
    if axis is None:
        return tuple(range(aval.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -aval.ndim <= a < aval.ndim:
            raise op_error(name, [aval], f"axis {a} is out of range for {aval.ndim}-d input")
        out.append(int(a) % aval.ndim)
    if len(set(out)) != len(out):
        raise op_error(name, [aval], f"repeated axis in {axis}")
    return tuple(sorted(out))


@functools.cache
def _reduced_dtype(fn_name: str, dtype: np.dtype) -> np.dtype:
    """What NumPy's reduction returns for this dtype (sum of bool -> int64, mean of int -> f64)."""
    sample = np.ones(2, dtype=dtype)
    return np.asarray(getattr(np, fn_name)(sample)).dtype


def reduce_rule(name, numpy_name=None, float_only=False, single_axis=False):
    def rule(x, axis=None, keepdims=False, **_):
        x = as_aval(x)
        if float_only and not np.issubdtype(x.dtype, np.floating):
            raise op_error(
                name, [x], f"expected a floating-point operand, got {x.dtype}", cls=DTypeError
            )
        if single_axis and axis is not None and not isinstance(axis, (int, np.integer)):
            raise op_error(name, [x], f"axis must be an int or None, got {axis!r}")
        axes = normalize_axes(name, x, axis)
        if name in ("max", "min", "argmax", "argmin", "logsumexp"):
            empty = [i for i in axes if x.shape[i] == 0]
            if empty or (axis is None and int(np.prod(x.shape)) == 0):
                raise op_error(name, [x], "zero-size reduction has no identity")
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        dtype = _reduced_dtype(numpy_name or name, x.dtype)
        return Aval(shape, dtype)

    return rule


def kept_shape(shape, axis) -> tuple:
    """`shape` with the reduced axes kept as size 1."""
    nd = len(shape)
    axes = (
        range(nd)
        if axis is None
        else [a % nd for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis)]
    )
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


# ------------------------------------------------------------------ indexing rules
# getitem's `spec` has one entry per indexed axis of x (tracegrad.ops.indexing
# builds it from a NumPy index, expanding `...` and trailing axes):
#   int i (0 <= i < dim)            select
#   ("slice", start, stop, step)    normalized by slice.indices; stop None = "run to the start"
#   None                            a new axis of size 1 (consumes no axis of x)
#   ("array", k)                    the k-th index-array operand (integer, may be negative)
# As in NumPy, ints count as advanced indices when any array is present.


def spec_to_index(spec, arrays) -> tuple:
    """The NumPy index tuple that `spec` stands for."""
    out = []
    for e in spec:
        if e is None or isinstance(e, (int, np.integer)):
            out.append(e)
        elif e[0] == "slice":
            out.append(slice(e[1], e[2], e[3]))
        else:
            out.append(np.asarray(arrays[e[1]]))
    return tuple(out)


def slice_length(start, stop, step) -> int:
    return len(range(start, -1 if stop is None else stop, step))


def index_shape(name, x: Aval, spec, arrays) -> tuple:
    """Result shape of x[spec] under NumPy's rules (checked against NumPy in the tests)."""
    has_array = any(isinstance(e, tuple) and e[0] == "array" for e in spec)
    consumed = sum(1 for e in spec if e is not None)
    if consumed != x.ndim:
        raise op_error(
            name, [x] + list(arrays), f"index has {consumed} entries for a {x.ndim}-d array"
        )
    out, advanced, advanced_at, dim = [], [], [], 0
    for pos, e in enumerate(spec):
        if e is None:
            out.append(1)
            continue
        n = x.shape[dim]
        dim += 1
        if isinstance(e, (int, np.integer)):
            if not 0 <= e < n:
                raise op_error(
                    name,
                    [x],
                    f"index {e} is out of range for axis {dim - 1} with size {n}",
                    cls=ShapeError,
                )
            if has_array:
                advanced.append(())
                advanced_at.append((pos, len(out)))
        elif e[0] == "slice":
            out.append(slice_length(*e[1:]))
        else:
            arr = arrays[e[1]]
            if not np.issubdtype(arr.dtype, np.integer):
                raise op_error(
                    name,
                    [x, arr],
                    f"index arrays must be integers, got {arr.dtype}",
                    cls=DTypeError,
                )
            advanced.append(arr.shape)
            advanced_at.append((pos, len(out)))
    if not has_array:
        return tuple(out)
    try:
        block = tuple(np.broadcast_shapes(*advanced))
    except ValueError:
        raise op_error(
            name, [x] + list(arrays), "index arrays cannot be broadcast together"
        ) from None
    positions = [p for p, _ in advanced_at]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    insert_at = advanced_at[0][1] if adjacent else 0
    return tuple(out[:insert_at]) + block + tuple(out[insert_at:])


def along_axis_shape(name, x, idx, axis):
    x, idx = as_aval(x), as_aval(idx)
    if not np.issubdtype(idx.dtype, np.integer):
        raise op_error(name, [x, idx], f"indices must be integers, got {idx.dtype}", cls=DTypeError)
    if idx.ndim != x.ndim:
        raise op_error(name, [x, idx], "indices and array must have the same number of dims")
    ax = normalize_axes(name, x, axis)[0]
    others = [Aval(tuple(d for i, d in enumerate(a.shape) if i != ax), a.dtype) for a in (x, idx)]
    batch = broadcast_shapes(name, *others)
    return batch[:ax] + (idx.shape[ax],) + batch[ax:], ax
