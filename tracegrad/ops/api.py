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
from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import ShapeError, bind, user_location_suffix
from tracegrad.ops.indexing import getitem
from tracegrad.ops.table import normalize_axes, sum_to_shape  # noqa: F401

__all__ = [
    # arithmetic
    "add",
    "subtract",
    "multiply",
    "divide",
    "negative",
    "power",
    # elementwise
    "exp",
    "log",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "abs",
    "sign",
    "maximum",
    "minimum",
    "where",
    "clip",
    "astype",
    # comparisons and logic
    "greater",
    "less",
    "greater_equal",
    "less_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "isfinite",
    # reductions
    "sum",
    "mean",
    "max",
    "min",
    "argmax",
    "argmin",
    "var",
    "logsumexp",
    # softmax family
    "softmax",
    "log_softmax",
    # linear algebra
    "matmul",
    "dot",
    # shape
    "reshape",
    "transpose",
    "expand_dims",
    "squeeze",
    "broadcast_to",
    "concatenate",
    "stack",
    "ravel",
    # indexing
    "getitem",
    "take_along_axis",
    # constructors from a template
    "zeros_like",
    "ones_like",
    "full_like",
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


def abs(x: Array) -> Array:
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


def clip(
    x: Array,
    a_min: float | None = None,
    a_max: float | None = None,
    *,
    min: float | None = None,
    max: float | None = None,
) -> Array:
    """Limit x to [a_min, a_max] (either may be None). Python scalar bounds are one
    clip node; array or traced bounds (JAX's custom_vjp clip_gradient passes
    residuals) are NumPy's minimum(maximum(x, a_min), a_max), differentiable in the
    bounds too.

    NumPy 2.1's keywords `min=` and `max=` are accepted too.

    >>> import numpy as np, tracegrad as tg
    >>> tg.clip(np.array([-2.0, 0.5, 3.0]), 0.0, 1.0)
    array([0. , 0.5, 1. ])
    >>> tg.clip(np.array([-2.0, 0.5, 3.0]), np.array([0.0, 1.0, 0.0]), 2.0)
    array([0., 1., 2.])
    """
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if builtins.any(
        bound is not None and not isinstance(bound, (int, float, np.generic))
        for bound in (a_min, a_max)
    ):
        out = x if a_min is None else maximum(x, a_min)
        return out if a_max is None else minimum(out, a_max)
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


def sum(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
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


def max(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """Largest value over `axis` (values only, as NumPy's). Ties share the gradient evenly.

    >>> import numpy as np, tracegrad as tg
    >>> tg.max(np.array([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([3., 4.])
    """
    return bind(T.max_, x, axis=_axis(axis), keepdims=bool(keepdims))


def min(x: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
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


def var(
    x: Array, axis: int | Sequence[int] | None = None, ddof: int = 0, keepdims: bool = False
) -> Array:
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


def matmul(
    x: Array, y: Array, *, precision: Any = None, preferred_element_type: Any = None
) -> Array:
    """Matrix product with NumPy's rules: 1-D operands are promoted, batch dims broadcast.

    `precision` (JAX's) is accepted and ignored: products run in the operands' own
    dtype, as JAX does on CPU. `preferred_element_type` computes in that dtype.

    >>> import numpy as np, tracegrad as tg
    >>> tg.matmul(np.eye(2), np.array([1.0, 2.0]))
    array([1., 2.])
    >>> tg.matmul(np.eye(2), np.array([1, 2]), preferred_element_type=np.float32).dtype
    dtype('float32')
    """
    x, y = _dot_options("matmul", x, y, precision, preferred_element_type)
    return bind(T.matmul, x, y)


def _dot_options(name: str, x, y, precision, preferred_element_type) -> tuple:
    """JAX's `precision` and `preferred_element_type` of the dot family: precision
    is checked and ignored (CPU products run in the operands' dtype, as in JAX);
    a preferred element type casts both operands to it."""
    if precision is not None:
        for p in precision if isinstance(precision, (tuple, list)) else (precision,):
            label = getattr(p, "name", p)
            if p is not None and str(label).lower() not in _PRECISIONS:
                raise ValueError(
                    f"{name}: precision must be None, one of {sorted(_PRECISIONS)}, a "
                    f"jax.lax.Precision or a pair of them, got {precision!r}"
                    + user_location_suffix()
                )
    if preferred_element_type is None:
        return x, y
    return astype(x, preferred_element_type), astype(y, preferred_element_type)


_PRECISIONS = {"default", "high", "highest", "fastest", "bfloat16", "tensorfloat32", "float32"}


def dot(x: Array, y: Array, *, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """NumPy's dot: scalars, vectors, matrices, and N-d operands (tensordot over x's last
    axis and y's second-to-last). `precision` and `preferred_element_type` as `matmul`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.dot(np.array([1.0, 2.0]), np.array([3.0, 4.0]), precision="highest")
    array(11.)
    """
    x, y = _dot_options("dot", x, y, precision, preferred_element_type)
    if np.ndim(x) == 0 or np.ndim(y) == 0:
        return bind(T.mul, x, y)
    if np.ndim(y) <= 2:
        return bind(T.matmul, x, y)
    # N-d y: sum over x's last axis and y's second-to-last (NumPy's rule)
    return tensordot(x, y, axes=([-1], [-2]))


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
        raise ShapeError(
            f"reshape: can only specify one unknown dimension, got {new}" + user_location_suffix()
        )
    if not unknown:
        return new
    size = int(np.prod(old, dtype=np.int64))
    known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
    if known == 0 or size % known:
        raise ShapeError(
            f"reshape: cannot reshape array of shape {old} (size {size}) into {new}"
            + user_location_suffix()
        )
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
        raise ShapeError(
            f"expand_dims: axis {axis} is out of range or repeated for a result "
            f"with {out_ndim} dims (input shape {tuple(np.shape(x))})" + user_location_suffix()
        )
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
                raise ShapeError(
                    f"squeeze: cannot select an axis to squeeze out which has size "
                    f"not equal to one (axis {a} of shape {shape})" + user_location_suffix()
                )
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
        raise ValueError(
            "concatenate: need at least one array to concatenate" + user_location_suffix()
        )
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
        raise ShapeError(
            f"stack: all input arrays must have the same shape, got "
            f"{[tuple(np.shape(a)) for a in arrays]}" + user_location_suffix()
        )
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


# ============================================================ NumPy coverage (issue 13)
# NumPy's names for functions that NumPy users' code calls. Most are composites of the
# ops above (their gradients, eager mode and code generation come from those ops);
# log1p, expm1, arcsin, arccos, arctan, arctan2, floor, remainder, cumsum, argsort and
# the linear recurrence behind cumprod/prod are primitives (tracegrad/ops/table.py).

import math as _math  # noqa: E402

_LN2 = _math.log(2.0)
_LN10 = _math.log(10.0)


def _shape(x) -> tuple:
    return tuple(np.shape(x))


def _dtype(x) -> np.dtype:
    return np.dtype(T.aval_of(x).dtype)


def _norm_axis(axis, ndim: int, name: str) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ShapeError(
            f"{name}: axis {axis} is out of range for a {ndim}-d array" + user_location_suffix()
        )
    return axis % ndim


def _weak_operands(x, y):
    """(x, y) with a Python scalar operand made an array of the other operand's dtype
    where NumPy 2 keeps that dtype (float32 op 2.0 is float32). For composites: their
    inner steps on a lone Python scalar (abs(2.0), 2 * ln 2) would give a NumPy float64
    scalar, which is not weak, and promote float32 to float64."""

    def weak(s, other):
        if type(s) not in (int, float, bool) or type(other) in (int, float, bool):
            return s
        dtype = _dtype(other)
        return np.asarray(s, dtype=dtype) if np.result_type(dtype, s) == dtype else s

    return weak(x, y), weak(y, x)


def _wrap(x):
    """Plain Python numbers and lists become arrays; arrays, tensors and tracers stay."""
    if isinstance(x, (list, tuple)):
        return array(x)
    if isinstance(x, (int, float, bool, np.generic)):
        return np.asarray(x)
    return x


# ------------------------------------------------------ elementwise functions


def tan(x: Array) -> Array:
    """Tangent, elementwise (sin / cos).

    >>> import numpy as np, tracegrad as tg
    >>> tg.tan(np.array([0.0]))
    array([0.])
    """
    return divide(sin(x), cos(x))


def _exp_half(ax):
    # exp(|x| / 2): halving is exact, so e * e / 2 keeps exp's accuracy and overflows
    # only where cosh itself does (exp(|x|) / 2 would overflow ln 2 earlier)
    return exp(multiply(ax, 0.5))


def cosh(x: Array) -> Array:
    """Hyperbolic cosine, finite up to NumPy's overflow threshold (|x| ~ 710.47).

    >>> import numpy as np, tracegrad as tg
    >>> tg.cosh(np.array([0.0]))
    array([1.])
    """
    if _dtype(_wrap(x)).kind == "c":
        return multiply(add(exp(x), exp(negative(x))), 0.5)
    # |x| as _abs1 (slope +1 at 0): through abs, whose slope is 0 there, cosh''(0) was 0
    e = _exp_half(_abs1(x))
    inv = divide(1.0, e)
    return add(multiply(multiply(e, 0.5), e), multiply(multiply(inv, 0.5), inv))


def sinh(x: Array) -> Array:
    """Hyperbolic sine: (expm1(x) - expm1(-x)) / 2 for |x| < 1 (no cancellation near 0),
    sign(x) (e^|x| - e^-|x|) / 2 from exp(|x| / 2) above.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sinh(np.array([0.0]))
    array([0.])
    """
    if _dtype(_wrap(x)).kind == "c":
        return multiply(subtract(exp(x), exp(negative(x))), 0.5)
    ax = abs(x)
    small = less(ax, 1.0)
    xs = where(small, x, 0.0)  # the untaken branch stays finite (no nan gradients)
    near_zero = multiply(subtract(expm1(xs), expm1(negative(xs))), 0.5)
    e = _exp_half(where(small, 2.0, ax))
    inv = divide(1.0, e)
    far = multiply(
        sign(x), subtract(multiply(multiply(e, 0.5), e), multiply(multiply(inv, 0.5), inv))
    )
    return where(small, near_zero, far)


def log1p(x: Array) -> Array:
    """log(1 + x), accurate for tiny x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.log1p(np.array([1e-20]))
    array([1.e-20])
    """
    return bind(T.log1p, x)


def expm1(x: Array) -> Array:
    """exp(x) - 1, accurate for tiny x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.expm1(np.array([1e-20]))
    array([1.e-20])
    """
    return bind(T.expm1, x)


def log2(x: Array) -> Array:
    """Base-2 logarithm, log(x) / log(2).

    >>> import numpy as np, tracegrad as tg
    >>> tg.log2(np.array([8.0]))
    array([3.])
    """
    return divide(log(x), _LN2)


def log10(x: Array) -> Array:
    """Base-10 logarithm, log(x) / log(10).

    >>> import numpy as np, tracegrad as tg
    >>> tg.log10(np.array([100.0]))
    array([2.])
    """
    return divide(log(x), _LN10)


def exp2(x: Array) -> Array:
    """2 ** x, elementwise.

    >>> import numpy as np, tracegrad as tg
    >>> tg.exp2(np.array([3.0]))
    array([8.])
    """
    return power(2.0, x)


def square(x: Array) -> Array:
    """x * x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.square(np.array([3.0]))
    array([9.])
    """
    return multiply(x, x)


def reciprocal(x: Array) -> Array:
    """1 / x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.reciprocal(np.array([4.0]))
    array([0.25])
    """
    return divide(1.0, x)


def arcsin(x: Array) -> Array:
    """Inverse sine; the gradient is +inf at x = +-1 (as in JAX).

    >>> import numpy as np, tracegrad as tg
    >>> tg.arcsin(np.array([0.0]))
    array([0.])
    """
    return bind(T.arcsin, x)


def arccos(x: Array) -> Array:
    """Inverse cosine; the gradient is -inf at x = +-1 (as in JAX).

    >>> import numpy as np, tracegrad as tg
    >>> tg.arccos(np.array([1.0]))
    array([0.])
    """
    return bind(T.arccos, x)


def arctan(x: Array) -> Array:
    """Inverse tangent.

    >>> import numpy as np, tracegrad as tg
    >>> tg.arctan(np.array([0.0]))
    array([0.])
    """
    return bind(T.arctan, x)


def arctan2(y: Array, x: Array) -> Array:
    """The angle of the point (x, y), in [-pi, pi]; gradients at (0, 0) are nan, as in JAX.

    >>> import numpy as np, tracegrad as tg
    >>> tg.arctan2(np.array([1.0]), np.array([1.0]))
    array([0.78539816])
    """
    return bind(T.arctan2, y, x)


def hypot(x: Array, y: Array) -> Array:
    """sqrt(x**2 + y**2) without overflow: s * sqrt((x/s)**2 + (y/s)**2), s a power of
    two near max(|x|, |y|). s is built through floor, whose derivative is 0, so every
    derivative is that of sqrt(x*x + y*y): d2/dx2 hypot(x, 2) at 0 is 1/2, as in
    autograd and JAX (max * sqrt(1 + (min / max)**2) went through abs: it gave 0). At
    (0, 0) the gradient is the zero subgradient.

    >>> import numpy as np, tracegrad as tg
    >>> tg.hypot(np.array([3e300]), np.array([4e300]))
    array([5.e+300])
    """
    x, y = _weak_operands(x, y)
    ax, ay = abs(x), abs(y)
    hi = maximum(ax, ay)
    finite = logical_and(greater(hi, 0), less(hi, np.inf))  # (false for nan)
    scale = exp2(floor(log2(where(finite, hi, 1.0))))
    sx, sy = divide(x, scale), divide(y, scale)
    squares = add(multiply(sx, sx), multiply(sy, sy))
    zero = equal(squares, 0)  # sqrt's derivative there is inf: run it on 1, masked
    out = where(zero, 0.0, multiply(scale, sqrt(where(zero, 1.0, squares))))
    either_inf = logical_or(equal(ax, np.inf), equal(ay, np.inf))
    return where(either_inf, np.inf, out)


def logaddexp(x: Array, y: Array) -> Array:
    """log(exp(x) + exp(y)) without overflow; exact at +-inf (logaddexp(-inf, -inf) = -inf,
    where each side's gradient is 1/2; JAX gives nan there).

    >>> import numpy as np, tracegrad as tg
    >>> tg.logaddexp(np.array([1e4]), np.array([1e4]))
    array([10000.69314718])
    """
    # x + log1p(exp(y - x)) where x >= y, else y + log1p(exp(x - y)), selected before the
    # exp so that one exp and one log1p serve both sides. Each branch is smooth where it
    # is used, so second derivatives are right at x == y (max(x, y) + log1p(exp(-|x - y|))
    # has kinks there that cancel only to first order); the exponent is never positive
    # (no overflow), and 0 where undefined (no nan in its gradient)
    delta = subtract(y, x)
    undefined = not_equal(delta, delta)  # inf - inf of one sign, or a nan
    x_wins = greater_equal(x, y)
    exponent = where(undefined, 0.0, where(x_wins, delta, negative(delta)))
    out = add(where(x_wins, x, y), log1p(exp(exponent)))
    return where(undefined, multiply(add(x, y), 0.5), out)


def logaddexp2(x: Array, y: Array) -> Array:
    """log2(2**x + 2**y) without overflow.

    >>> import numpy as np, tracegrad as tg
    >>> tg.logaddexp2(np.array([1.0]), np.array([1.0]))
    array([2.])
    """
    x, y = _weak_operands(x, y)
    return divide(logaddexp(multiply(x, _LN2), multiply(y, _LN2)), _LN2)


def sinc(x: Array) -> Array:
    """sin(pi x) / (pi x), 1 at 0 (NumPy's normalized sinc); its gradient at 0 is 0.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sinc(np.array([0.0, 0.5]))
    array([1.        , 0.63661977])
    """
    zero = less(abs(x), 0.02)  # the series there: sin(px)/px's derivatives cancel near 0
    px = multiply(where(zero, 1.0, x), _math.pi)
    # near 0, the Maclaurin series in x itself (1 at 0): its derivatives are sinc's
    # (the constant 1 at 0 made every higher derivative 0: sinc''(0) is -pi^2/3, as JAX's)
    xs = where(zero, x, 0.0)  # (the untaken series stays finite: no nan gradients)
    u = multiply(multiply(xs, xs), _math.pi**2)
    series = 1.0
    for k in (9, 7, 5, 3):  # 1 - u/3! + u^2/5! - u^3/7! + u^4/9!, by Horner
        series = subtract(1.0, divide(multiply(u, series), float(k * (k - 1))))
    return where(zero, series, divide(sin(px), px))


def floor(x: Array) -> Array:
    """The largest integer <= x, elementwise (its gradient is zero).

    >>> import numpy as np, tracegrad as tg
    >>> tg.floor(np.array([-1.5, 1.5]))
    array([-2.,  1.])
    """
    return bind(T.floor, x)


def remainder(x: Array, y: Array) -> Array:
    """x % y with the sign of y (NumPy's and Python's %). Gradients: 1 for x, -q for y,
    where q is the integer quotient NumPy's divmod used (1 % 0.1 = 1 - 9 * 0.1: q = 9,
    although floor(1 / 0.1) rounds to 10).

    >>> import numpy as np, tracegrad as tg
    >>> tg.remainder(np.array([-3.0, 3.0]), 2.0)
    array([1., 1.])
    """
    return bind(T.remainder, x, y)


mod = remainder


def fmod(x: Array, y: Array) -> Array:
    """C's fmod: x % y with the sign of x.

    >>> import numpy as np, tracegrad as tg
    >>> tg.fmod(np.array([-3.0, 3.0]), 2.0)
    array([-1.,  1.])
    """
    r = remainder(x, y)
    flip = logical_and(not_equal(r, 0), not_equal(less(x, 0), less(y, 0)))
    return where(flip, subtract(r, y), r)


def deg2rad(x: Array) -> Array:
    """Degrees to radians.

    >>> import numpy as np, tracegrad as tg
    >>> tg.deg2rad(np.array([180.0]))
    array([3.14159265])
    """
    return multiply(x, _math.pi / 180.0)


def rad2deg(x: Array) -> Array:
    """Radians to degrees.

    >>> import numpy as np, tracegrad as tg
    >>> tg.rad2deg(np.array([np.pi]))
    array([180.])
    """
    return multiply(x, 180.0 / _math.pi)


radians, degrees = deg2rad, rad2deg


def real(x: Array) -> Array:
    """The real part (x itself for real arrays).

    >>> import numpy as np, tracegrad as tg
    >>> tg.real(np.array([1.0 + 2.0j]))
    array([1.])
    """
    x = _wrap(x)
    return bind(T.REGISTRY["real"], x) if _dtype(x).kind == "c" else x


def imag(x: Array) -> Array:
    """The imaginary part (zeros for real arrays).

    >>> import numpy as np, tracegrad as tg
    >>> tg.imag(np.array([1.0 + 2.0j]))
    array([2.])
    """
    x = _wrap(x)
    return bind(T.REGISTRY["imag"], x) if _dtype(x).kind == "c" else zeros_like(x)


def conjugate(x: Array) -> Array:
    """The complex conjugate (x itself for real arrays).

    >>> import numpy as np, tracegrad as tg
    >>> tg.conj(np.array([1.0 + 2.0j]))
    array([1.-2.j])
    """
    x = _wrap(x)
    return bind(T.REGISTRY["conj"], x) if _dtype(x).kind == "c" else x


conj = conjugate

# ------------------------------------------------------------- reductions and scans


def std(
    x: Array,
    axis: int | Sequence[int] | None = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Array:
    """Standard deviation, sqrt(var). Its gradient is nan where the spread of two or
    more values is 0, as in JAX; over one value (ddof 0) it is 0, as in autograd.

    >>> import numpy as np, tracegrad as tg
    >>> tg.std(np.array([1.0, 3.0]))
    array(1.)
    """
    _no_dtype_out("std", dtype, out)
    x = _wrap(x)
    axes = _axis(axis)
    shape = _shape(x)
    axes = range(len(shape)) if axes is None else (axes,) if isinstance(axes, int) else axes
    spread = var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    if ddof == 0 and int(np.prod([shape[a] for a in axes], dtype=np.int64)) == 1:
        return spread  # var of one value is 0 (or nan), its own sqrt, with derivative 0
    return sqrt(spread)


def _no_dtype_out(name, dtype=None, out=None):
    if dtype is not None or out is not None:
        raise NotImplementedError(
            f"tracegrad.{name}: dtype= and out= are not supported" + user_location_suffix()
        )


def _scan_operand(x, axis, name):
    """(x, axis) for a scan: flattened when axis is None; bools count as int64."""
    x = _wrap(x)
    if axis is None:
        x, axis = ravel(x), 0
    if _dtype(x) == np.bool_:
        x = astype(x, "int64")
    if np.ndim(x) == 0:
        raise ShapeError(
            f"{name}: axis {axis} is out of range for a 0-d array" + user_location_suffix()
        )
    return x, _norm_axis(axis, np.ndim(x), name)


def cumsum(x: Array, axis: int | None = None, dtype: Any = None, out: Any = None) -> Array:
    """Running sum along `axis` (of the flattened array when axis is None).

    >>> import numpy as np, tracegrad as tg
    >>> tg.cumsum(np.array([1.0, 2.0, 3.0]))
    array([1., 3., 6.])
    """
    _no_dtype_out("cumsum", dtype, out)
    x, axis = _scan_operand(x, axis, "cumsum")
    return bind(T.cumsum, x, axis=axis)


def _first_along(x, axis):
    """A constant bool array, True at index 0 of `axis`, that broadcasts against x."""
    shape = [1] * np.ndim(x)
    shape[axis] = _shape(x)[axis]
    mask = np.zeros(shape, dtype=bool)
    mask[tuple(0 if d == axis else slice(None) for d in range(np.ndim(x)))] = True
    return mask


def cumprod(x: Array, axis: int | None = None, dtype: Any = None, out: Any = None) -> Array:
    """Running product along `axis`, as the recurrence h_t = x_t h_(t-1): its gradient
    has no division, so it is exact where x has zeros.

    >>> import numpy as np, tracegrad as tg
    >>> tg.cumprod(np.array([1.0, 2.0, 3.0]))
    array([1., 2., 6.])
    """
    _no_dtype_out("cumprod", dtype, out)
    x, axis = _scan_operand(x, axis, "cumprod")
    first = _first_along(x, axis)
    # h_0 = 0 * 0 + x_0 (a coefficient of 0 at the start, so x_0 = inf does not make 0 * inf)
    return bind(T.linrec, where(first, 0, x), where(first, x, 0), axis=axis)


def prod(
    x: Array,
    axis: int | Sequence[int] | None = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
) -> Array:
    """Product over `axis` (the last value of a cumprod over the reduced axes); its
    gradient (the product of the other entries) is exact where x has zeros.

    >>> import numpy as np, tracegrad as tg
    >>> tg.prod(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    array([ 2., 12.])
    """
    _no_dtype_out("prod", dtype, out)
    x = _wrap(x)
    if _dtype(x).kind in "bi" and _dtype(x).itemsize < 8:
        x = astype(x, "int64")  # NumPy's prod of small ints (and bools) is int64
    shape = _shape(x)
    nd = len(shape)
    axes = normalize_axes("prod", T.aval_of(x), _axis(axis))
    kept = [d for d in range(nd) if d not in axes]
    out_shape = (
        tuple(1 if d in axes else shape[d] for d in range(nd))
        if keepdims
        else tuple(shape[d] for d in kept)
    )
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    if n == 0:
        return full_like(sum(x, axis=axes, keepdims=keepdims), 1)
    if not axes:
        return multiply(x, 1)
    moved = transpose(x, tuple(kept) + tuple(axes)) if kept + list(axes) != list(range(nd)) else x
    flat = reshape(moved, tuple(shape[d] for d in kept) + (n,))
    last = getitem(cumprod(flat, axis=-1), (Ellipsis, -1))
    return reshape(last, out_shape)


def argsort(x: Array, axis: int | None = -1, kind: Any = None, order: Any = None) -> Array:
    """Indices that sort x along `axis` (stable; NaNs last, as NumPy).

    >>> import numpy as np, tracegrad as tg
    >>> tg.argsort(np.array([3.0, 1.0, 2.0]))
    array([1, 2, 0])
    """
    if order is not None:
        raise NotImplementedError(
            "tracegrad.argsort: order= (structured arrays) is not "
            "supported" + user_location_suffix()
        )
    x = _wrap(x)
    if axis is None:
        x, axis = ravel(x), 0
    return bind(T.argsort, x, axis=_norm_axis(axis, np.ndim(x), "argsort"))


def sort(x: Array, axis: int | None = -1, kind: Any = None, order: Any = None) -> Array:
    """x sorted along `axis`; the gradient goes back to each value's original place.

    >>> import numpy as np, tracegrad as tg
    >>> tg.sort(np.array([3.0, 1.0, 2.0]))
    array([1., 2., 3.])
    """
    x = _wrap(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _norm_axis(axis, np.ndim(x), "sort")
    return take_along_axis(x, argsort(x, axis=axis, order=order), axis=axis)


def diff(x: Array, n: int = 1, axis: int = -1) -> Array:
    """n-th differences along `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.diff(np.array([1.0, 4.0, 9.0]))
    array([3., 5.])
    """
    x = _wrap(x)
    axis = _norm_axis(axis, np.ndim(x), "diff")
    for _ in range(int(n)):
        hi = [slice(None)] * np.ndim(x)
        lo = [slice(None)] * np.ndim(x)
        hi[axis], lo[axis] = slice(1, None), slice(None, -1)
        x = subtract(getitem(x, tuple(hi)), getitem(x, tuple(lo)))
    return x


# ------------------------------------------------------------------ shape functions


def atleast_1d(*arrays):
    """Arrays with at least one dimension (NumPy's atleast_1d).

    >>> import numpy as np, tracegrad as tg
    >>> tg.atleast_1d(np.float64(1.0)).shape
    (1,)
    """
    out = [_wrap(a) if np.ndim(a) >= 1 else reshape(_wrap(a), (1,)) for a in arrays]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arrays):
    """Arrays with at least two dimensions (1-D becomes a row).

    >>> import numpy as np, tracegrad as tg
    >>> tg.atleast_2d(np.ones(3)).shape
    (1, 3)
    """
    out = []
    for a in arrays:
        a = _wrap(a)
        out.append(a if np.ndim(a) >= 2 else reshape(a, (1,) * (2 - np.ndim(a)) + _shape(a)))
    return out[0] if len(out) == 1 else out


def atleast_3d(*arrays):
    """Arrays with at least three dimensions ((n,) -> (1, n, 1), (m, n) -> (m, n, 1)).

    >>> import numpy as np, tracegrad as tg
    >>> tg.atleast_3d(np.ones((2, 3))).shape
    (2, 3, 1)
    """
    out = []
    for a in arrays:
        a = _wrap(a)
        nd = np.ndim(a)
        new = {0: (1, 1, 1), 1: (1,) + _shape(a) + (1,), 2: _shape(a) + (1,)}.get(nd)
        out.append(a if new is None else reshape(a, new))
    return out[0] if len(out) == 1 else out


def vstack(tup: Sequence[Array]) -> Array:
    """Stack arrays as rows (1-D arrays become rows).

    >>> import numpy as np, tracegrad as tg
    >>> tg.vstack([np.ones(2), np.zeros(2)]).shape
    (2, 2)
    """
    return concatenate([atleast_2d(a) for a in tup], axis=0)


row_stack = vstack


def hstack(tup: Sequence[Array]) -> Array:
    """Stack arrays column-wise (1-D arrays are joined end to end).

    >>> import numpy as np, tracegrad as tg
    >>> tg.hstack([np.ones(2), np.zeros(3)]).shape
    (5,)
    """
    arrays = [atleast_1d(a) for a in tup]
    return concatenate(arrays, axis=0 if arrays and np.ndim(arrays[0]) == 1 else 1)


def dstack(tup: Sequence[Array]) -> Array:
    """Stack arrays along the third axis.

    >>> import numpy as np, tracegrad as tg
    >>> tg.dstack([np.ones((2, 3)), np.zeros((2, 3))]).shape
    (2, 3, 2)
    """
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup: Sequence[Array]) -> Array:
    """Stack 1-D arrays as columns of a 2-D array (2-D arrays as they are).

    >>> import numpy as np, tracegrad as tg
    >>> tg.column_stack([np.ones(3), np.zeros(3)]).shape
    (3, 2)
    """
    cols = []
    for a in tup:
        a = _wrap(a)
        cols.append(reshape(a, _shape(a) + (1,)) if np.ndim(a) < 2 else a)
    return concatenate(cols, axis=1)


def _split_points(n: int, indices_or_sections, equal: bool, name: str) -> list:
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(
                f"{name}: number of sections must be larger than 0" + user_location_suffix()
            )
        if equal and n % sections:
            raise ValueError(
                f"{name}: array split does not result in an equal division "
                f"({n} into {sections})" + user_location_suffix()
            )
        size, extra = divmod(n, sections)
        bounds, start = [], 0
        for k in range(sections):
            stop = start + size + (k < extra)
            bounds.append((start, stop))
            start = stop
        return bounds
    cuts = [int(i) for i in indices_or_sections]
    edges = [0] + cuts + [n]
    return [
        (
            builtins.min(builtins.max(a if a >= 0 else a + n, 0), n),
            builtins.min(builtins.max(b if b >= 0 else b + n, 0), n),
        )
        for a, b in zip(edges[:-1], edges[1:], strict=True)
    ]


def _split(x, indices_or_sections, axis, equal, name):
    x = _wrap(x)
    axis = _norm_axis(axis, np.ndim(x), name)
    pieces = []
    for start, stop in _split_points(_shape(x)[axis], indices_or_sections, equal, name):
        index = [slice(None)] * np.ndim(x)
        index[axis] = slice(start, builtins.max(start, stop))
        pieces.append(getitem(x, tuple(index)))
    return pieces


def split(x: Array, indices_or_sections, axis: int = 0) -> list:
    """Split into equal sections (an int) or at the given indices, along `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> [p.shape for p in tg.split(np.ones(6), 3)]
    [(2,), (2,), (2,)]
    """
    return _split(x, indices_or_sections, axis, True, "split")


def array_split(x: Array, indices_or_sections, axis: int = 0) -> list:
    """Like split, but sections may differ in size by one (the first ones are larger).

    >>> import numpy as np, tracegrad as tg
    >>> [p.shape for p in tg.array_split(np.ones(5), 3)]
    [(2,), (2,), (1,)]
    """
    return _split(x, indices_or_sections, axis, False, "array_split")


def hsplit(x: Array, indices_or_sections) -> list:
    """split along axis 1 (axis 0 for 1-D arrays).

    >>> import numpy as np, tracegrad as tg
    >>> [p.shape for p in tg.hsplit(np.ones((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    return split(x, indices_or_sections, axis=1 if np.ndim(x) > 1 else 0)


def vsplit(x: Array, indices_or_sections) -> list:
    """split along axis 0.

    >>> import numpy as np, tracegrad as tg
    >>> [p.shape for p in tg.vsplit(np.ones((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    return split(x, indices_or_sections, axis=0)


def dsplit(x: Array, indices_or_sections) -> list:
    """split along axis 2.

    >>> import numpy as np, tracegrad as tg
    >>> [p.shape for p in tg.dsplit(np.ones((1, 1, 4)), 2)]
    [(1, 1, 2), (1, 1, 2)]
    """
    return split(x, indices_or_sections, axis=2)


def repeat(x: Array, repeats, axis: int | None = None) -> Array:
    """Repeat each element `repeats` times along `axis` (the flattened array if None).

    >>> import numpy as np, tracegrad as tg
    >>> tg.repeat(np.array([1.0, 2.0]), 2)
    array([1., 1., 2., 2.])
    """
    x = _wrap(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _norm_axis(axis, np.ndim(x), "repeat")
    shape = _shape(x)
    if isinstance(repeats, (int, np.integer)) or np.ndim(repeats) == 0:
        r = int(repeats)
        if r < 0:
            raise ValueError(
                "repeat: repeats may not contain negative values" + user_location_suffix()
            )
        wide = broadcast_to(expand_dims(x, axis + 1), shape[: axis + 1] + (r,) + shape[axis + 1 :])
        return reshape(wide, shape[:axis] + (shape[axis] * r,) + shape[axis + 1 :])
    counts = np.asarray(repeats, dtype=np.int64)
    if counts.shape != (shape[axis],) or (counts < 0).any():
        raise ValueError(
            f"repeat: repeats must be non-negative, one per element along axis "
            f"{axis} (got shape {counts.shape})" + user_location_suffix()
        )
    index = [slice(None)] * len(shape)
    index[axis] = np.repeat(np.arange(shape[axis]), counts)
    return getitem(x, tuple(index))


def tile(x: Array, reps) -> Array:
    """x repeated `reps` times along each axis (NumPy's tile).

    >>> import numpy as np, tracegrad as tg
    >>> tg.tile(np.array([1.0, 2.0]), 2)
    array([1., 2., 1., 2.])
    """
    x = _wrap(x)
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(int(r) for r in reps)
    nd = builtins.max(np.ndim(x), len(reps))
    shape = (1,) * (nd - np.ndim(x)) + _shape(x)
    reps = (1,) * (nd - len(reps)) + reps
    inter = tuple(v for d in shape for v in (1, d))
    wide = tuple(v for r, d in zip(reps, shape, strict=True) for v in (r, d))
    return reshape(
        broadcast_to(reshape(x, inter), wide),
        tuple(r * d for r, d in zip(reps, shape, strict=True)),
    )


def flip(x: Array, axis: int | Sequence[int] | None = None) -> Array:
    """Reverse the order of elements along `axis` (all axes by default).

    >>> import numpy as np, tracegrad as tg
    >>> tg.flip(np.array([1.0, 2.0, 3.0]))
    array([3., 2., 1.])
    """
    x = _wrap(x)
    axes = normalize_axes("flip", T.aval_of(x), _axis(axis))
    return getitem(
        x, tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(np.ndim(x)))
    )


def fliplr(x: Array) -> Array:
    """Reverse the columns (axis 1).

    >>> import numpy as np, tracegrad as tg
    >>> tg.fliplr(np.array([[1.0, 2.0]]))
    array([[2., 1.]])
    """
    return flip(x, 1)


def flipud(x: Array) -> Array:
    """Reverse the rows (axis 0).

    >>> import numpy as np, tracegrad as tg
    >>> tg.flipud(np.array([[1.0], [2.0]]))
    array([[2.],
           [1.]])
    """
    return flip(x, 0)


def roll(x: Array, shift, axis: int | Sequence[int] | None = None) -> Array:
    """Shift elements cyclically along `axis` (the flattened array when axis is None).

    >>> import numpy as np, tracegrad as tg
    >>> tg.roll(np.array([1.0, 2.0, 3.0]), 1)
    array([3., 1., 2.])
    """
    x = _wrap(x)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), _shape(x))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    shifts = (shift,) * len(axes) if np.ndim(shift) == 0 else tuple(shift)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis must have the same length" + user_location_suffix())
    for s, a in zip(shifts, axes, strict=True):
        a = _norm_axis(a, np.ndim(x), "roll")
        n = _shape(x)[a]
        s = int(s) % n if n else 0
        if s == 0:
            continue
        head = [slice(None)] * np.ndim(x)
        tail = [slice(None)] * np.ndim(x)
        head[a], tail[a] = slice(n - s, None), slice(0, n - s)
        x = concatenate([getitem(x, tuple(head)), getitem(x, tuple(tail))], axis=a)
    return x


def swapaxes(x: Array, axis1: int, axis2: int) -> Array:
    """Exchange two axes.

    >>> import numpy as np, tracegrad as tg
    >>> tg.swapaxes(np.ones((2, 3)), 0, 1).shape
    (3, 2)
    """
    x = _wrap(x)
    nd = np.ndim(x)
    axes = list(range(nd))
    a, b = _norm_axis(axis1, nd, "swapaxes"), _norm_axis(axis2, nd, "swapaxes")
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


def moveaxis(x: Array, source, destination) -> Array:
    """Move axes to new positions; the others keep their order.

    >>> import numpy as np, tracegrad as tg
    >>> tg.moveaxis(np.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    x = _wrap(x)
    nd = np.ndim(x)
    src = [_norm_axis(s, nd, "moveaxis") for s in np.atleast_1d(source).tolist()]
    dst = [_norm_axis(d, nd, "moveaxis") for d in np.atleast_1d(destination).tolist()]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return transpose(x, tuple(order))


# -------------------------------------------------------------- diagonals and triangles


def _diag_index(n_rows: int, n_cols: int, k: int):
    rows = np.arange(
        builtins.max(
            builtins.min(n_rows, n_cols - k) if k >= 0 else builtins.min(n_rows + k, n_cols), 0
        )
    )
    return (rows, rows + k) if k >= 0 else (rows - k, rows)


def diagonal(x: Array, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The `offset` diagonal over axes (axis1, axis2), as the last axis of the result.

    >>> import numpy as np, tracegrad as tg
    >>> tg.diagonal(np.arange(9.0).reshape(3, 3))
    array([0., 4., 8.])
    """
    x = _wrap(x)
    nd = np.ndim(x)
    if nd < 2:
        raise ShapeError(
            "diagonal: needs an array of at least 2 dimensions" + user_location_suffix()
        )
    a1, a2 = _norm_axis(axis1, nd, "diagonal"), _norm_axis(axis2, nd, "diagonal")
    if a1 == a2:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same" + user_location_suffix())
    rest = [d for d in range(nd) if d not in (a1, a2)]
    if rest + [a1, a2] != list(range(nd)):
        x = transpose(x, tuple(rest) + (a1, a2))
    rows, cols = _diag_index(_shape(x)[-2], _shape(x)[-1], int(offset))
    return getitem(x, (Ellipsis, rows, cols))


def trace(
    x: Array, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None
) -> Array:
    """Sum of the `offset` diagonal.

    >>> import numpy as np, tracegrad as tg
    >>> tg.trace(np.eye(3))
    array(3.)
    """
    _no_dtype_out("trace", dtype, out)
    return sum(diagonal(x, offset, axis1, axis2), axis=-1)


def diag(v: Array, k: int = 0) -> Array:
    """1-D input: a square matrix with v on its k-th diagonal; 2-D input: its k-th diagonal.

    >>> import numpy as np, tracegrad as tg
    >>> tg.diag(np.array([1.0, 2.0]))
    array([[1., 0.],
           [0., 2.]])
    """
    v = _wrap(v)
    if np.ndim(v) == 2:
        return diagonal(v, k)
    if np.ndim(v) != 1:
        raise ShapeError("diag: input must be 1-D or 2-D" + user_location_suffix())
    n = _shape(v)[0] + builtins.abs(int(k))
    rows, cols = _diag_index(n, n, int(k))
    return bind(T.index_add_zeros, v, rows, cols, spec=(("array", 0), ("array", 1)), shape=(n, n))


def diagflat(v: Array, k: int = 0) -> Array:
    """diag of the flattened input.

    >>> import numpy as np, tracegrad as tg
    >>> tg.diagflat(np.array([[1.0, 2.0]]))
    array([[1., 0.],
           [0., 2.]])
    """
    return diag(ravel(_wrap(v)), k)


def _triangle(x, k, lower: bool, name: str):
    x = _wrap(x)
    if np.ndim(x) < 2:
        raise ShapeError(
            f"{name}: needs an array of at least 2 dimensions" + user_location_suffix()
        )
    m, n = _shape(x)[-2:]
    keep = np.tri(m, n, k=int(k), dtype=bool) if lower else ~np.tri(m, n, k=int(k) - 1, dtype=bool)
    return where(keep, x, zeros_like(x))


def tril(x: Array, k: int = 0) -> Array:
    """x with the entries above the k-th diagonal set to zero.

    >>> import numpy as np, tracegrad as tg
    >>> tg.tril(np.ones((2, 2)))
    array([[1., 0.],
           [1., 1.]])
    """
    return _triangle(x, k, True, "tril")


def triu(x: Array, k: int = 0) -> Array:
    """x with the entries below the k-th diagonal set to zero.

    >>> import numpy as np, tracegrad as tg
    >>> tg.triu(np.ones((2, 2)))
    array([[1., 1.],
           [0., 1.]])
    """
    return _triangle(x, k, False, "triu")


# -------------------------------------------------------------- products


def outer(a: Array, b: Array) -> Array:
    """a_i * b_j over the flattened inputs.

    >>> import numpy as np, tracegrad as tg
    >>> tg.outer(np.array([1.0, 2.0]), np.array([1.0, 10.0]))
    array([[ 1., 10.],
           [ 2., 20.]])
    """
    a, b = ravel(_wrap(a)), ravel(_wrap(b))
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def _tensordot_axes(axes, nd_a: int, nd_b: int):
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > builtins.min(nd_a, nd_b):
            raise ShapeError(f"tensordot: axes={n} is out of range" + user_location_suffix())
        return list(range(nd_a - n, nd_a)), list(range(n))
    axes_a, axes_b = axes
    axes_a = [axes_a] if np.ndim(axes_a) == 0 else list(axes_a)
    axes_b = [axes_b] if np.ndim(axes_b) == 0 else list(axes_b)
    if len(axes_a) != len(axes_b):
        raise ShapeError(
            "tensordot: the two axis lists must have the same length" + user_location_suffix()
        )
    return (
        [_norm_axis(a, nd_a, "tensordot") for a in axes_a],
        [_norm_axis(b, nd_b, "tensordot") for b in axes_b],
    )


def tensordot(
    a: Array, b: Array, axes=2, *, precision: Any = None, preferred_element_type: Any = None
) -> Array:
    """Sum of products over the given axes (transposes, reshapes and one matmul).
    `precision` and `preferred_element_type` as `matmul`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.tensordot(np.ones((2, 3)), np.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    a, b = _dot_options("tensordot", _wrap(a), _wrap(b), precision, preferred_element_type)
    sa, sb = _shape(a), _shape(b)
    axes_a, axes_b = _tensordot_axes(axes, len(sa), len(sb))
    for i, j in zip(axes_a, axes_b, strict=True):
        if sa[i] != sb[j]:
            raise ShapeError(
                f"tensordot: shape mismatch for sum ({sa} axis {i} vs {sb} axis {j})"
                + user_location_suffix()
            )
    free_a = [d for d in range(len(sa)) if d not in axes_a]
    free_b = [d for d in range(len(sb)) if d not in axes_b]
    k = int(np.prod([sa[d] for d in axes_a], dtype=np.int64))
    fa = int(np.prod([sa[d] for d in free_a], dtype=np.int64))
    fb = int(np.prod([sb[d] for d in free_b], dtype=np.int64))
    a2 = reshape(_permuted(a, free_a + axes_a), (fa, k))
    b2 = reshape(_permuted(b, axes_b + free_b), (k, fb))
    return reshape(matmul(a2, b2), tuple(sa[d] for d in free_a) + tuple(sb[d] for d in free_b))


def _permuted(x, order):
    return x if list(order) == list(range(len(order))) else transpose(x, tuple(order))


def inner(
    a: Array, b: Array, *, precision: Any = None, preferred_element_type: Any = None
) -> Array:
    """Sum of products over the last axes of a and b (`precision`, `preferred_element_type`
    as `matmul`).

    >>> import numpy as np, tracegrad as tg
    >>> tg.inner(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    array(11.)
    """
    a, b = _dot_options("inner", _wrap(a), _wrap(b), precision, preferred_element_type)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return multiply(a, b)
    return tensordot(a, b, axes=([-1], [-1]))


def vdot(a: Array, b: Array, *, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """Dot product of the flattened arrays (`precision`, `preferred_element_type` as
    `matmul`).

    >>> import numpy as np, tracegrad as tg
    >>> tg.vdot(np.array([[1.0, 2.0]]), np.array([3.0, 4.0]))
    array(11.)
    """
    a, b = _dot_options("vdot", _wrap(a), _wrap(b), precision, preferred_element_type)
    return sum(multiply(ravel(conjugate(a)), ravel(b)))  # NumPy conjugates a complex `a`


def kron(a: Array, b: Array) -> Array:
    """Kronecker product: blocks a[i, j] * b.

    >>> import numpy as np, tracegrad as tg
    >>> tg.kron(np.eye(2), np.ones((1, 2)))
    array([[1., 1., 0., 0.],
           [0., 0., 1., 1.]])
    """
    a, b = _wrap(a), _wrap(b)
    nd = builtins.max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + _shape(a)
    sb = (1,) * (nd - np.ndim(b)) + _shape(b)
    a2 = reshape(a, tuple(v for d in sa for v in (d, 1)))
    b2 = reshape(b, tuple(v for d in sb for v in (1, d)))
    return reshape(multiply(a2, b2), tuple(x * y for x, y in zip(sa, sb, strict=True)))


def cross(a: Array, b: Array, axis: int = -1) -> Array:
    """Cross product of 3-vectors along `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.cross(np.array([1.0, 0, 0]), np.array([0.0, 1, 0]))
    array([0., 0., 1.])
    """
    a, b = moveaxis(_wrap(a), axis, -1), moveaxis(_wrap(b), axis, -1)
    if _shape(a)[-1] != 3 or _shape(b)[-1] != 3:
        raise ShapeError("cross: only 3-vectors are supported" + user_location_suffix())
    a0, a1, a2 = (getitem(a, (Ellipsis, i)) for i in range(3))
    b0, b1, b2 = (getitem(b, (Ellipsis, i)) for i in range(3))
    c = stack(
        [
            subtract(multiply(a1, b2), multiply(a2, b1)),
            subtract(multiply(a2, b0), multiply(a0, b2)),
            subtract(multiply(a0, b1), multiply(a1, b0)),
        ],
        axis=-1,
    )
    return moveaxis(c, -1, axis)


# -------------------------------------------------------------------------- einsum

_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_parse(subscripts: str, operands) -> tuple[list[str], str]:
    """Input subscripts (one string per operand, `...` expanded) and the output."""
    subscripts = subscripts.replace(" ", "")
    lhs, arrow, rhs = subscripts.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ValueError(
            f"einsum: {len(inputs)} subscripts for {len(operands)} operands"
            + user_location_suffix()
        )
    used = set(subscripts) - set(".,->")
    for c in used:
        if c not in _EINSUM_LETTERS:
            raise ValueError(f"einsum: invalid subscript {c!r}" + user_location_suffix())
    free = [c for c in _EINSUM_LETTERS if c not in used]
    n_ell = 0
    for s, op in zip(inputs, operands, strict=True):
        if "..." in s:
            n_ell = builtins.max(n_ell, np.ndim(op) - (len(s) - 3))
    ell = "".join(free[:n_ell])
    expanded = []
    for s, op in zip(inputs, operands, strict=True):
        if "..." in s:
            k = np.ndim(op) - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k :] if k else "")
        if len(s) != np.ndim(op):
            raise ValueError(
                f"einsum: subscripts {s!r} do not match an operand of shape "
                f"{_shape(op)}" + user_location_suffix()
            )
        expanded.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for s in expanded:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(
            sorted(
                (c for c, n in counts.items() if n == 1 and c not in ell), key=_EINSUM_LETTERS.index
            )
        )
    if len(set(out)) != len(out):
        raise ValueError(
            f"einsum: output subscript {out!r} repeats a letter" + user_location_suffix()
        )
    for c in out:
        if not builtins.any(c in s for s in expanded):
            raise ValueError(
                f"einsum: output subscript {c!r} does not appear in the inputs"
                + user_location_suffix()
            )
    return expanded, out


def _einsum_diagonals(x, s: str):
    """Take the diagonal of every letter repeated within one operand ('ii' -> 'i')."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        p = s.index(c)
        q = s.index(c, p + 1)
        x = diagonal(x, 0, p, q)  # the diagonal becomes the last axis
        s = "".join(ch for i, ch in enumerate(s) if i not in (p, q)) + c
    return x, s


def _einsum_sizes(operands, subs) -> dict:
    sizes: dict = {}
    for x, s in zip(operands, subs, strict=True):
        for c, d in zip(s, _shape(x), strict=True):
            old = sizes.get(c, 1)
            if d != 1 and old != 1 and d != old:
                raise ShapeError(
                    f"einsum: size of label {c!r} is {old} in one operand and "
                    f"{d} in another" + user_location_suffix()
                )
            sizes[c] = builtins.max(old, d)
    return sizes


def _einsum_pair(a, sa: str, b, sb: str, keep: set, sizes: dict):
    """Contract two operands with one (batched) matmul; keep the letters in `keep`."""
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    only_a = [c for c in sa if c not in sb]
    only_b = [c for c in sb if c not in sa]

    def arrange(x, s, order):
        x = _permuted(x, [s.index(c) for c in order])
        target = tuple(sizes[c] for c in order)
        return broadcast_to(x, target) if _shape(x) != target else x

    nb = int(np.prod([sizes[c] for c in batch], dtype=np.int64))
    na = int(np.prod([sizes[c] for c in only_a], dtype=np.int64))
    nbb = int(np.prod([sizes[c] for c in only_b], dtype=np.int64))
    nk = int(np.prod([sizes[c] for c in contract], dtype=np.int64))
    a3 = reshape(arrange(a, sa, batch + only_a + contract), (nb, na, nk))
    b3 = reshape(arrange(b, sb, batch + contract + only_b), (nb, nk, nbb))
    if nb == 1:
        out = matmul(reshape(a3, (na, nk)), reshape(b3, (nk, nbb)))
    else:
        out = matmul(a3, b3)
    letters = batch + only_a + only_b
    return reshape(out, tuple(sizes[c] for c in letters)), "".join(letters)


def _einsum_sublists(args) -> tuple[str, tuple]:
    def letters(sub):
        return "".join("..." if s is Ellipsis else _EINSUM_LETTERS[int(s)] for s in sub)

    out = args[-1] if len(args) % 2 == 1 else None  # an odd count ends with the output
    pairs = args[:-1] if out is not None else args
    ops, subs = list(pairs[0::2]), list(pairs[1::2])
    text = ",".join(letters(s) for s in subs) + ("" if out is None else "->" + letters(out))
    return text, tuple(ops)


def einsum(subscripts: str, *operands, optimize: Any = False, **kwargs) -> Array:
    """Einstein summation, as transposes, diagonals, sums and batched matmuls.

    Supports explicit and implicit outputs, `...`, repeated letters (traces and
    diagonals) and any number of operands (contracted left to right).

    >>> import numpy as np, tracegrad as tg
    >>> tg.einsum("ij,jk->ik", np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[1., 2.],
           [3., 4.]])
    """
    if not isinstance(subscripts, str):  # einsum(op0, sublist0, op1, sublist1, ..., [out])
        subscripts, operands = _einsum_sublists((subscripts,) + operands)
    _no_dtype_out("einsum", kwargs.pop("dtype", None), kwargs.pop("out", None))
    precision, preferred = kwargs.pop("precision", None), kwargs.pop("preferred_element_type", None)
    if kwargs:
        raise TypeError(f"einsum: unexpected keyword arguments {sorted(kwargs)}")
    operands = [_wrap(x) for x in operands]
    if precision is not None or preferred is not None:  # JAX's, as matmul's
        operands = [_dot_options("einsum", x, x, precision, preferred)[0] for x in operands]
    subs, out = _einsum_parse(subscripts, operands)
    xs = []
    for x, s in zip(operands, subs, strict=True):
        x, s = _einsum_diagonals(x, s)
        xs.append((x, s))
    sizes = _einsum_sizes([x for x, _ in xs], [s for _, s in xs])
    for i, (x, s) in enumerate(xs):  # sum out letters no other operand or the output needs
        others = set(out).union(*[set(t) for j, (_, t) in enumerate(xs) if j != i])
        gone = [p for p, c in enumerate(s) if c not in others]
        if gone:
            x = sum(x, axis=tuple(gone))
            s = "".join(c for c in s if c in others)
        xs[i] = (x, s)
    x, s = xs[0]
    for k in range(1, len(xs)):
        y, t = xs[k]
        keep = set(out).union(*[set(u) for _, u in xs[k + 1 :]])
        x, s = _einsum_pair(x, s, y, t, keep, sizes)
    gone = [p for p, c in enumerate(s) if c not in out]
    if gone:
        x = sum(x, axis=tuple(gone))
        s = "".join(c for c in s if c in out)
    x = _permuted(x, [s.index(c) for c in out])
    target = tuple(sizes[c] for c in out)
    return broadcast_to(x, target) if _shape(x) != target else x


# --------------------------------------------------------------------- linalg.norm


def norm(
    x: Array,
    ord: Any = None,
    axis: Any = None,
    keepdims: bool = False,
) -> Array:
    """NumPy's linalg.norm for vectors (any ord) and matrices ('fro', 'nuc', 1, -1, 2, -2,
    inf, -inf; 2, -2 and 'nuc' from the singular values).

    The 2-norm's gradient at x = 0 is nan, as in JAX (x / |x|).

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.norm(np.array([3.0, 4.0]))
    array(5.)
    """
    x = _wrap(x)
    nd = np.ndim(x)
    if axis is None:
        if ord is None or (ord in ("fro", "f") and nd == 2) or (ord == 2 and nd == 1):
            return _keep_all(sqrt(sum(_abs_squared(x))), nd, keepdims)
        if nd == 1:
            axis = (0,)
        elif nd == 2:
            axis = (0, 1)
        else:
            raise ValueError("norm: improper number of dimensions to norm" + user_location_suffix())
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    axes = tuple(_norm_axis(a, nd, "norm") for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) != 2:
        raise ValueError("norm: improper number of dimensions to norm" + user_location_suffix())
    r, c = axes
    if ord is None or ord in ("fro", "f"):
        return sqrt(sum(_abs_squared(x), axis=axes, keepdims=keepdims))
    if ord in (1, -1):
        col = sum(abs(x), axis=r, keepdims=True)
        res = (max if ord == 1 else min)(col, axis=c, keepdims=True)
    elif ord in (np.inf, -np.inf):
        row = sum(abs(x), axis=c, keepdims=True)
        res = (max if ord == np.inf else min)(row, axis=r, keepdims=True)
    elif ord in (2, -2, "nuc"):  # from the singular values (ops/linalg.py svdvals)
        s = _linalg_ops.svdvals(moveaxis(x, (r, c), (-2, -1)))
        res = sum(s, axis=-1) if ord == "nuc" else (max if ord == 2 else min)(s, axis=-1)
        return (
            reshape(res, tuple(1 if i in axes else d for i, d in enumerate(_shape(x))))
            if keepdims
            else res
        )
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices" + user_location_suffix())
    return res if keepdims else squeeze(res, axis=axes)


def _abs_squared(x):
    """|x|^2: x * x for real arrays, re^2 + im^2 for complex ones (real)."""
    if _dtype(x).kind != "c":
        return multiply(x, x)
    re, im = real(x), imag(x)
    return add(multiply(re, re), multiply(im, im))


def _keep_all(v, nd, keepdims):
    return reshape(v, (1,) * nd) if keepdims else v


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return sqrt(sum(_abs_squared(x), axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return max(abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return min(abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return sum(
            astype(not_equal(x, 0), _dtype(x) if _dtype(x).kind == "f" else "float64"),
            axis=axis,
            keepdims=keepdims,
        )
    if ord == 1:
        return sum(abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors" + user_location_suffix())
    p = float(ord)
    return power(sum(power(abs(x), p), axis=axis, keepdims=keepdims), 1.0 / p)


class _Linalg:
    """`tracegrad.linalg`: norm; cholesky solve inv det slogdet solve_triangular (ops/linalg.py).

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.norm(np.array([[3.0], [4.0]]))
    array(5.)
    """

    norm = staticmethod(norm)

    def __repr__(self) -> str:
        return "<tracegrad.linalg: " + " ".join(("norm",) + _linalg_ops.PUBLIC) + ">"


from tracegrad.ops import linalg as _linalg_ops  # noqa: E402  (issue 14: cholesky, solve, ...)

for _name in _linalg_ops.PUBLIC:
    setattr(_Linalg, _name, staticmethod(getattr(_linalg_ops, _name)))
linalg = _Linalg()

from tracegrad.ops import fourier as _fourier_ops  # noqa: E402  (issue 26: numpy.fft)
from tracegrad.ops import linalg_eig as _eig_ops  # noqa: E402  (issue 26: eig, eigvals)

_Linalg.eig = staticmethod(_eig_ops.eig)  # type: ignore[attr-defined]
_Linalg.eigvals = staticmethod(_eig_ops.eigvals)  # type: ignore[attr-defined]


def _complex_aware(real_fn: Any, general_fn: Any) -> Any:
    """`real_fn` (ops/linalg.py), or `general_fn` (linalg_eig.py) for complex operands."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        if builtins.any(_dtype(a).kind == "c" for a in args if a is not None):
            return general_fn(*args)
        return real_fn(*args, **kwargs)

    fn.__name__, fn.__doc__ = real_fn.__name__, real_fn.__doc__
    return staticmethod(fn)


_Linalg.inv = _complex_aware(_linalg_ops.inv, _eig_ops.inv_general)  # type: ignore[attr-defined]
_Linalg.solve = _complex_aware(_linalg_ops.solve, _eig_ops.solve_any)  # type: ignore[attr-defined]
_Linalg.det = _complex_aware(_linalg_ops.det, _eig_ops.det_general)  # type: ignore[attr-defined]

fft = _fourier_ops.NAMESPACE

# ------------------------------------------------------------- arrays from values


def _contains_traced(value) -> bool:
    if isinstance(value, (list, tuple)):
        return builtins.any(_contains_traced(v) for v in value)
    return (
        not isinstance(value, (np.ndarray, np.generic, int, float, bool, complex))
        and hasattr(value, "shape")
        and hasattr(value, "dtype")
    )


def array(obj: Any, dtype: Any = None, copy: bool = True, ndmin: int = 0, **kwargs) -> Array:
    """An array from nested lists that may hold traced values or eager tensors.

    `tg.array([x, 2 * x])` stacks traced scalars (or arrays of one shape) into one
    array while tracing; on plain values it is np.array.

    >>> import numpy as np, tracegrad as tg
    >>> tg.array([1.0, 2.0])
    array([1., 2.])
    """
    if kwargs:
        raise TypeError(f"array: unexpected keyword arguments {sorted(kwargs)}")
    if not _contains_traced(obj):
        out = np.array(
            obj,
            dtype=None if dtype is None else np.dtype(getattr(dtype, "np_dtype", dtype)),
            copy=copy,
            ndmin=ndmin,
        )
        return out
    out = _build(obj)
    if dtype is not None:
        out = astype(out, dtype)
    if np.ndim(out) < ndmin:
        out = reshape(out, (1,) * (ndmin - np.ndim(out)) + _shape(out))
    return out


def _build(obj):
    if not isinstance(obj, (list, tuple)):
        return obj if _contains_traced(obj) else np.asarray(obj)
    if not obj:
        return np.zeros((0,))
    parts = [_build(v) for v in obj]
    dtypes = [_dtype(p) for p in parts if _contains_traced(p)]
    target = np.result_type(*dtypes, *[p for p in parts if not _contains_traced(p)])
    parts = [
        p
        if _contains_traced(p) and _dtype(p) == target
        else (astype(p, target.name) if _contains_traced(p) else np.asarray(p, dtype=target))
        for p in parts
    ]
    return stack(parts, axis=0)


def asarray(obj: Any, dtype: Any = None, **kwargs) -> Array:
    """Like `array`, without a copy of arrays, tensors and tracers that already fit.

    >>> import numpy as np, tracegrad as tg
    >>> tg.asarray([1.0, 2.0])
    array([1., 2.])
    """
    if _contains_traced(obj) and not isinstance(obj, (list, tuple)):
        return obj if dtype is None or _dtype(obj) == np.dtype(dtype) else astype(obj, dtype)
    if not _contains_traced(obj):
        return np.asarray(obj, dtype=dtype, **kwargs)
    return array(obj, dtype=dtype)


__all__ += [
    # NumPy coverage (issue 13): elementwise
    "tan",
    "sinh",
    "cosh",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "hypot",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "exp2",
    "square",
    "reciprocal",
    "logaddexp",
    "logaddexp2",
    "sinc",
    "floor",
    "remainder",
    "mod",
    "fmod",
    "deg2rad",
    "rad2deg",
    "radians",
    "degrees",
    "real",
    "imag",
    "conj",
    "conjugate",
    # reductions and scans
    "std",
    "prod",
    "cumsum",
    "cumprod",
    "sort",
    "argsort",
    "diff",
    # shape
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "vstack",
    "row_stack",
    "hstack",
    "dstack",
    "column_stack",
    "split",
    "array_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "repeat",
    "tile",
    "flip",
    "fliplr",
    "flipud",
    "roll",
    "swapaxes",
    "moveaxis",
    # diagonals, triangles, products
    "diagonal",
    "trace",
    "diag",
    "diagflat",
    "tril",
    "triu",
    "outer",
    "tensordot",
    "inner",
    "vdot",
    "kron",
    "cross",
    "einsum",
    "linalg",
    "fft",
    "norm",
    # arrays from values
    "array",
    "asarray",
]

# ------------------------------------------------ more of HIPS autograd's numpy_vjps names


def _abs1(x):
    """|x| whose derivative at 0 is +1 (abs's is 0), for odd functions built from |x|."""
    return where(greater_equal(x, 0), x, negative(x))


def _odd(x, magnitude):
    """sign(x) * f(|x|) with f's slope kept at x = 0."""
    m = magnitude(_abs1(x))
    return where(greater_equal(x, 0), m, negative(m))


_ASINH_BIG = 1e8  # beyond this, asinh(a) = log(2a) to double precision


def arcsinh(x: Array) -> Array:
    """Inverse hyperbolic sine: log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x|
    (accurate near 0), log(2a) for huge a (no overflow of a^2).

    >>> import numpy as np, tracegrad as tg
    >>> tg.arcsinh(np.array([0.0]))
    array([0.])
    """

    def magnitude(a):
        big = greater(a, _ASINH_BIG)
        s = where(big, 1.0, a)  # the untaken branch stays finite
        near = log1p(add(s, divide(multiply(s, s), add(sqrt(add(multiply(s, s), 1.0)), 1.0))))
        far = add(log(where(big, a, 1.0)), _LN2)
        return where(big, far, near)

    return _odd(x, magnitude)


def arccosh(x: Array) -> Array:
    """Inverse hyperbolic cosine (x >= 1): log1p(t + sqrt(t) sqrt(t + 2)) for t = x - 1,
    log(2x) for huge x; the gradient at x = 1 is +inf.

    >>> import numpy as np, tracegrad as tg
    >>> tg.arccosh(np.array([1.0]))
    array([0.])
    """
    big = greater(x, _ASINH_BIG)
    t = subtract(where(big, 2.0, x), 1.0)
    near = log1p(add(t, multiply(sqrt(t), sqrt(add(t, 2.0)))))  # sqrt(t): +inf slope at 1
    far = add(log(where(big, x, 1.0)), _LN2)
    return where(big, far, near)


def arctanh(x: Array) -> Array:
    """Inverse hyperbolic tangent, (log1p(x) - log1p(-x)) / 2: no cancellation near 0, exact
    1 - x near 1; +-inf at +-1, where the gradient is +inf (as in JAX).

    >>> import numpy as np, tracegrad as tg
    >>> tg.arctanh(np.array([0.0]))
    array([0.])
    """
    return multiply(subtract(log1p(x), log1p(negative(x))), 0.5)


def isnan(x: Array) -> Array:
    """True where x is nan.

    >>> import numpy as np, tracegrad as tg
    >>> tg.isnan(np.array([1.0, np.nan]))
    array([False,  True])
    """
    return not_equal(x, x)


def isinf(x: Array) -> Array:
    """True where x is +inf or -inf.

    >>> import numpy as np, tracegrad as tg
    >>> tg.isinf(np.array([1.0, -np.inf]))
    array([False,  True])
    """
    return equal(abs(x), np.inf)


def ceil(x: Array) -> Array:
    """The smallest integer >= x (zero gradient).

    >>> import numpy as np, tracegrad as tg
    >>> tg.ceil(np.array([-1.5, 1.5]))
    array([-1.,  2.])
    """
    return negative(floor(negative(x)))


def trunc(x: Array) -> Array:
    """x rounded toward zero (zero gradient).

    >>> import numpy as np, tracegrad as tg
    >>> tg.trunc(np.array([-1.5, 1.5]))
    array([-1.,  1.])
    """
    return where(less(x, 0), ceil(x), floor(x))


fix = trunc


def fmax(x: Array, y: Array) -> Array:
    """Elementwise maximum that ignores a nan on one side (NumPy's fmax).

    >>> import numpy as np, tracegrad as tg
    >>> tg.fmax(np.array([1.0, np.nan]), np.array([np.nan, 2.0]))
    array([1., 2.])
    """
    return where(isnan(y), x, where(isnan(x), y, maximum(x, y)))


def fmin(x: Array, y: Array) -> Array:
    """Elementwise minimum that ignores a nan on one side (NumPy's fmin).

    >>> import numpy as np, tracegrad as tg
    >>> tg.fmin(np.array([1.0, np.nan]), np.array([np.nan, 2.0]))
    array([1., 2.])
    """
    return where(isnan(y), x, where(isnan(x), y, minimum(x, y)))


def nan_to_num(
    x: Array,
    copy: bool = True,
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
) -> Array:
    """nan -> 0 and +-inf -> the largest finite values; the gradient passes where x is finite.

    >>> import numpy as np, tracegrad as tg
    >>> tg.nan_to_num(np.array([np.nan, 1.0]))
    array([0., 1.])
    """
    x = _wrap(x)
    if _dtype(x).kind != "f":
        return x
    info = np.finfo(_dtype(x))
    hi = float(info.max) if posinf is None else float(posinf)
    lo = float(info.min) if neginf is None else float(neginf)
    fill = where(
        isnan(x), full_like(x, float(nan)), where(greater(x, 0), full_like(x, hi), full_like(x, lo))
    )
    return where(isfinite(x), x, fill)


def angle(x: Array, deg: bool = False) -> Array:
    """The argument arctan2(imag, real) of complex numbers; for real numbers 0 for
    x >= 0, pi for x < 0 (zero gradient).

    >>> import numpy as np, tracegrad as tg
    >>> tg.angle(np.array([-2.0, 3.0]))
    array([3.14159265, 0.        ])
    >>> tg.angle(np.array([1j]))
    array([1.57079633])
    """
    x = _wrap(x)
    if _dtype(x).kind == "c":
        a = arctan2(imag(x), real(x))
        return multiply(a, 180.0 / _math.pi) if deg else a
    half_turn = 180.0 if deg else _math.pi
    return where(
        less(x, 0),
        full_like(x, half_turn, "float64" if _dtype(x).kind != "f" else None),
        zeros_like(x, "float64" if _dtype(x).kind != "f" else None),
    )


def real_if_close(x: Array, tol: float = 100) -> Array:
    """x itself (tracegrad arrays are real).

    >>> import numpy as np, tracegrad as tg
    >>> tg.real_if_close(np.array([1.0]))
    array([1.])
    """
    return real(x)


def rot90(x: Array, k: int = 1, axes: tuple = (0, 1)) -> Array:
    """Rotate by 90 degrees k times in the plane of `axes` (NumPy's rot90).

    >>> import numpy as np, tracegrad as tg
    >>> tg.rot90(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[2., 4.],
           [1., 3.]])
    """
    x = _wrap(x)
    k = int(k) % 4
    a, b = axes
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a), b)
    if k == 1:
        return swapaxes(flip(x, b), a, b)
    return flip(swapaxes(x, a, b), b)


def rollaxis(x: Array, axis: int, start: int = 0) -> Array:
    """Roll `axis` back until it lies before position `start` (NumPy's rollaxis).

    >>> import numpy as np, tracegrad as tg
    >>> tg.rollaxis(np.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    x = _wrap(x)
    nd = np.ndim(x)
    axis = _norm_axis(axis, nd, "rollaxis")
    start = start + nd if start < 0 else start
    order = [d for d in range(nd) if d != axis]
    order.insert(start - 1 if axis < start else start, axis)
    return transpose(x, tuple(order))


def linspace(
    start: Array,
    stop: Array,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Array:
    """`num` evenly spaced values from start to stop; start and stop may be traced scalars.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linspace(0.0, 1.0, 3)
    array([0. , 0.5, 1. ])
    """
    if not (_contains_traced(start) or _contains_traced(stop)):
        return np.linspace(
            start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dtype, axis=axis
        )
    if np.ndim(start) or np.ndim(stop) or axis != 0:
        raise NotImplementedError(
            "tracegrad.linspace: traced start/stop must be scalars "
            "(axis=0)" + user_location_suffix()
        )
    num = int(num)
    div_ = (num - 1) if endpoint else num
    frac = np.arange(num, dtype=np.float64) / div_ if div_ > 0 else np.zeros(num)
    step = divide(subtract(stop, start), div_) if div_ > 0 else np.nan
    out = add(multiply(subtract(1.0, frac), start), multiply(frac, stop))
    if dtype is not None:
        out = astype(out, dtype)
    return (out, step) if retstep else out


def full(shape, fill_value: Array, dtype: Any = None) -> Array:
    """An array of `shape` filled with `fill_value` (which may be traced).

    >>> import numpy as np, tracegrad as tg
    >>> tg.full((2,), 3.0)
    array([3., 3.])
    """
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if not _contains_traced(fill_value):
        return np.full(shape, fill_value, dtype=dtype)
    out = broadcast_to(fill_value, shape)
    out = multiply(out, 1) if _shape(out) == _shape(fill_value) else out
    return astype(out, dtype) if dtype is not None else out


__all__ += [
    "arcsinh",
    "arccosh",
    "arctanh",
    "isnan",
    "isinf",
    "ceil",
    "trunc",
    "fix",
    "fmax",
    "fmin",
    "nan_to_num",
    "angle",
    "real_if_close",
    "rot90",
    "rollaxis",
    "linspace",
    "full",
]

# ------------------------------------------- rounding, nan-aware and order statistics


def floor_divide(x: Array, y: Array) -> Array:
    """x // y as NumPy computes it: (x - remainder(x, y)) / y, rounded (so 1 // 0.1 is 9,
    not floor(10.0)); integer operands give integers (exact below 2**53). Zero gradient.

    >>> import numpy as np, tracegrad as tg
    >>> tg.floor_divide(np.array([1.0, -7.0]), np.array([0.1, 2.0]))
    array([ 9., -4.])
    """
    x, y = (_wrap(v) for v in _weak_operands(x, y))
    ints = builtins.all(_dtype(v).kind in "biu" for v in (x, y) if not isinstance(v, (int, bool)))
    if ints:
        xf = astype(x, "float64") if not isinstance(x, int) else float(x)
        yf = astype(y, "float64") if not isinstance(y, int) else float(y)
        q = floor(divide(xf, where(equal(yf, 0), 1.0, yf)))
        out_dtype = np.result_type(
            *[v if isinstance(v, (int, bool)) else _dtype(v) for v in (x, y)]
        )
        return astype(where(equal(yf, 0), 0.0, q), out_dtype.name)  # NumPy: x // 0 is 0 for ints
    q = divide(subtract(x, remainder(x, y)), y)
    rounded = floor(add(q, 0.5))
    return where(equal(y, 0), divide(x, y), rounded)


def _round_half_even(x):
    f = floor(x)
    d = subtract(x, f)  # exact: no x + 0.5 rounding (0.49999999999999994 stays below 1/2)
    up = logical_or(greater(d, 0.5), logical_and(equal(d, 0.5), not_equal(remainder(f, 2.0), 0)))
    r = add(f, astype(up, _dtype(f).name))
    r = where(equal(r, 0), multiply(x, 0.0), r)  # -0.5 rounds to -0.0, as in NumPy
    return where(less(abs(x), 2.0**52), r, x)  # larger floats are integers already


def round(x: Array, decimals: int = 0, out: Any = None) -> Array:
    """Round half to even to `decimals` places, as NumPy (zero gradient).

    >>> import numpy as np, tracegrad as tg
    >>> tg.round(np.array([0.5, 1.5, 2.5, -0.5]))
    array([ 0.,  2.,  2., -0.])
    """
    _no_dtype_out("round", None, out)
    x = _wrap(x)
    if _dtype(x).kind in "biu" and decimals >= 0:
        return x
    if decimals == 0:
        return _round_half_even(x)
    scale = 10.0 ** int(decimals)
    if decimals > 0:
        return divide(_round_half_even(multiply(x, scale)), scale)
    return multiply(_round_half_even(divide(x, 1.0 / scale)), 1.0 / scale)


around = round


def rint(x: Array) -> Array:
    """Round to the nearest integer, halves to even.

    >>> import numpy as np, tracegrad as tg
    >>> tg.rint(np.array([0.5, 1.5]))
    array([0., 2.])
    """
    return round(x)


def cbrt(x: Array) -> Array:
    """Cube root, real for negative x; the gradient at 0 is +inf (as in JAX).

    >>> import numpy as np, tracegrad as tg
    >>> tg.cbrt(np.array([-8.0, 8.0]))
    array([-2.,  2.])
    """
    return _odd(x, lambda a: power(a, 1.0 / 3.0))


def heaviside(x: Array, h0: Array) -> Array:
    """0 for x < 0, h0 at 0, 1 for x > 0 (zero gradient in x).

    >>> import numpy as np, tracegrad as tg
    >>> tg.heaviside(np.array([-1.0, 0.0, 2.0]), 0.5)
    array([0. , 0.5, 1. ])
    """
    one = ones_like(x)
    return where(less(x, 0), zeros_like(x), where(greater(x, 0), one, multiply(h0, one)))


def any(x: Array, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """True where any element along `axis` is nonzero.

    >>> import numpy as np, tracegrad as tg
    >>> tg.any(np.array([0.0, 2.0]))
    array(True)
    """
    _no_dtype_out("any", None, out)
    return greater(sum(astype(not_equal(_wrap(x), 0), "int64"), axis=axis, keepdims=keepdims), 0)


def all(x: Array, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """True where every element along `axis` is nonzero.

    >>> import numpy as np, tracegrad as tg
    >>> tg.all(np.array([0.0, 2.0]))
    array(False)
    """
    _no_dtype_out("all", None, out)
    return equal(sum(astype(equal(_wrap(x), 0), "int64"), axis=axis, keepdims=keepdims), 0)


def ptp(x: Array, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """max - min along `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.ptp(np.array([3.0, -1.0, 2.0]))
    array(4.)
    """
    _no_dtype_out("ptp", None, out)
    x = _wrap(x)
    return subtract(max(x, axis=axis, keepdims=keepdims), min(x, axis=axis, keepdims=keepdims))


def average(
    x: Array,
    axis: Any = None,
    weights: Array | None = None,
    returned: bool = False,
    keepdims: bool = False,
) -> Array:
    """Mean, or sum(x * w) / sum(w) along `axis` (weights broadcast against x).

    >>> import numpy as np, tracegrad as tg
    >>> tg.average(np.array([1.0, 3.0]), weights=np.array([3.0, 1.0]))
    array(1.5)
    """
    x = _wrap(x)
    if weights is None:
        out, total = mean(x, axis=axis, keepdims=keepdims), None
        if returned:
            count = _reduced_size(x, axis)
            total = full_like(out, count)
    else:
        w = _wrap(weights)
        if np.ndim(w) == 1 and np.ndim(x) > 1 and axis is not None and np.ndim(axis) == 0:
            shape = [1] * np.ndim(x)
            shape[_norm_axis(axis, np.ndim(x), "average")] = _shape(w)[0]
            w = reshape(w, tuple(shape))
        total = sum(multiply(ones_like(x), w), axis=axis, keepdims=keepdims)
        out = divide(sum(multiply(x, w), axis=axis, keepdims=keepdims), total)
    return (out, total) if returned else out


def _reduced_size(x, axis) -> int:
    axes = normalize_axes("reduce", T.aval_of(x), _axis(axis))
    return int(np.prod([_shape(x)[a] for a in axes], dtype=np.int64))


def nansum(
    x: Array, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Array:
    """Sum, treating nan as 0 (the gradient is 0 at nan entries).

    >>> import numpy as np, tracegrad as tg
    >>> tg.nansum(np.array([1.0, np.nan, 2.0]))
    array(3.)
    """
    _no_dtype_out("nansum", dtype, out)
    x = _wrap(x)
    return sum(where(isnan(x), zeros_like(x), x), axis=axis, keepdims=keepdims)


def nanmean(
    x: Array, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Array:
    """Mean of the non-nan entries.

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanmean(np.array([1.0, np.nan, 2.0]))
    array(1.5)
    """
    _no_dtype_out("nanmean", dtype, out)
    x = _wrap(x)
    count = sum(astype(logical_not(isnan(x)), _dtype(x).name), axis=axis, keepdims=keepdims)
    return divide(nansum(x, axis=axis, keepdims=keepdims), count)


def _nan_filled(x, value):
    x = _wrap(x)
    return where(isnan(x), full_like(x, value), x)


def nanmax(x: Array, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """max ignoring nans (nan where a whole slice is nan; NumPy also warns).

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanmax(np.array([1.0, np.nan, 2.0]))
    array(2.)
    """
    _no_dtype_out("nanmax", None, out)
    x = _wrap(x)
    res = max(_nan_filled(x, -np.inf), axis=axis, keepdims=keepdims)
    return where(all(isnan(x), axis=axis, keepdims=keepdims), np.nan, res)


def nanmin(x: Array, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """min ignoring nans (nan where a whole slice is nan; NumPy also warns).

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanmin(np.array([1.0, np.nan, 2.0]))
    array(1.)
    """
    _no_dtype_out("nanmin", None, out)
    x = _wrap(x)
    res = min(_nan_filled(x, np.inf), axis=axis, keepdims=keepdims)
    return where(all(isnan(x), axis=axis, keepdims=keepdims), np.nan, res)


def nanprod(
    x: Array, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Array:
    """Product treating nan as 1.

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanprod(np.array([2.0, np.nan, 3.0]))
    array(6.)
    """
    _no_dtype_out("nanprod", dtype, out)
    return prod(_nan_filled(x, 1.0), axis=axis, keepdims=keepdims)


def nanvar(
    x: Array,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Array:
    """Variance of the non-nan entries (dividing by their count - ddof).

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanvar(np.array([1.0, np.nan, 3.0]))
    array(1.)
    """
    _no_dtype_out("nanvar", dtype, out)
    x = _wrap(x)
    valid = astype(logical_not(isnan(x)), _dtype(x).name)
    count = sum(valid, axis=axis, keepdims=True)
    centered = multiply(
        subtract(_nan_filled(x, 0.0), divide(nansum(x, axis=axis, keepdims=True), count)), valid
    )
    total = sum(multiply(centered, centered), axis=axis, keepdims=keepdims)
    dof = subtract(sum(valid, axis=axis, keepdims=keepdims), float(ddof))
    return divide(total, dof)


def nanstd(
    x: Array,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Array:
    """Standard deviation of the non-nan entries.

    >>> import numpy as np, tracegrad as tg
    >>> tg.nanstd(np.array([1.0, np.nan, 3.0]))
    array(1.)
    """
    return sqrt(nanvar(x, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims))


def nancumsum(x: Array, axis: int | None = None, dtype: Any = None, out: Any = None) -> Array:
    """Running sum treating nan as 0.

    >>> import numpy as np, tracegrad as tg
    >>> tg.nancumsum(np.array([1.0, np.nan, 2.0]))
    array([1., 1., 3.])
    """
    return cumsum(_nan_filled(x, 0.0), axis=axis, dtype=dtype, out=out)


def quantile(
    x: Array,
    q,
    axis: int | None = None,
    out: Any = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Array:
    """The q-th quantile (static q in [0, 1], a scalar or a list) by sorting, with NumPy's
    default linear interpolation; the gradient goes to the one or two order statistics used.

    >>> import numpy as np, tracegrad as tg
    >>> tg.quantile(np.array([1.0, 2.0, 3.0, 4.0]), 0.5)
    array(2.5)
    """
    _no_dtype_out("quantile", None, out)
    if method != "linear":
        raise NotImplementedError(
            "tracegrad.quantile: only method='linear' is supported" + user_location_suffix()
        )
    x = _wrap(x)
    if axis is None:
        kept_nd = np.ndim(x)
        x, ax = ravel(x), 0
    else:
        kept_nd = None
        ax = _norm_axis(axis, np.ndim(x), "quantile")
    n = _shape(x)[ax]
    qs = np.asarray(q, dtype=np.float64)
    if qs.size and (qs.min() < 0 or qs.max() > 1):
        raise ValueError("quantile: quantiles must be in the range [0, 1]" + user_location_suffix())
    s = moveaxis(sort(x, axis=ax), ax, -1)
    pos = qs.ravel() * (n - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = pos - lo
    # NumPy's result dtype: float32 data with a Python-float q stays float32, an array q
    # (or list) promotes
    weak_q = isinstance(q, (int, float))
    target = np.result_type(_dtype(x), q if weak_q else qs.dtype)
    frac = frac.astype(target)
    if _dtype(x) != target:
        x = astype(x, target.name)
    vlo, vhi = getitem(s, (Ellipsis, lo)), getitem(s, (Ellipsis, hi))
    vals = add(vlo, multiply(subtract(vhi, vlo), frac))  # (..., len(q))
    vals = moveaxis(vals, -1, 0)
    if keepdims:
        base = (
            (1,) * kept_nd
            if kept_nd is not None
            else tuple(1 if d == ax else m for d, m in enumerate(_shape(x)))
        )
        vals = reshape(vals, (pos.size,) + base)
    return reshape(vals, qs.shape + _shape(vals)[1:])


def percentile(
    x: Array,
    q,
    axis: int | None = None,
    out: Any = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Array:
    """quantile(x, q / 100).

    >>> import numpy as np, tracegrad as tg
    >>> tg.percentile(np.array([1.0, 2.0, 3.0]), 50)
    array(2.)
    """
    q = q / 100.0 if isinstance(q, (int, float)) else np.asarray(q, dtype=np.float64) / 100.0
    return quantile(x, q, axis=axis, out=out, method=method, keepdims=keepdims)


def median(
    x: Array,
    axis: int | None = None,
    out: Any = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Array:
    """The middle value (mean of the two middle values for even counts) along `axis`.

    >>> import numpy as np, tracegrad as tg
    >>> tg.median(np.array([3.0, 1.0, 2.0, 10.0]))
    array(2.5)
    """
    return quantile(x, 0.5, axis=axis, out=out, keepdims=keepdims)


_PAD_MODES = (
    "constant",
    "edge",
    "wrap",
    "reflect",
    "symmetric",
    "maximum",
    "minimum",
    "mean",
    "median",
    "linear_ramp",
    "empty",
)


def pad(
    x: Array,
    pad_width,
    mode: str = "constant",
    constant_values: float = 0,
    reflect_type: str = "even",
    stat_length=None,
    end_values=0.0,
) -> Array:
    """NumPy's pad, every mode but a callable (reflect_type 'even', one scalar
    constant_values). 'constant' is one index_add_zeros node (its gradient is the
    inner slice); 'edge', 'wrap', 'reflect' and 'symmetric' gather each padded axis
    with a static index array (the gradient scatter-adds the border back); the
    statistic modes and 'linear_ramp' concatenate blocks computed from the array,
    axis by axis as NumPy does; 'empty' (values undefined in NumPy) pads zeros.

    >>> import numpy as np, tracegrad as tg
    >>> tg.pad(np.array([1.0, 2.0]), 1)
    array([0., 1., 2., 0.])
    >>> tg.pad(np.array([1.0, 2.0, 3.0]), (2, 1), mode="reflect")
    array([3., 2., 1., 2., 3., 2.])
    >>> tg.pad(np.array([1.0, 5.0]), (2, 1), mode="linear_ramp", end_values=(3.0, 0.0))
    array([3., 2., 1., 5., 0.])
    """
    if (
        mode not in _PAD_MODES
        or reflect_type != "even"
        or (mode == "constant" and np.ndim(constant_values) != 0)
    ):
        raise NotImplementedError(
            f"tracegrad.pad: mode={mode!r} (reflect_type={reflect_type!r}) is not supported; "
            f"modes: {', '.join(_PAD_MODES)} (reflect_type='even', one scalar constant_values)"
            + user_location_suffix()
        )
    x = _wrap(x)
    widths = _per_axis_pairs(pad_width, np.ndim(x), "pad_width", np.int64)
    if (widths < 0).any():
        raise ValueError(
            f"tracegrad.pad: negative pad_width {np.asarray(pad_width).tolist()}"
            + user_location_suffix()
        )
    if mode in ("edge", "wrap", "reflect", "symmetric"):
        for axis, (d, (a, b)) in enumerate(zip(_shape(x), widths, strict=True)):
            if a or b:
                index = (slice(None),) * axis + (_pad_source_index(mode, d, int(a), int(b)),)
                x = getitem(x, index)
        return x
    if mode in ("maximum", "minimum", "mean", "median"):
        lengths = (
            None
            if stat_length is None
            else _per_axis_pairs(stat_length, np.ndim(x), "stat_length", np.int64)
        )
        return _pad_by_statistic(x, widths, mode, lengths)
    if mode == "linear_ramp":
        ends = _per_axis_pairs(end_values, np.ndim(x), "end_values", np.float64)
        return _pad_linear_ramp(x, widths, ends)
    shape = tuple(int(d + a + b) for d, (a, b) in zip(_shape(x), widths, strict=True))
    spec = tuple(
        ("slice", int(a), int(a) + d, 1) for d, (a, _) in zip(_shape(x), widths, strict=True)
    )
    out = bind(T.index_add_zeros, x, spec=spec, shape=shape)
    if mode == "constant" and constant_values != 0:
        border = np.full(shape, float(constant_values))
        border[
            tuple(slice(int(a), int(a) + d) for d, (a, _) in zip(_shape(x), widths, strict=True))
        ] = 0
        out = add(out, border.astype(_dtype(x)) if _dtype(x).kind == "f" else border)
    return out


def _per_axis_pairs(value, ndim: int, name: str, dtype) -> np.ndarray:
    """NumPy's per-axis (before, after) pairs from a scalar, a pair or one per axis."""
    try:
        pairs = np.asarray(value, dtype=dtype)
        return np.broadcast_to(
            pairs.reshape(-1, 2) if pairs.ndim else np.full((1, 2), pairs), (ndim, 2)
        )
    except ValueError:
        raise ValueError(
            f"tracegrad.pad: {name}={value!r} is not a scalar, a (before, after) "
            f"pair or one pair per axis ({ndim} axes)" + user_location_suffix()
        ) from None


def _axis_block(x, axis: int, start: int, stop: int):
    return getitem(x, (slice(None),) * axis + (slice(start, stop),))


def _pad_by_statistic(x, widths: np.ndarray, mode: str, lengths) -> Array:
    """Blocks filled with the max/min/mean/median of the first (last) `lengths`
    elements of each axis (all of it by default), the axes padded in order."""
    stat = {"maximum": max, "minimum": min, "mean": mean, "median": median}[mode]
    for axis, (a, b) in enumerate(widths):
        if not (a or b):
            continue
        d = _shape(x)[axis]
        if d == 0:
            raise ValueError(
                f"tracegrad.pad: can't extend an empty axis with mode={mode!r}"
                + user_location_suffix()
            )
        parts = []
        for width, side in ((int(a), 0), (int(b), 1)):
            if not width:
                continue
            n = d if lengths is None else builtins.max(1, builtins.min(int(lengths[axis][side]), d))
            region = _axis_block(x, axis, 0, n) if side == 0 else _axis_block(x, axis, d - n, d)
            value = stat(region, axis=axis, keepdims=True)
            if _dtype(x).kind in "iu" and mode in ("mean", "median"):
                value = astype(round(value), _dtype(x))  # NumPy rounds, then casts
            shape = list(_shape(x))
            shape[axis] = width
            parts.append((side, broadcast_to(value, tuple(shape))))
        x = concatenate(
            [p for s_, p in parts if s_ == 0] + [x] + [p for s_, p in parts if s_ == 1], axis=axis
        )
    return x


def _pad_linear_ramp(x, widths: np.ndarray, ends: np.ndarray) -> Array:
    """NumPy's linear_ramp: from each end value to the edge, axis by axis."""
    for axis, (a, b) in enumerate(widths):
        a, b = int(a), int(b)
        if not (a or b):
            continue
        d = _shape(x)[axis]
        if d == 0:
            raise ValueError(
                "tracegrad.pad: can't extend an empty axis with mode='linear_ramp'"
                + user_location_suffix()
            )
        along = [1] * np.ndim(x)
        parts = []
        if a:
            along[axis] = a
            edge, end = _axis_block(x, axis, 0, 1), float(ends[axis][0])
            ramp = (np.arange(a) / a).reshape(along)  # end ... just before the edge
            parts.append(add(end, multiply(subtract(edge, end), ramp)))
        parts.append(x)
        if b:
            along[axis] = b
            edge, end = _axis_block(x, axis, d - 1, d), float(ends[axis][1])
            ramp = ((np.arange(b) + 1) / b).reshape(along)  # just after the edge ... end
            parts.append(add(edge, multiply(subtract(end, edge), ramp)))
        if _dtype(x).kind in "iu":  # NumPy's integer linspace rounds towards -inf
            parts = [p if p is x else astype(floor(p), _dtype(x)) for p in parts]
        elif _dtype(x) != np.float64:
            parts = [p if p is x else astype(p, _dtype(x)) for p in parts]
        x = concatenate(parts, axis=axis)
    return x


def _pad_source_index(mode: str, size: int, before: int, after: int) -> np.ndarray:
    """For each position of an axis padded by (before, after): the input element it
    copies, by NumPy's rule for `mode` (a static index array)."""
    if size == 0:
        raise ValueError(
            f"tracegrad.pad: can't extend an empty axis with mode={mode!r}" + user_location_suffix()
        )
    k = np.arange(-before, size + after)
    if mode == "edge":
        return np.clip(k, 0, size - 1)
    if mode == "wrap":
        return np.mod(k, size)
    if mode == "symmetric":  # ... 1 0 | 0 1 2 | 2 1 ...: period 2 size
        m = np.mod(k, 2 * size)
        return np.where(m < size, m, 2 * size - 1 - m)
    if size == 1:  # reflect: ... 2 1 | 0 1 2 | 1 0 ...: period 2 (size - 1)
        return np.zeros_like(k)
    m = np.mod(k, 2 * (size - 1))
    return np.where(m < size, m, 2 * (size - 1) - m)


def append(arr: Array, values: Array, axis: int | None = None) -> Array:
    """NumPy's append: `values` joined after `arr` along `axis` (both flattened first
    when `axis` is None), by concatenate.

    >>> import numpy as np, tracegrad as tg
    >>> tg.append(np.array([[1.0, 2.0]]), np.array([3.0]))
    array([1., 2., 3.])
    """
    if axis is None:
        return concatenate([ravel(_wrap(arr)), ravel(_wrap(values))])
    return concatenate([_wrap(arr), _wrap(values)], axis=axis)


def meshgrid(*xs, indexing: str = "xy", sparse: bool = False, copy: bool = True) -> list:
    """Coordinate arrays from 1-D coordinate vectors (NumPy's meshgrid).

    >>> import numpy as np, tracegrad as tg
    >>> [g.shape for g in tg.meshgrid(np.ones(2), np.ones(3))]
    [(3, 2), (3, 2)]
    """
    xs = [ravel(_wrap(v)) for v in xs]
    n = len(xs)
    shape = [_shape(v)[0] for v in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, v in enumerate(xs):
        pos = i
        if indexing == "xy" and n > 1 and i < 2:
            pos = 1 - i
        s = [1] * n
        s[pos] = _shape(v)[0]
        g = reshape(v, tuple(s))
        out.append(g if sparse else broadcast_to(g, tuple(shape)))
    return out


__all__ += [
    "floor_divide",
    "round",
    "around",
    "rint",
    "cbrt",
    "heaviside",
    "any",
    "all",
    "ptp",
    "average",
    "nansum",
    "nanmean",
    "quantile",
    "percentile",
    "median",
    "pad",
    "append",
    "meshgrid",
    "nanmax",
    "nanmin",
    "nanprod",
    "nanvar",
    "nanstd",
    "nancumsum",
]
