"""More of NumPy's and the Array API's names, so `import tracegrad as np`-style code runs.

JAX's `jax.numpy` and HIPS autograd's `autograd.numpy` are whole NumPy namespaces;
code written for them calls `np.zeros`, `np.amax`, `np.concat`, `np.vecdot`... on
the same module it differentiates with. Here are:

- the Array API spellings of ops the table already has (`acos` is `arccos`,
  `concat` is `concatenate`, `permute_dims` is `transpose`, ...);
- a few compositions of table ops (`matrix_transpose`, `vecdot`, `matvec`,
  `isclose`, `trapezoid`, `polyval`, `select`, ...), differentiable where NumPy's are;
- NumPy's array constructors (`zeros`, `ones`, `eye`, `arange`, ...) and index
  helpers: they make constants, which a traced function may use freely.

    >>> import numpy as np, tracegrad as tg
    >>> float(tg.grad(lambda x: tg.vecdot(x, x))(np.array([1.0, 2.0]))[1])
    4.0
    >>> tg.grad(lambda x: tg.polyval([1.0, 0.0, -2.0], x))(3.0)  # d/dx (x^2 - 2) = 2x
    array(6.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# NumPy's constants, so `import tracegrad as np` programs (HIPS autograd's examples) find
# np.pi, np.inf, np.newaxis, ... (imported, not assigned: mypy from a cold cache misread
# a module-level `e = np.e` as a read of a deleted variable)
from numpy import e, euler_gamma, inf, nan, pi

from tracegrad.ops import api
from tracegrad.ops import table as _table

# Array API / jax.numpy spellings of table ops
absolute = api.abs
fabs = api.abs
acos, acosh, asin, asinh = api.arccos, api.arccosh, api.arcsin, api.arcsinh
atan, atan2, atanh = api.arctan, api.arctan2, api.arctanh
amax, amin = api.max, api.min
concat = api.concatenate
pow = api.power
true_divide = api.divide
permute_dims = api.transpose
cumulative_sum = api.cumsum
erf = _table.erf  # scipy.special's (jax.scipy.special.erf): GELU's exact form

# constants: NumPy's own constructors and index helpers
zeros, ones, empty, eye, identity = np.zeros, np.ones, np.empty, np.eye, np.identity
arange, tri, indices, geomspace, logspace = np.arange, np.tri, np.indices, np.geomspace, np.logspace
tril_indices, triu_indices, diag_indices = np.tril_indices, np.triu_indices, np.diag_indices
iscomplexobj, isscalar, result_type, promote_types, can_cast = (
    np.iscomplexobj,
    np.isscalar,
    np.result_type,
    np.promote_types,
    np.can_cast,
)


def shape(a: Any) -> tuple:
    """The shape of an array, tracer or eager tensor (static while tracing)."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def ndim(a: Any) -> int:
    """The number of axes of an array, tracer or eager tensor (NumPy's `ndim`)."""
    return len(shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements, or the length of `axis` (NumPy's `size`)."""
    s = shape(a)
    return int(np.prod(s, dtype=np.int64)) if axis is None else s[axis]


def positive(x):
    """+x, elementwise (NumPy's `positive`; a copy, gradient 1)."""
    return api.multiply(x, 1)


def matrix_transpose(x):
    """Swap the last two axes (the Array API's `matrix_transpose`)."""
    return api.swapaxes(x, -1, -2)


def vecdot(a, b, axis: int = -1):
    """sum(a * b) along `axis` (real inputs), broadcasting the others."""
    return api.sum(api.multiply(a, b), axis=axis)


def matvec(a, x):
    """a @ x for a stack of matrices a[..., m, n] and vectors x[..., n]."""
    return api.squeeze(api.matmul(a, api.expand_dims(x, -1)), axis=-1)


def vecmat(x, a):
    """x @ a for vectors x[..., m] and matrices a[..., m, n]."""
    return api.squeeze(api.matmul(api.expand_dims(x, -2), a), axis=-2)


def unstack(x, axis: int = 0) -> tuple:
    """The slices of `x` along `axis`, as a tuple (the Array API's `unstack`)."""
    moved = api.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(shape(moved)[0]))


def take(a, indices, axis: int | None = None):
    """NumPy's take: a[indices] along `axis` (the flattened array when None)."""
    if axis is None:
        return api.reshape(a, (-1,))[np.asarray(indices)]
    axis = axis % ndim(a)
    return a[(slice(None),) * axis + (np.asarray(indices),)]


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08):
    """|a - b| <= atol + rtol * |b|, elementwise: NumPy's formula, but an infinity is
    never close, even to itself (NumPy: isclose(inf, inf) is True)."""
    return api.less_equal(
        api.abs(api.subtract(a, b)), api.add(atol, api.multiply(rtol, api.abs(b)))
    )


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08) -> bool:
    """A Python bool: needs concrete values (not available while tracing)."""
    return bool(np.all(isclose(a, b, rtol=rtol, atol=atol)))


