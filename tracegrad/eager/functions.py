"""PyTorch-named ops (`torch.exp(x)`, `torch.sum(x, dim=1)`, ...) and their method forms.

Each function maps PyTorch's spelling (dim, keepdim, *sizes) onto one table
primitive applied through `apply_op`, passing PyTorch's node name where the
primitive is shared (unsqueeze, squeeze, flatten and view are all `reshape`).
`install_methods` attaches them to Tensor, so `x.exp()` and `torch.exp(x)` are
the same code.
"""
from __future__ import annotations

import builtins
from typing import Sequence

import numpy as np

from tracegrad.eager.errors import (EagerDTypeError, EagerIndexError, EagerNotImplementedError,
                                    shape_error)
from tracegrad.eager.tensor import Tensor, apply_op, scaled_by_alpha, tensor
from tracegrad.ops import table as T

_bmax, _bmin, _bsum = builtins.max, builtins.min, builtins.sum


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(x)


def _dim(dim: int, ndim: int, op: str = "dim") -> int:
    n = _bmax(ndim, 1)
    if not -n <= dim < n:
        raise shape_error(op, f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                              f"but got {dim})", cls=EagerIndexError)
    return dim % n


def _dims(dim, ndim: int, op: str = "dim"):
    """None, an int or a sequence of ints -> axis attr for the table."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None
        return tuple(_dim(d, ndim, op) for d in dim)
    return _dim(dim, ndim, op)


def _sizes(args) -> tuple:
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(a) for a in args[0])
    return tuple(int(a) for a in args)


# ------------------------------------------------------------- elementwise


def add(input, other, *, alpha=1):
    return apply_op(T.add, (input, other if alpha == 1 else scaled_by_alpha(other, alpha)), {})


def sub(input, other, *, alpha=1):
    return apply_op(T.sub, (input, other if alpha == 1 else scaled_by_alpha(other, alpha)), {})


subtract = sub


def mul(input, other):
    return apply_op(T.mul, (input, other), {})


multiply = mul


def div(input, other):
    return apply_op(T.div, (input, other), {})


divide = true_divide = div


def pow(input, exponent):  # noqa: A001
    return apply_op(T.pow_, (input, exponent), {})


def neg(input):
    return apply_op(T.neg, (input,), {})


negative = neg


def exp(input):
    return apply_op(T.exp, (input,), {})


def log(input):
    return apply_op(T.log, (input,), {})


def sqrt(input):
    return apply_op(T.sqrt, (input,), {})


def sin(input):
    return apply_op(T.sin, (input,), {})


def cos(input):
    return apply_op(T.cos, (input,), {})


def tanh(input):
    return apply_op(T.tanh, (input,), {})


def sigmoid(input):
    return apply_op(T.sigmoid, (input,), {})


def relu(input):
    return apply_op(T.relu, (input,), {})


def abs(input):  # noqa: A001
    return apply_op(T.abs_, (input,), {})


absolute = abs


def sign(input):
    return apply_op(T.sign, (input,), {})


def square(input):
    return apply_op(T.pow_, (input, 2), {})


def reciprocal(input):
    return apply_op(T.div, (1.0, input), {}, name="ReciprocalBackward0", visible=(1,))


def maximum(input, other):
    return apply_op(T.maximum, (input, other), {})


def minimum(input, other):
    return apply_op(T.minimum, (input, other), {})


def _clip_args(min, max) -> dict:  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    attrs = {}
    if min is not None:
        attrs["lo"] = min.item() if isinstance(min, Tensor) else min
    if max is not None:
        attrs["hi"] = max.item() if isinstance(max, Tensor) else max
    return attrs


def clamp(input, min=None, max=None):  # noqa: A002
    if isinstance(min, Tensor) and min.numel() > 1 or isinstance(max, Tensor) and max.numel() > 1:
        out = input
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    return apply_op(T.clip, (input,), _clip_args(min, max), name="ClampBackward1")


clip = clamp


def where(condition, input, other):
    return apply_op(T.where, (condition, input, other), {})


# ------------------------------------------------------------- comparisons


def gt(input, other):
    return apply_op(T.gt, (input, other), {})


def lt(input, other):
    return apply_op(T.lt, (input, other), {})


def ge(input, other):
    return apply_op(T.ge, (input, other), {})


def le(input, other):
    return apply_op(T.le, (input, other), {})


def eq(input, other):
    return apply_op(T.eq, (input, other), {})


def ne(input, other):
    return apply_op(T.ne, (input, other), {})


greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne


def isfinite(input):
    return apply_op(T.isfinite, (input,), {})


def logical_not(input):
    return apply_op(T.logical_not, (input,), {})


def logical_and(input, other):
    return apply_op(T.logical_and, (input, other), {})


def logical_or(input, other):
    return apply_op(T.logical_or, (input, other), {})


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(np.allclose(_t(input)._data, _t(other)._data, rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


def equal(input, other) -> bool:
    a, b = _t(input)._data, _t(other)._data
    return a.shape == b.shape and bool(np.array_equal(a, b))


# -------------------------------------------------------------- reductions


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    x = input if dtype is None else input.to(dtype)
    return apply_op(T.sum_, (x,), {"axis": _dims(dim, x.ndim, "sum"), "keepdims": bool(keepdim)})


def mean(input, dim=None, keepdim=False, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    if x._data.dtype.kind != "f":
        raise shape_error(
            "mean", "mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {_torch_type(x)}", x, cls=EagerDTypeError)
    return apply_op(T.mean, (x,), {"axis": _dims(dim, x.ndim, "mean"), "keepdims": bool(keepdim)})


class _ReturnTypes(tuple):
    """torch.return_types.max(values=..., indices=...)."""

    _name = "max"

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]

    def __repr__(self) -> str:
        return f"torch.return_types.{self._name}(\nvalues={self[0]!r},\nindices={self[1]!r})"


class _MaxResult(_ReturnTypes):
    _name = "max"


class _MinResult(_ReturnTypes):
    _name = "min"


def _extremum(input, dim, keepdim, full_prim, arg_prim, result_cls, name):
    if dim is None:
        return apply_op(full_prim, (input,), {})
    shape = input._data.shape
    ax = _dim(dim, len(shape), name[:3].lower())
    idx = apply_op(arg_prim, (input,), {"axis": ax, "keepdims": bool(keepdim)})
    if not shape:
        return result_cls(apply_op(T.reshape, (input,), {"shape": ()}, name=name), idx)
    # values = x[grid, ..., idx, ..., grid]: the gradient goes to the chosen index only,
    # as in PyTorch's MaxBackward0 (the full reduction spreads it over ties instead)
    out_shape = idx._data.shape
    grids = []
    for k in range(len(shape)):
        if k == ax:
            grids.append(idx._data)
            continue
        pos = k if keepdim or k < ax else k - 1
        view = [1] * len(out_shape)
        view[pos] = shape[k]
        grids.append(np.arange(shape[k]).reshape(view))
    spec = tuple(("array", i) for i in range(len(grids)))
    values = apply_op(T.getitem, (input, *grids), {"spec": spec}, name=name, visible=(0,))
    return result_cls(values, idx)


def max(input, dim=None, keepdim=False):  # noqa: A001
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    return _extremum(input, dim, keepdim, T.max_, T.argmax, _MaxResult, "MaxBackward0")


def min(input, dim=None, keepdim=False):  # noqa: A001
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    return _extremum(input, dim, keepdim, T.min_, T.argmin, _MinResult, "MinBackward0")


def amax(input, dim=None, keepdim=False):
    return apply_op(T.max_, (input,), {"axis": _dims(dim, input.ndim, "amax"), "keepdims": bool(keepdim)},
                    name="AmaxBackward0")


def amin(input, dim=None, keepdim=False):
    return apply_op(T.min_, (input,), {"axis": _dims(dim, input.ndim, "amin"), "keepdims": bool(keepdim)},
                    name="AminBackward0")


def argmax(input, dim=None, keepdim=False):
    return apply_op(T.argmax, (input,), {"axis": None if dim is None else _dim(dim, input.ndim, "argmax"),
                                         "keepdims": bool(keepdim) and dim is not None})


def argmin(input, dim=None, keepdim=False):
    return apply_op(T.argmin, (input,), {"axis": None if dim is None else _dim(dim, input.ndim, "argmin"),
                                         "keepdims": bool(keepdim) and dim is not None})


def _ddof(unbiased, correction) -> int:
    if correction is not None:
        return int(correction)
    return 1 if unbiased else 0


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    if isinstance(unbiased, (int, list, tuple)) and not isinstance(unbiased, bool):
        dim, unbiased = unbiased, True  # var(x, 1) in the old positional form
    return apply_op(T.var, (input,), {"axis": _dims(dim, input.ndim, "var"), "keepdims": bool(keepdim),
                                      "ddof": _ddof(unbiased, correction)})


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    v = var(input, dim, unbiased, keepdim, correction=correction)
    return apply_op(T.sqrt, (v,), {}, name="StdBackward0")


def logsumexp(input, dim, keepdim=False):
    return apply_op(T.logsumexp, (input,), {"axis": _dims(dim, input.ndim, "logsumexp"),
                                            "keepdims": bool(keepdim)})


def _softmax_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1  # PyTorch's implicit choice


def _check_float_kernel(x, kernel: str, op: str) -> None:
    if x._data.dtype.kind != "f":
        raise shape_error(op, f'"{kernel}" not implemented for \'{_torch_type(x)}\'', x,
                          cls=EagerNotImplementedError)


def softmax(input, dim=None, dtype=None):
    x = input if dtype is None else input.to(dtype)
    d = _softmax_dim(x.ndim) if dim is None else _dim(dim, x.ndim, "softmax")
    _check_float_kernel(x, "softmax_lastdim_kernel_impl", "softmax")
    return apply_op(T.softmax, (x,), {"axis": d})


def log_softmax(input, dim=None, dtype=None):
    x = input if dtype is None else input.to(dtype)
    d = _softmax_dim(x.ndim) if dim is None else _dim(dim, x.ndim, "log_softmax")
    _check_float_kernel(x, "log_softmax_lastdim_kernel_impl", "log_softmax")
    return apply_op(T.log_softmax, (x,), {"axis": d})


def _torch_type(x) -> str:
    return x.dtype._tensor_type[:-len("Tensor")]


# -------------------------------------------------------------- shape ops


def _infer_shape(shape: tuple, numel: int, op: str, x=None) -> tuple:
    if shape.count(-1) > 1:
        raise shape_error(op, "only one dimension can be inferred", x)
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        if known == 0 or numel % known:
            raise shape_error(op, f"shape '[{', '.join(map(str, shape))}]' is invalid for input "
                                  f"of size {numel}", x)
        shape = tuple(numel // known if d == -1 else d for d in shape)
    n = 1
    for d in shape:
        n *= d
    if n != numel or any(d < 0 for d in shape):
        raise shape_error(op, f"shape '[{', '.join(map(str, shape))}]' is invalid for input of "
                              f"size {numel}", x)
    return shape


def reshape(input, *shape):
    shape = _infer_shape(_sizes(shape), input._data.size, "reshape", input)
    contiguous = input._data.flags.c_contiguous
    return apply_op(T.reshape, (input,), {"shape": shape},
                    name="ViewBackward0" if contiguous else "UnsafeViewBackward0")


def view(input, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return input.to(shape[0])  # view(dtype)
    shape = _infer_shape(_sizes(shape), input._data.size, "view", input)
    if not _reshapes_without_copy(input._data, shape):
        raise shape_error(
            "view", "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
            input) from None
    return apply_op(T.reshape, (input,), {"shape": shape}, name="ViewBackward0")


def _reshapes_without_copy(arr: np.ndarray, shape: tuple) -> bool:
    probe = arr.view()
    try:
        probe.shape = shape  # NumPy refuses when the strides cannot express it (a copy)
    except AttributeError:
        return False
    return True


def view_as(input, other):
    return view(input, tuple(other.shape))


def reshape_as(input, other):
    return reshape(input, tuple(other.shape))


def flatten(input, start_dim=0, end_dim=-1):
    nd = input._data.ndim
    if nd == 0:
        return reshape(input, (1,))
    s, e = _dim(start_dim, nd), _dim(end_dim, nd)
    shape = input._data.shape
    new = shape[:s] + (int(np.prod(shape[s:e + 1], dtype=np.int64)),) + shape[e + 1:]
    if new == shape:
        return input
    return reshape(input, new)


def squeeze(input, dim=None):
    shape = input._data.shape
    if dim is None:
        new = tuple(d for d in shape if d != 1)
        name = "SqueezeBackward0"
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = {_dim(d, len(shape), "squeeze") for d in dims}
        new = tuple(d for i, d in enumerate(shape) if not (i in axes and d == 1))
        name = "SqueezeBackward1" if not isinstance(dim, (tuple, list)) else "SqueezeBackward2"
    return apply_op(T.reshape, (input,), {"shape": new}, name=name)


def unsqueeze(input, dim):
    shape = input._data.shape
    d = _dim(dim, len(shape) + 1)
    return apply_op(T.reshape, (input,), {"shape": shape[:d] + (1,) + shape[d:]},
                    name="UnsqueezeBackward0")


def expand(input, *sizes):
    sizes = _sizes(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise shape_error("expand",
            f"expand(torch.{input.dtype._tensor_type}{{[{', '.join(map(str, shape))}]}}, "
            f"size=[{', '.join(map(str, sizes))}]): the number of sizes provided ({len(sizes)}) "
            f"must be greater or equal to the number of dimensions in the tensor ({len(shape)})", input)
    lead = len(sizes) - len(shape)
    target = tuple(shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return apply_op(T.broadcast_to, (input,), {"shape": target}, name="ExpandBackward0")


def expand_as(input, other):
    return expand(input, tuple(other.shape))


def broadcast_to(input, shape):
    return expand(input, tuple(shape))


def transpose(input, dim0, dim1):
    nd = input._data.ndim
    if nd == 0:
        return apply_op(T.transpose, (input,), {"axes": ()}, name="TransposeBackward0")
    a, b = _dim(dim0, nd, "transpose"), _dim(dim1, nd, "transpose")
    axes = list(range(nd))
    axes[a], axes[b] = axes[b], axes[a]
    return apply_op(T.transpose, (input,), {"axes": tuple(axes)}, name="TransposeBackward0")


swapaxes = swapdims = transpose


def t(input):
    nd = input._data.ndim
    if nd > 2:
        raise shape_error("t", f"t() expects a tensor with <= 2 dimensions, but self is {nd}D", input)
    axes = tuple(reversed(range(nd)))
    return apply_op(T.transpose, (input,), {"axes": axes}, name="TBackward0")


def permute(input, *dims):
    dims = _sizes(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise shape_error("permute", f"permute(sparse_coo): number of dimensions in the tensor "
                          f"input does not match the length of the desired ordering of dimensions "
                          f"i.e. input.dim() = {nd} is not equal to len(dims) = {len(dims)}", input)
    axes = tuple(_dim(d, nd, "permute") for d in dims)
    if len(set(axes)) != len(axes):
        raise shape_error(f"permute with dims {dims}", "permute(): duplicate dims are not allowed.",
                          input)
    return apply_op(T.transpose, (input,), {"axes": axes},
                    name="PermuteBackward0")


def cat(tensors: Sequence[Tensor], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise shape_error("cat", "torch.cat(): expected a non-empty list of Tensors")
    nd = tensors[0].ndim
    d = _dim(dim, nd)
    for i, x in enumerate(tensors[1:], 1):
        if x.ndim != nd:
            raise shape_error("cat", f"Tensors must have same number of dimensions: got {nd} and "
                                     f"{x.ndim}", *tensors)
        for k in range(nd):
            if k != d and x.shape[k] != tensors[0].shape[k]:
                raise shape_error(
                    "cat", f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{tensors[0].shape[k]} but got size {x.shape[k]} for tensor number {i} in "
                    f"the list.", *tensors)
    return apply_op(T.concatenate, tuple(tensors), {"axis": d})


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise shape_error("stack", "stack expects a non-empty TensorList")
    shape = tensors[0].shape
    for i, x in enumerate(tensors[1:], 1):
        if x.shape != shape:
            raise shape_error("stack", f"stack expects each tensor to be equal size, but got "
                                       f"[{', '.join(map(str, shape))}] at entry 0 and "
                                       f"[{', '.join(map(str, x.shape))}] at entry {i}", *tensors)
    d = _dim(dim, len(shape) + 1)
    new = tuple(shape[:d]) + (1,) + tuple(shape[d:])
    parts = [apply_op(T.reshape, (x,), {"shape": new}, name="UnsqueezeBackward0")
             for x in tensors]
    return apply_op(T.concatenate, tuple(parts), {"axis": d}, name="StackBackward0")


# ------------------------------------------------------------------ matmul


_MM_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int",
             "bool": "bool", "float16": "c10::Half"}


def check_matmul_dtypes(a, b) -> None:
    """PyTorch multiplies matrices of one dtype only (no promotion)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype != b._data.dtype:
        names = [_MM_NAMES.get(t._data.dtype.name, t._data.dtype.name) for t in (a, b)]
        raise shape_error("matmul", f"expected m1 and m2 to have the same dtype, but got: "
                                    f"{names[0]} != {names[1]}", a, b, cls=EagerDTypeError)


