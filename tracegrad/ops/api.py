"""NumPy-named public ops: `tracegrad.exp`, `tracegrad.sum(x, axis=1)`, ...

Every function follows NumPy's name and keywords (`axis`, `keepdims`), as
`jax.numpy` does, and works on three kinds of value through `bind`:
plain arrays (returns an ndarray), eager tensors (records a dynamic graph) and
tracers (records IR). Composite ops (`stack`, `expand_dims`, `dot`, ...) are
written with the primitives, so they need no rules of their own.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sum(tg.tanh(np.zeros(3)))
    array(0.)
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import ShapeError, bind, user_location_suffix
from tracegrad.ops.indexing import getitem
from tracegrad.ops.table import normalize_axes, sum_to_shape  # noqa: F401

__all__ = [
    # arithmetic
    "add", "subtract", "multiply", "divide", "negative", "power",
    # elementwise
    "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "sign",
    "maximum", "minimum", "where", "clip", "astype",
    # comparisons and logic
    "greater", "less", "greater_equal", "less_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_not", "isfinite",
    # reductions
    "sum", "mean", "max", "min", "argmax", "argmin", "var", "logsumexp",
    # softmax family
    "softmax", "log_softmax",
    # linear algebra
    "matmul", "dot",
    # shape
    "reshape", "transpose", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack",
    "ravel",
    # indexing
    "getitem", "take_along_axis",
    # constructors from a template
    "zeros_like", "ones_like", "full_like",
]

Array = Any  # ndarray, eager Tensor or Tracer

# --------------------------------------------------------------- arithmetic


def add(x: Array, y: Array) -> Array:
    """x + y, broadcasting.

    >>> import numpy as np, tracegrad as tg
    >>> tg.add(np.ones(2), 1.0)
    array([2., 2.])
    """
    return bind(T.add, x, y)


def subtract(x: Array, y: Array) -> Array:
    """x - y, broadcasting.

    >>> import numpy as np, tracegrad as tg
    >>> tg.subtract(np.ones(2), 1.0)
    array([0., 0.])
    """
    return bind(T.sub, x, y)


def multiply(x: Array, y: Array) -> Array:
    """x * y, broadcasting.

    >>> import numpy as np, tracegrad as tg
    >>> tg.multiply(np.array([1.0, 2.0]), 3.0)
    array([3., 6.])
    """
    return bind(T.mul, x, y)


def divide(x: Array, y: Array) -> Array:
    """x / y (true division), broadcasting.

    >>> import numpy as np, tracegrad as tg
    >>> tg.divide(np.array([1.0, 2.0]), 2.0)
    array([0.5, 1. ])
    """
    return bind(T.div, x, y)


def negative(x: Array) -> Array:
    """-x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.negative(np.array([1.0, -2.0]))
    array([-1.,  2.])
    """
    return bind(T.neg, x)


def power(x: Array, y: Array) -> Array:
    """x ** y; either side may be a Python scalar.

    >>> import numpy as np, tracegrad as tg
    >>> tg.power(np.array([2.0, 3.0]), 2)
    array([4., 9.])
    """
    return bind(T.pow_, x, y)

# ------------------------------------------------------ elementwise functions


def exp(x: Array) -> Array:
    """e ** x, elementwise (floating-point input).

    >>> import numpy as np, tracegrad as tg
    >>> tg.exp(np.zeros(2))
    array([1., 1.])
    """
    return bind(T.exp, x)


def log(x: Array) -> Array:
    """Natural logarithm, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.log(np.ones(2))
    array([0., 0.])
    """
    return bind(T.log, x)


def sqrt(x: Array) -> Array:
    """Square root, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sqrt(np.array([4.0, 9.0]))
    array([2., 3.])
    """
    return bind(T.sqrt, x)


def sin(x: Array) -> Array:
    """Sine, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sin(np.zeros(2))
    array([0., 0.])
    """
    return bind(T.sin, x)


def cos(x: Array) -> Array:
    """Cosine, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.cos(np.zeros(2))
    array([1., 1.])
    """
    return bind(T.cos, x)


def tanh(x: Array) -> Array:
    """Hyperbolic tangent, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.tanh(np.zeros(2))
    array([0., 0.])
    """
    return bind(T.tanh, x)


def sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)), finite and exact at the extremes (±1e4).

    >>> import numpy as np, tracegrad as tg
    >>> tg.sigmoid(np.array([-1e4, 0.0, 1e4]))
    array([0. , 0.5, 1. ])
    """
    return bind(T.sigmoid, x)


