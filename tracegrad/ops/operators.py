"""Python operators for any value kind that holds an array (eager Tensor, Tracer).

`ArrayOperators` maps `+ - * / ** @`, their reflected forms, unary minus,
`abs()`, comparisons and `x[...]` onto the primitives through `bind`, so every
class that inherits it dispatches the same way. It defines neither `__array__`
nor `__bool__`: each class decides what converting to NumPy or to a Python
bool means (eager: the value; tracer: an error).

`ArrayMethods` adds NumPy-style methods (`x.sum(axis=1)`, `x.T`, ...), for the
tracer; the eager Tensor keeps PyTorch's spelling (`dim`, `keepdim`) instead.
"""

from __future__ import annotations

from tracegrad.ops import api
from tracegrad.ops import table as T
from tracegrad.ops.core import bind
from tracegrad.ops.indexing import getitem


class ArrayOperators:
    __slots__ = ()
    # Defining __eq__ would otherwise make instances unhashable; keep identity hashing.
    __hash__ = object.__hash__

    def __add__(self, other):
        return bind(T.add, self, other)

    def __radd__(self, other):
        return bind(T.add, other, self)

    def __sub__(self, other):
        return bind(T.sub, self, other)

    def __rsub__(self, other):
        return bind(T.sub, other, self)

    def __mul__(self, other):
        return bind(T.mul, self, other)

    def __rmul__(self, other):
        return bind(T.mul, other, self)

    def __truediv__(self, other):
        return bind(T.div, self, other)

    def __rtruediv__(self, other):
        return bind(T.div, other, self)

    def __pow__(self, other):
        return bind(T.pow_, self, other)

    def __rpow__(self, other):
        return bind(T.pow_, other, self)

    def __mod__(self, other):
        return bind(T.remainder, self, other)

    def __rmod__(self, other):
        return bind(T.remainder, other, self)

    def __floordiv__(self, other):
        return api.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return api.floor_divide(other, self)

    def __matmul__(self, other):
        return bind(T.matmul, self, other)

    def __rmatmul__(self, other):
        return bind(T.matmul, other, self)

    def __neg__(self):
        return bind(T.neg, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return bind(T.abs_, self)

    def __lt__(self, other):
        return bind(T.lt, self, other)

    def __le__(self, other):
        return bind(T.le, self, other)

    def __gt__(self, other):
        return bind(T.gt, self, other)

    def __ge__(self, other):
        return bind(T.ge, self, other)

    def __eq__(self, other):  # type: ignore[override]
        return bind(T.eq, self, other)

    def __ne__(self, other):  # type: ignore[override]
        return bind(T.ne, self, other)

    def __invert__(self):
        return bind(T.logical_not, self)

    def __and__(self, other):
        return bind(T.logical_and, self, other)

    def __rand__(self, other):
        return bind(T.logical_and, other, self)

    def __or__(self, other):
        return bind(T.logical_or, self, other)

    def __ror__(self, other):
        return bind(T.logical_or, other, self)

    def __getitem__(self, index):
        return getitem(self, index)


class ArrayMethods:
    """NumPy's array methods, for value kinds that follow NumPy's spelling (the tracer)."""

    __slots__ = ()

    def sum(self, axis=None, keepdims=False):
        return api.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return api.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return api.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return api.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return api.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return api.argmin(self, axis=axis, keepdims=keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        return api.var(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def reshape(self, *shape):
        return api.reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return api.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    @property
    def T(self):
        return api.transpose(self)

    def astype(self, dtype):
        return api.astype(self, dtype)

    def clip(self, min=None, max=None):
        return api.clip(self, min, max)

    def squeeze(self, axis=None):
        return api.squeeze(self, axis)

    def dot(self, other):
        return api.dot(self, other)

    def swapaxes(self, axis1, axis2):
        axes = list(range(len(self.shape)))
        axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
        return api.transpose(self, tuple(axes))

    def flatten(self):
        return api.reshape(self, (-1,))

    # issue 13: more of ndarray's methods
    def prod(self, axis=None, keepdims=False):
        return api.prod(self, axis=axis, keepdims=keepdims)

    def std(self, axis=None, ddof=0, keepdims=False):
        return api.std(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def cumsum(self, axis=None):
        return api.cumsum(self, axis=axis)

    def cumprod(self, axis=None):
        return api.cumprod(self, axis=axis)

    def repeat(self, repeats, axis=None):
        return api.repeat(self, repeats, axis=axis)

    def trace(self, offset=0, axis1=0, axis2=1):
        return api.trace(self, offset, axis1, axis2)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return api.diagonal(self, offset, axis1, axis2)

    def any(self, axis=None, keepdims=False):
        return api.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return api.all(self, axis=axis, keepdims=keepdims)

    def round(self, decimals=0):
        return api.round(self, decimals)

    def ptp(self, axis=None, keepdims=False):
        return api.ptp(self, axis=axis, keepdims=keepdims)

    def argsort(self, axis=-1):
        return api.argsort(self, axis=axis)

    def conj(self):
        return api.conj(self)

    @property
    def real(self):
        return api.real(self)

    @property
    def imag(self):
        return api.imag(self)

    ravel = flatten
