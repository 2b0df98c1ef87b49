"""PyTorch-style dtype objects (`torch.float32` ...) over NumPy dtypes."""

from __future__ import annotations

from typing import Any

import numpy as np


class dtype:
    """A dtype whose repr is PyTorch's (`torch.float32`); `.np` is the NumPy dtype.

    >>> import tracegrad.eager as torch
    >>> torch.float32, torch.float32.is_floating_point
    (torch.float32, True)
    """

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "itemsize", "_tensor_type")

    def __init__(self, name: str, np_dtype: Any, tensor_type: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = bool(np.issubdtype(self.np, np.floating))
        self.is_complex = self.np.kind == "c"
        self.itemsize = self.np.itemsize
        self._tensor_type = tensor_type

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return (from_numpy_dtype, (self.np,))


float32 = dtype("float32", np.float32, "FloatTensor")
float64 = dtype("float64", np.float64, "DoubleTensor")
float16 = dtype("float16", np.float16, "HalfTensor")
int64 = dtype("int64", np.int64, "LongTensor")
int32 = dtype("int32", np.int32, "IntTensor")
int16 = dtype("int16", np.int16, "ShortTensor")
int8 = dtype("int8", np.int8, "CharTensor")
uint8 = dtype("uint8", np.uint8, "ByteTensor")
bool_ = dtype("bool", np.bool_, "BoolTensor")
complex64 = dtype("complex64", np.complex64, "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, "ComplexDoubleTensor")
cfloat = complex64
cdouble = complex128
float = float32
double = float64
half = float16
long = int64
int = int32

_BY_NUMPY = {
    d.np: d
    for d in (
        float32,
        float64,
        float16,
        int64,
        int32,
        int16,
        int8,
        uint8,
        bool_,
        complex64,
        complex128,
    )
}


def from_numpy_dtype(np_dtype: Any) -> dtype:
    """The PyTorch-style dtype object for a NumPy dtype."""
    np_dtype = np.dtype(np_dtype)
    try:
        return _BY_NUMPY[np_dtype]
    except KeyError:
        raise TypeError(f"tracegrad.eager has no dtype for numpy {np_dtype}") from None


def to_numpy_dtype(d: Any) -> np.dtype:
    """Accept `torch.float32`-style objects, NumPy dtypes, type objects and strings."""
    if isinstance(d, dtype):
        return d.np
    if d is builtins_float:
        return np.dtype(np.float32)
    if d is builtins_int:
        return np.dtype(np.int64)
    if d is builtins_bool:
        return np.dtype(np.bool_)
    return np.dtype(d)


import builtins as _b  # noqa: E402

builtins_float, builtins_int, builtins_bool = _b.float, _b.int, _b.bool


# ------------------------------------------------------------ type promotion
# PyTorch's rules (c10/core/ScalarType.h promoteTypes and ATen's ResultTypeState):
# operands fall in three priority classes -- tensors with dimensions, 0-d tensors,
# Python scalars ("wrapped numbers") -- each promoted within itself; a lower class
# only counts when its category (bool < integer < floating) is higher than that of
# every higher class. A Python float is the default dtype (float32), int int64.

_NP_F32 = np.dtype(np.float32)
_NP_I64 = np.dtype(np.int64)
# torch.set_default_dtype: the dtype of Python floats and of float factories
_DEFAULT_FLOAT = [_NP_F32]


def default_float() -> np.dtype:
    """The NumPy dtype of torch.get_default_dtype() (float32 unless set)."""
    return _DEFAULT_FLOAT[0]


def default_complex() -> np.dtype:
    """The dtype Python complex numbers make: complex64 (complex128 when the default
    dtype is float64), as PyTorch's default complex dtype."""
    return np.dtype(np.complex128 if _DEFAULT_FLOAT[0] == np.float64 else np.complex64)


def complex_of(d: np.dtype) -> np.dtype:
    """The complex dtype with `d`'s precision (float64 -> complex128; others complex64)."""
    if d.kind == "c":
        return d
    return np.dtype(np.complex128 if d == np.float64 else np.complex64)


def get_default_dtype() -> dtype:
    """The dtype Python floats and float factories (zeros, rand, ...) make."""
    return _BY_NUMPY[_DEFAULT_FLOAT[0]]


def set_default_dtype(d) -> None:
    """torch.set_default_dtype: float32, float64 or float16.

    >>> import tracegrad.eager as torch
    >>> torch.set_default_dtype(torch.float64); torch.tensor([1.5]).dtype, torch.zeros(1).dtype
    (torch.float64, torch.float64)
    >>> torch.set_default_dtype(torch.float32)
    """
    npd = to_numpy_dtype(d)
    if npd.kind != "f" or npd not in _BY_NUMPY:
        raise TypeError("only floating-point types are supported as the default type")
    _DEFAULT_FLOAT[0] = npd


_NP_BOOL = np.dtype(np.bool_)


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types on NumPy dtypes: any float beats any integer (int64 and
    float16 give float16, where NumPy says float64); bool loses to everything."""
    if a is b or a == b:
        return a
    ka, kb = a.kind, b.kind
    if ka == "b":
        return b
    if kb == "b":
        return a
    if ka == "c" or kb == "c":  # complex beats all; float64 widens complex64
        c, other = (a, b) if ka == "c" else (b, a)
        return np.promote_types(c, other) if other.kind in "fc" else c
    if ka == "f" and kb != "f":
        return a
    if kb == "f" and ka != "f":
        return b
    return np.promote_types(a, b)


def _category(d: np.dtype) -> int:
    k = d.kind
    return 0 if k == "b" else (2 if k == "f" else (3 if k == "c" else 1))


def _combine(higher, lower):
    """ATen's combine_categories."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _category(higher) >= _category(lower):
        if higher.kind != "b" or lower.kind == "b":
            return higher
    if higher.kind == "f" and lower.kind == "c":  # ATen keeps the float's precision
        return complex_of(higher)
    return promote_types(higher, lower)


def result_type(operands) -> np.dtype | None:
    """torch.result_type over NumPy arrays (tensor data) and Python scalars; None
    if there is no operand."""
    dim = zero = wrapped = None
    for a in operands:
        if type(a) is np.ndarray:
            d = a.dtype
            if a.ndim:
                dim = d if dim is None else promote_types(dim, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
            continue
        if isinstance(a, builtins_bool) or type(a) is np.bool_:
            d = _NP_BOOL
        elif isinstance(a, builtins_int):
            d = _NP_I64
        elif isinstance(a, builtins_float):
            d = _DEFAULT_FLOAT[0]  # the default dtype (np.float64 is a float too)
        elif isinstance(a, complex):
            d = default_complex()
        elif isinstance(a, np.generic):
            d = a.dtype
            zero = d if zero is None else promote_types(zero, d)
            continue
        else:
            continue
        wrapped = d if wrapped is None else promote_types(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))