def relu(x: Array) -> Array:
    """max(x, 0), elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.relu(np.array([-1.0, 2.0]))
    array([0., 2.])
    """
    return bind(T.relu, x)


def abs(x: Array) -> Array:  # noqa: A001  (NumPy's name)
    """|x|, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.abs(np.array([-1.0, 2.0]))
    array([1., 2.])
    """
    return bind(T.abs_, x)


def sign(x: Array) -> Array:
    """-1, 0 or 1 by the sign of x (its gradient is zero).

    >>> import numpy as np, tracegrad as tg
    >>> tg.sign(np.array([-3.0, 0.0, 2.0]))
    array([-1.,  0.,  1.])
    """
    return bind(T.sign, x)


def maximum(x: Array, y: Array) -> Array:
    """Elementwise maximum; on ties each side gets half the gradient (as PyTorch).

    >>> import numpy as np, tracegrad as tg
    >>> tg.maximum(np.array([1.0, 5.0]), 3.0)
    array([3., 5.])
    """
    return bind(T.maximum, x, y)


def minimum(x: Array, y: Array) -> Array:
    """Elementwise minimum; on ties each side gets half the gradient (as PyTorch).

    >>> import numpy as np, tracegrad as tg
    >>> tg.minimum(np.array([1.0, 5.0]), 3.0)
    array([1., 3.])
    """
    return bind(T.minimum, x, y)


def where(condition: Array, x: Array, y: Array) -> Array:
    """x where condition holds, else y. The static-graph way to branch on data.

    Beware `where(x > 0, sqrt(x), 0)`: the untaken sqrt branch still gets a
    zero cotangent times its infinite derivative at x <= 0, so the gradient is
    NaN. Make the untaken branch safe instead:
    `where(x > 0, sqrt(where(x > 0, x, 1)), 0)`.

    >>> import numpy as np, tracegrad as tg
    >>> x = np.array([-1.0, 2.0])
    >>> tg.where(x > 0, x, 0.0)
    array([0., 2.])
    """
    return bind(T.where, condition, x, y)


def clip(x: Array, a_min: float | None = None, a_max: float | None = None, *,
         min: float | None = None, max: float | None = None) -> Array:  # noqa: A002
    """Limit x to [a_min, a_max] (Python scalar bounds; either may be None).

    NumPy 2.1's keywords `min=` and `max=` are accepted too.

    >>> import numpy as np, tracegrad as tg
    >>> tg.clip(np.array([-2.0, 0.5, 3.0]), 0.0, 1.0)
    array([0. , 0.5, 1. ])
    """
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    for bound in (a_min, a_max):
        if bound is not None and not isinstance(bound, (int, float, np.generic)):
            raise TypeError("clip: bounds must be Python scalars or None; use "
                            "tracegrad.maximum/minimum for array bounds" + user_location_suffix())
    lo = None if a_min is None else _py_scalar(a_min)
    hi = None if a_max is None else _py_scalar(a_max)
    return bind(T.clip, x, lo=lo, hi=hi)


def _py_scalar(v):
    return v.item() if isinstance(v, np.generic) else v


def astype(x: Array, dtype: Any) -> Array:
    """x converted to `dtype` (a NumPy dtype or its name).

    >>> import numpy as np, tracegrad as tg
    >>> tg.astype(np.array([1.5, 2.5]), "float32").dtype
    dtype('float32')
    """
    return bind(T.astype, x, dtype=np.dtype(getattr(dtype, "np_dtype", dtype)).name)

# ----------------------------------------------- comparisons and logic


def greater(x: Array, y: Array) -> Array:
    """x > y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.greater(np.array([1.0, 3.0]), 2.0)
    array([False,  True])
    """
    return bind(T.gt, x, y)


def less(x: Array, y: Array) -> Array:
    """x < y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.less(np.array([1.0, 3.0]), 2.0)
    array([ True, False])
    """
    return bind(T.lt, x, y)