def logical_xor(a, b):
    """Exactly one of `a`, `b` is nonzero, elementwise (NumPy's `logical_xor`)."""
    return api.not_equal(api.not_equal(a, 0), api.not_equal(b, 0))


def count_nonzero(a, axis=None):
    """How many entries are nonzero, in all or along `axis` (int64; NumPy's)."""
    return api.sum(api.astype(api.not_equal(a, 0), np.int64), axis=axis)


def float_power(x, y):
    """x ** y computed in float64 (NumPy's `float_power`)."""
    return api.power(api.astype(x, np.float64), y)


def ldexp(x, i):
    """x * 2**i, keeping a float32 x in float32 (NumPy's `ldexp`)."""
    scale = api.power(2.0, i)
    if type(x) not in (int, float, bool) and api._dtype(x).kind == "f":
        scale = api.astype(scale, api._dtype(x))  # float32 x stays float32, as in NumPy
    return api.multiply(x, scale)


def select(condlist: Sequence, choicelist: Sequence, default: Any = 0):
    """The first choice whose condition holds, elementwise (NumPy's select)."""
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    out = default
    for cond, choice in zip(reversed(list(condlist)), reversed(list(choicelist)), strict=True):
        out = api.where(cond, choice, out)
    return out


def trapezoid(y, x=None, dx: float = 1.0, axis: int = -1):
    """The trapezoidal rule along `axis` (NumPy's trapezoid)."""
    y = api.moveaxis(y, axis, -1)
    mid = api.multiply(api.add(y[..., 1:], y[..., :-1]), 0.5)
    if x is None:
        return api.multiply(api.sum(mid, axis=-1), dx)
    x = api.moveaxis(x, axis, -1) if ndim(x) > 1 else x
    return api.sum(api.multiply(mid, api.subtract(x[..., 1:], x[..., :-1])), axis=-1)


def polyval(p, x):
    """p[0] * x**(n-1) + ... + p[n-1], by Horner's rule (NumPy's polyval)."""
    coefficients = list(p) if not hasattr(p, "shape") else [p[i] for i in range(shape(p)[0])]
    out = api.multiply(x, 0.0)
    for c in coefficients:
        out = api.add(api.multiply(out, x), c)
    return out


# (NumPy's constants pi, e, inf, nan and euler_gamma are imported at the top), and
newaxis = None
# NumPy's dtypes and their queries (`jnp.float32`, `np.finfo(...)` in programs that import
# tracegrad under those names)
float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
bool_, complex64, complex128 = np.bool_, np.complex64, np.complex128
dtype, finfo, iinfo = np.dtype, np.finfo, np.iinfo

__all__ = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool_",
    "complex64",
    "complex128",
    "dtype",
    "finfo",
    "iinfo",
    "pi",
    "e",
    "inf",
    "nan",
    "newaxis",
    "euler_gamma",
    "absolute",
    "fabs",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "amax",
    "amin",
    "concat",
    "pow",
    "true_divide",
    "permute_dims",
    "cumulative_sum",
    "erf",
    "zeros",
    "ones",
    "empty",
    "eye",
    "identity",
    "arange",
    "tri",
    "indices",
    "geomspace",
    "logspace",
    "tril_indices",
    "triu_indices",
    "diag_indices",
    "iscomplexobj",
    "isscalar",
    "result_type",
    "promote_types",
    "can_cast",
    "shape",
    "ndim",
    "size",
    "positive",
    "matrix_transpose",
    "vecdot",
    "matvec",
    "vecmat",
    "unstack",
    "take",
    "isclose",
    "allclose",
    "logical_xor",
    "count_nonzero",
    "float_power",
    "ldexp",
    "select",
    "trapezoid",
    "polyval",
]