def matmul(input, other):
    check_matmul_dtypes(input, other)
    return apply_op(T.matmul, (input, other), {})


def mm(input, mat2):
    _check_mm_shapes("mm", input, mat2)
    return apply_op(T.matmul, (input, mat2), {})


def _check_mm_shapes(op, input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise shape_error(op, "self must be a matrix" if input.ndim != 2 else
                          "mat2 must be a matrix", input, mat2)
    if input.shape[1] != mat2.shape[0]:
        raise shape_error(
            op, f"mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x{input.shape[1]} "
            f"and {mat2.shape[0]}x{mat2.shape[1]})", input, mat2)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); one AddmmBackward0 node saving mat1 and mat2."""
    _check_mm_shapes("addmm", mat1, mat2)
    check_matmul_dtypes(mat1, mat2)
    if beta != 1 or alpha != 1:
        return input * beta + mm(mat1, mat2) * alpha
    return apply_op(T.addmm, (input, mat1, mat2), {})


def bmm(input, mat2):
    return apply_op(T.matmul, (input, mat2), {}, name="BmmBackward0")


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise shape_error("dot", f"1D tensors expected, but got {input.ndim}D and {other.ndim}D "
                                 "tensors", input, other)
    return apply_op(T.matmul, (input, other), {})


def mv(input, vec):
    return apply_op(T.matmul, (input, vec), {})


def outer(input, vec2):
    return apply_op(T.mul, (unsqueeze(input, 1), vec2), {})


# ------------------------------------------------------------- install


_METHODS = [
    "add", "sub", "mul", "div", "pow", "neg", "negative", "exp", "log", "sqrt", "sin", "cos",
    "tanh", "sigmoid", "relu", "abs", "sign", "square", "reciprocal", "maximum", "minimum",
    "clamp", "clip", "gt", "lt", "ge", "le", "eq", "ne", "isfinite", "logical_not",
    "logical_and", "logical_or", "sum", "mean", "max", "min", "amax", "amin", "argmax",
    "argmin", "var", "std", "logsumexp", "softmax", "log_softmax", "reshape", "view", "view_as",
    "reshape_as", "flatten", "squeeze", "unsqueeze", "expand", "expand_as", "transpose",
    "swapaxes", "t", "permute", "matmul", "mm", "addmm", "bmm", "dot", "mv", "outer", "allclose", "equal",
    "subtract", "multiply", "divide", "true_divide", "absolute", "greater", "less",
    "greater_equal", "less_equal", "not_equal", "broadcast_to",
]


def install_methods() -> None:
    g = globals()
    for name in _METHODS:
        setattr(Tensor, name, g[name])
    Tensor.T = property(lambda self: apply_op(
        T.transpose, (self,), {"axes": tuple(reversed(range(self._data.ndim)))},
        name="PermuteBackward0"))
    Tensor.mT = property(lambda self: transpose(self, -2, -1))


install_methods()

__all__ = [n for n, v in list(globals().items())
           if callable(v) and getattr(v, "__module__", None) == __name__ and not n.startswith("_")
           and n not in ("install_methods",)]