def greater_equal(x: Array, y: Array) -> Array:
    """x >= y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.greater_equal(np.array([2.0, 3.0]), 3.0)
    array([False,  True])
    """
    return bind(T.ge, x, y)


def less_equal(x: Array, y: Array) -> Array:
    """x <= y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.less_equal(np.array([2.0, 3.0]), 2.0)
    array([ True, False])
    """
    return bind(T.le, x, y)


def equal(x: Array, y: Array) -> Array:
    """x == y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.equal(np.array([2.0, 3.0]), 2.0)
    array([ True, False])
    """
    return bind(T.eq, x, y)


def not_equal(x: Array, y: Array) -> Array:
    """x != y as a bool array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.not_equal(np.array([2.0, 3.0]), 2.0)
    array([False,  True])
    """
    return bind(T.ne, x, y)


def logical_and(x: Array, y: Array) -> Array:
    """Elementwise `and` of truth values.

    >>> import numpy as np, tracegrad as tg
    >>> tg.logical_and(np.array([True, True]), np.array([True, False]))
    array([ True, False])
    """
    return bind(T.logical_and, x, y)


def logical_or(x: Array, y: Array) -> Array:
    """Elementwise `or` of truth values.

    >>> import numpy as np, tracegrad as tg
    >>> tg.logical_or(np.array([False, True]), np.array([False, False]))
    array([False,  True])
    """
    return bind(T.logical_or, x, y)


def logical_not(x: Array) -> Array:
    """Elementwise `not`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.logical_not(np.array([True, False]))
    array([False,  True])
    """
    return bind(T.logical_not, x)


def isfinite(x: Array) -> Array:
    """True where x is neither inf nor nan.

    >>> import numpy as np, tracegrad as tg
    >>> tg.isfinite(np.array([1.0, np.inf, np.nan]))
    array([ True, False, False])
    """
    return bind(T.isfinite, x)

# --------------------------------------------------------------- reductions


