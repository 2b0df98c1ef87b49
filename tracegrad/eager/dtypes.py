"""PyTorch-style dtype objects (`torch.float32` ...) over NumPy dtypes."""
from __future__ import annotations

from typing import Any

import numpy as np


class dtype:  # noqa: N801  (PyTorch's spelling)
    """A dtype whose repr is PyTorch's (`torch.float32`); `.np` is the NumPy dtype.

    >>> import tracegrad.eager as torch
    >>> torch.float32, torch.float32.is_floating_point
    (torch.float32, True)
    """

    __slots__ = ("name", "np", "is_floating_point", "itemsize", "_tensor_type")

    def __init__(self, name: str, np_dtype: Any, tensor_type: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = bool(np.issubdtype(self.np, np.floating))
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
float = float32  # noqa: A001  (torch.float is float32)
double = float64
half = float16
long = int64
int = int32  # noqa: A001

_BY_NUMPY = {d.np: d for d in (float32, float64, float16, int64, int32, int16, int8, uint8, bool_)}


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