def _axis(axis):
    """NumPy accepts lists for axis; attrs must be hashable."""
    if axis is None or isinstance(axis, (int, np.integer)):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def sum(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Sum over `axis` (all axes by default).

    >>> import numpy as np, tracegrad as tg
    >>> tg.sum(np.ones((2, 3)), axis=1)
    array([3., 3.])
    """
    return bind(T.sum_, x, axis=_axis(axis), keepdims=bool(keepdims))


def mean(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """Arithmetic mean over `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.mean(np.array([[1.0, 3.0]]), axis=1)
    array([2.])
    """
    return bind(T.mean, x, axis=_axis(axis), keepdims=bool(keepdims))


def max(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Largest value over `axis` (values only, as NumPy's). Ties share the gradient evenly.

    >>> import numpy as np, tracegrad as tg
    >>> tg.max(np.array([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([3., 4.])
    """
    return bind(T.max_, x, axis=_axis(axis), keepdims=bool(keepdims))


def min(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Smallest value over `axis` (values only, as NumPy's). Ties share the gradient evenly.

    >>> import numpy as np, tracegrad as tg
    >>> tg.min(np.array([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([1., 2.])
    """
    return bind(T.min_, x, axis=_axis(axis), keepdims=bool(keepdims))


def argmax(x: Array, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the largest value (of the flattened array when axis is None).

    >>> import numpy as np, tracegrad as tg
    >>> tg.argmax(np.array([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([1, 0])
    """
    return bind(T.argmax, x, axis=_axis(axis), keepdims=bool(keepdims))


def argmin(x: Array, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the smallest value (of the flattened array when axis is None).

    >>> import numpy as np, tracegrad as tg
    >>> tg.argmin(np.array([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([0, 1])
    """
    return bind(T.argmin, x, axis=_axis(axis), keepdims=bool(keepdims))


def var(x: Array, axis: int | Sequence[int] | None = None, ddof: int = 0,
        keepdims: bool = False) -> Array:
    """Variance over `axis`, dividing by N - ddof (NumPy's default ddof=0; PyTorch's is 1).

    >>> import numpy as np, tracegrad as tg
    >>> tg.var(np.array([1.0, 3.0]))
    array(1.)
    """
    return bind(T.var, x, axis=_axis(axis), keepdims=bool(keepdims), ddof=int(ddof))


def logsumexp(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """log(sum(exp(x))) over `axis`, computed without overflow.

    >>> import numpy as np, tracegrad as tg
    >>> tg.logsumexp(np.array([1e4, 1e4]))
    array(10000.69314718)
    """
    return bind(T.logsumexp, x, axis=_axis(axis), keepdims=bool(keepdims))

# ------------------------------------------------------------ softmax family


def softmax(x: Array, axis: int = -1) -> Array:
    """exp(x) / sum(exp(x)) along `axis`, stable for large logits.

    >>> import numpy as np, tracegrad as tg
    >>> tg.softmax(np.array([1e4, 1e4]))
    array([0.5, 0.5])
    """
    return bind(T.softmax, x, axis=int(axis))


def log_softmax(x: Array, axis: int = -1) -> Array:
    """x - logsumexp(x) along `axis`, stable for large logits.

    >>> import numpy as np, tracegrad as tg
    >>> tg.log_softmax(np.array([0.0, 0.0]))
    array([-0.69314718, -0.69314718])
    """
    return bind(T.log_softmax, x, axis=int(axis))

# --------------------------------------------------------------- linear algebra


def matmul(x: Array, y: Array) -> Array:
    """Matrix product with NumPy's rules: 1-D operands are promoted, batch dims broadcast.

    >>> import numpy as np, tracegrad as tg
    >>> tg.matmul(np.eye(2), np.array([1.0, 2.0]))
    array([1., 2.])
    """
    return bind(T.matmul, x, y)


def dot(x: Array, y: Array) -> Array:
    """NumPy's dot for scalars, vectors and matrices (and N-d x 1-d/2-d).

    >>> import numpy as np, tracegrad as tg
    >>> tg.dot(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    array(11.)
    """
    if np.ndim(x) == 0 or np.ndim(y) == 0:
        return bind(T.mul, x, y)
    if np.ndim(y) <= 2:
        return bind(T.matmul, x, y)
    raise NotImplementedError("tracegrad.dot: for operands with more than 2 dims use matmul "
                              f"(got shapes {np.shape(x)} and {np.shape(y)})"
                              + user_location_suffix())

# --------------------------------------------------------------- shape ops


def reshape(x: Array, shape: int | Sequence[int]) -> Array:
    """x with a new shape of the same size; one dimension may be -1.

    >>> import numpy as np, tracegrad as tg
    >>> tg.reshape(np.arange(6.0), (2, -1)).shape
    (2, 3)
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    return bind(T.reshape, x, shape=_resolve_shape(tuple(np.shape(x)), shape))


def _resolve_shape(old: tuple, new: tuple) -> tuple:
    unknown = [i for i, d in enumerate(new) if d == -1]
    if len(unknown) > 1:
        raise ShapeError(f"reshape: can only specify one unknown dimension, got {new}"
                         + user_location_suffix())
    if not unknown:
        return new
    size = int(np.prod(old, dtype=np.int64))
    known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
    if known == 0 or size % known:
        raise ShapeError(f"reshape: cannot reshape array of shape {old} (size {size}) into {new}"
                         + user_location_suffix())
    return tuple(size // known if d == -1 else d for d in new)


def ravel(x: Array) -> Array:
    """x flattened to 1-D.

    >>> import numpy as np, tracegrad as tg
    >>> tg.ravel(np.ones((2, 2))).shape
    (4,)
    """
    return reshape(x, (-1,))


def transpose(x: Array, axes: Sequence[int] | None = None) -> Array:
    """Permute the axes (reverse them by default).

    >>> import numpy as np, tracegrad as tg
    >>> tg.transpose(np.ones((2, 3, 4)), (1, 0, 2)).shape
    (3, 2, 4)
    """
    nd = np.ndim(x)
    if axes is None:
        axes = tuple(reversed(range(nd)))
    axes = tuple(int(a) % nd if -nd <= a < nd else int(a) for a in axes)
    return bind(T.transpose, x, axes=axes)


def expand_dims(x: Array, axis: int | Sequence[int]) -> Array:
    """Insert size-1 axes at the positions `axis` of the result.

    >>> import numpy as np, tracegrad as tg
    >>> tg.expand_dims(np.ones(3), 0).shape
    (1, 3)
    """
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_ndim = np.ndim(x) + len(axes)
    positions = {int(a) % out_ndim for a in axes if -out_ndim <= a < out_ndim}
    if len(positions) != len(axes):
        raise ShapeError(f"expand_dims: axis {axis} is out of range or repeated for a result "
                         f"with {out_ndim} dims (input shape {tuple(np.shape(x))})"
                         + user_location_suffix())
    shape = iter(np.shape(x))
    new_shape = tuple(1 if i in positions else next(shape) for i in range(out_ndim))
    return bind(T.reshape, x, shape=new_shape)


def squeeze(x: Array, axis: int | Sequence[int] | None = None) -> Array:
    """Remove size-1 axes (all of them, or those in `axis`).

    >>> import numpy as np, tracegrad as tg
    >>> tg.squeeze(np.ones((1, 3, 1))).shape
    (3,)
    """
    shape = tuple(np.shape(x))
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = normalize_axes("squeeze", T.aval_of(x), _axis(axis))
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one (axis {a} of shape {shape})"
                                 + user_location_suffix())
    return bind(T.reshape, x, shape=tuple(d for i, d in enumerate(shape) if i not in axes))


def broadcast_to(x: Array, shape: int | Sequence[int]) -> Array:
    """x broadcast to `shape` (a read-only view for arrays).

    >>> import numpy as np, tracegrad as tg
    >>> tg.broadcast_to(np.ones(3), (2, 3)).shape
    (2, 3)
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    return bind(T.broadcast_to, x, shape=shape)


def concatenate(arrays: Sequence[Array], axis: int = 0) -> Array:
    """Join arrays along an existing axis.

    >>> import numpy as np, tracegrad as tg
    >>> tg.concatenate([np.ones((1, 2)), np.zeros((2, 2))], axis=0).shape
    (3, 2)
    """
    arrays = list(arrays)
    if not arrays:
        raise ValueError("concatenate: need at least one array to concatenate"
                         + user_location_suffix())
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    return bind(T.concatenate, *arrays, axis=int(axis))


def stack(arrays: Sequence[Array], axis: int = 0) -> Array:
    """Join same-shaped arrays along a new axis.

    >>> import numpy as np, tracegrad as tg
    >>> tg.stack([np.ones(2), np.zeros(2)], axis=1).shape
    (2, 2)
    """
    arrays = list(arrays)
    if not arrays:
        raise ValueError("stack: need at least one array to stack" + user_location_suffix())
    shapes = {tuple(np.shape(a)) for a in arrays}
    if len(shapes) > 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got "
                         f"{[tuple(np.shape(a)) for a in arrays]}" + user_location_suffix())
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)

# ----------------------------------------------------------------- indexing


def take_along_axis(x: Array, indices: Array, axis: int) -> Array:
    """Pick values of x at `indices` along `axis` (NumPy's take_along_axis).

    The usual use is cross-entropy: the log-probability of each target class.

    >>> import numpy as np, tracegrad as tg
    >>> logp = np.log(np.array([[0.25, 0.75], [0.5, 0.5]]))
    >>> tg.take_along_axis(logp, np.array([[1], [0]]), axis=1).ravel()
    array([-0.28768207, -0.69314718])
    """
    return bind(T.take_along_axis, x, indices, axis=int(axis))

# ---------------------------------------------------------- template constructors


def full_like(x: Array, fill_value: float, dtype: Any = None) -> Array:
    """An array of x's shape (and dtype, unless given) filled with `fill_value`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.full_like(np.ones(2), 7.0)
    array([7., 7.])
    """
    name = None if dtype is None else np.dtype(getattr(dtype, "np_dtype", dtype)).name
    return bind(T.full_like, x, value=_py_scalar(fill_value), dtype=name)


def zeros_like(x: Array, dtype: Any = None) -> Array:
    """Zeros of x's shape and dtype.

    >>> import numpy as np, tracegrad as tg
    >>> tg.zeros_like(np.ones(2))
    array([0., 0.])
    """
    return full_like(x, 0, dtype)


def ones_like(x: Array, dtype: Any = None) -> Array:
    """Ones of x's shape and dtype.

    >>> import numpy as np, tracegrad as tg
    >>> tg.ones_like(np.zeros(2))
    array([1., 1.])
    """
    return full_like(x, 1, dtype)


_ = builtins  # builtins stays reachable here although sum/max/min/abs are shadowed
