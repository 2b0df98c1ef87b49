"""PyTorch-named ops (`torch.exp(x)`, `torch.sum(x, dim=1)`, ...) and their method forms.

Each function maps PyTorch's spelling (dim, keepdim, *sizes) onto one table
primitive applied through `apply_op`, passing PyTorch's node name where the
primitive is shared (unsqueeze, squeeze, flatten and view are all `reshape`).
`install_methods` attaches them to Tensor, so `x.exp()` and `torch.exp(x)` are
the same code.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from tracegrad.eager._tensor import VIEW_SCATTERS, Tensor, apply_op, scaled_by_alpha, tensor
from tracegrad.eager.errors import (
    EagerDTypeError,
    EagerIndexError,
    EagerNotImplementedError,
    shape_error,
)
from tracegrad.eager.grad_mode import STATE
from tracegrad.ops import table as T

_bmax, _bmin, _bsum = builtins.max, builtins.min, builtins.sum
_ball, _bany = builtins.all, builtins.any


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(x)


def _dim(dim: int, ndim: int, op: str = "dim") -> int:
    n = _bmax(ndim, 1)
    if not -n <= dim < n:
        raise shape_error(
            op,
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})",
            cls=EagerIndexError,
        )
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


def pow(input, exponent):
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


def rsqrt(input):
    return apply_op(T.pow_, (input, -0.5), {}, name="RsqrtBackward0")


def log1p(input):
    return apply_op(T.log1p, (input,), {})


def expm1(input):
    return apply_op(T.expm1, (input,), {})


def floor(input):
    return apply_op(T.floor, (input,), {})


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


def abs(input):
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


def _clip_args(min, max) -> dict:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    attrs = {}
    if min is not None:
        attrs["lo"] = min.item() if isinstance(min, Tensor) else min
    if max is not None:
        attrs["hi"] = max.item() if isinstance(max, Tensor) else max
    return attrs


def clamp(input, min=None, max=None):
    """PyTorch's two overloads: numbers (ClampBackward1, one `clip`) or tensors
    (ClampBackward0: min and max get gradients too). A 0-d tensor next to a number is
    read as a number, as PyTorch's argument parser does."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if not _bany(b is not None and not isinstance(b, Tensor) for b in (min, max)):
            return _clamp_tensors(input, min, max)
        for b in (min, max):
            if isinstance(b, Tensor) and b.ndim != 0:
                kinds = ", ".join(
                    f"{k}={'Tensor' if isinstance(v, Tensor) else type(v).__name__}"
                    for k, v in (("max", max), ("min", min))
                    if v is not None
                )
                raise TypeError(
                    f"clamp() received an invalid combination of arguments - got "
                    f"({kinds}, ), but expected one of:\n"
                    " * (Tensor min = None, Tensor max = None)\n"
                    " * (Number min = None, Number max = None)"
                )
    attrs = _clip_args(min, max)
    return _with_saved(
        apply_op(T.clip, (input,), attrs, name="ClampBackward1"),
        {"min": attrs.get("lo"), "max": attrs.get("hi")},
    )


clip = clamp


def where(condition, input=None, other=None):
    """torch.where(cond, x, y); torch.where(cond) is cond.nonzero(as_tuple=True)."""
    if input is None and other is None:
        return tuple(tensor(np.asarray(i, dtype=np.int64)) for i in np.nonzero(_t(condition)._data))
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
    return bool(
        np.allclose(_t(input)._data, _t(other)._data, rtol=rtol, atol=atol, equal_nan=equal_nan)
    )


def equal(input, other) -> bool:
    a, b = _t(input)._data, _t(other)._data
    return a.shape == b.shape and bool(np.array_equal(a, b))


# -------------------------------------------------------------- reductions


def sum(input, dim=None, keepdim=False, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return apply_op(T.sum_, (x,), {"axis": _dims(dim, x.ndim, "sum"), "keepdims": bool(keepdim)})


def mean(input, dim=None, keepdim=False, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    if x._data.dtype.kind not in "fc":
        raise shape_error(
            "mean",
            "mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {_torch_type(x)}",
            x,
            cls=EagerDTypeError,
        )
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


def max(input, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    return _extremum(input, dim, keepdim, T.max_, T.argmax, _MaxResult, "MaxBackward0")


def min(input, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    return _extremum(input, dim, keepdim, T.min_, T.argmin, _MinResult, "MinBackward0")


def amax(input, dim=None, keepdim=False):
    return apply_op(
        T.max_,
        (input,),
        {"axis": _dims(dim, input.ndim, "amax"), "keepdims": bool(keepdim)},
        name="AmaxBackward0",
    )


def amin(input, dim=None, keepdim=False):
    return apply_op(
        T.min_,
        (input,),
        {"axis": _dims(dim, input.ndim, "amin"), "keepdims": bool(keepdim)},
        name="AminBackward0",
    )


def argmax(input, dim=None, keepdim=False):
    return apply_op(
        T.argmax,
        (input,),
        {
            "axis": None if dim is None else _dim(dim, input.ndim, "argmax"),
            "keepdims": bool(keepdim) and dim is not None,
        },
    )


def argmin(input, dim=None, keepdim=False):
    return apply_op(
        T.argmin,
        (input,),
        {
            "axis": None if dim is None else _dim(dim, input.ndim, "argmin"),
            "keepdims": bool(keepdim) and dim is not None,
        },
    )


def _ddof(unbiased, correction) -> int:
    if correction is not None:
        return int(correction)
    return 1 if unbiased else 0


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    if isinstance(unbiased, (int, list, tuple)) and not isinstance(unbiased, bool):
        dim, unbiased = unbiased, True  # var(x, 1) in the old positional form
    return apply_op(
        T.var,
        (input,),
        {
            "axis": _dims(dim, input.ndim, "var"),
            "keepdims": bool(keepdim),
            "ddof": _ddof(unbiased, correction),
        },
    )


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    v = var(input, dim, unbiased, keepdim, correction=correction)
    return apply_op(T.sqrt, (v,), {}, name="StdBackward0")


def logsumexp(input, dim, keepdim=False):
    return apply_op(
        T.logsumexp,
        (input,),
        {"axis": _dims(dim, input.ndim, "logsumexp"), "keepdims": bool(keepdim)},
    )


def _softmax_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1  # PyTorch's implicit choice


def _check_float_kernel(x, kernel: str, op: str) -> None:
    if x._data.dtype.kind != "f":
        raise shape_error(
            op,
            f"\"{kernel}\" not implemented for '{_torch_type(x)}'",
            x,
            cls=EagerNotImplementedError,
        )


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
    return x.dtype._tensor_type[: -len("Tensor")]


# -------------------------------------------------------------- shape ops


def _infer_shape(shape: tuple, numel: int, op: str, x=None) -> tuple:
    if shape.count(-1) > 1:
        raise shape_error(op, "only one dimension can be inferred", x)
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        if known == 0 and numel == 0:
            raise shape_error(
                op,
                f"cannot reshape tensor of 0 elements into shape "
                f"[{', '.join(map(str, shape))}] because the unspecified "
                f"dimension size -1 can be any value and is ambiguous",
                x,
            )
        if known == 0 or numel % known:
            raise shape_error(
                op,
                f"shape '[{', '.join(map(str, shape))}]' is invalid for input of size {numel}",
                x,
            )
        shape = tuple(numel // known if d == -1 else d for d in shape)
    n = 1
    for d in shape:
        n *= d
    if n != numel or _bany(d < 0 for d in shape):
        raise shape_error(
            op, f"shape '[{', '.join(map(str, shape))}]' is invalid for input of size {numel}", x
        )
    return shape


def reshape(input, *shape):
    shape = _infer_shape(_sizes(shape), input._data.size, "reshape", input)
    data = input._data
    contiguous = type(data) is not np.ndarray or data.flags.c_contiguous  # (captured: no layout)
    return apply_op(
        T.reshape,
        (input,),
        {"shape": shape},
        name="ViewBackward0" if contiguous else "UnsafeViewBackward0",
    )


def view(input, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return input.to(shape[0])  # view(dtype)
    shape = _infer_shape(_sizes(shape), input._data.size, "view", input)
    if not _reshapes_without_copy(input._data, shape):
        raise shape_error(
            "view",
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
            input,
        ) from None
    return apply_op(T.reshape, (input,), {"shape": shape}, name="ViewBackward0")


def _reshapes_without_copy(arr: np.ndarray, shape: tuple) -> bool:
    if type(arr) is not np.ndarray:  # a tracer (inside tracegrad.compile) has no strides
        return True
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
    new = shape[:s] + (int(np.prod(shape[s : e + 1], dtype=np.int64)),) + shape[e + 1 :]
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
    return apply_op(
        T.reshape, (input,), {"shape": shape[:d] + (1,) + shape[d:]}, name="UnsqueezeBackward0"
    )


def expand(input, *sizes):
    sizes = _sizes(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise shape_error(
            "expand",
            f"expand(torch.{input.dtype._tensor_type}{{[{', '.join(map(str, shape))}]}}, "
            f"size=[{', '.join(map(str, sizes))}]): the number of sizes provided ({len(sizes)}) "
            f"must be greater or equal to the number of dimensions in the tensor ({len(shape)})",
            input,
        )
    lead = len(sizes) - len(shape)
    target = []
    for i, size in enumerate(sizes):  # PyTorch's inferExpandGeometry, its checks and texts
        have = shape[i - lead] if i >= lead else None
        if size == -1:
            if have is None:
                raise shape_error(
                    "expand",
                    f"The expanded size of the tensor (-1) isn't allowed "
                    f"in a leading, non-existing dimension {i}",
                    input,
                )
            size = have
        elif size < 0:
            raise shape_error(
                "expand",
                f"Trying to create tensor with negative dimension {size}: "
                f"[{', '.join(map(str, sizes))}]",
                input,
            )
        elif have is not None and have != size and have != 1:
            raise shape_error(
                "expand",
                f"The expanded size of the tensor ({size}) must match the "
                f"existing size ({have}) at non-singleton dimension {i}.  Target "
                f"sizes: [{', '.join(map(str, sizes))}].  Tensor sizes: "
                f"[{', '.join(map(str, shape))}]",
                input,
            )
        target.append(size)
    return apply_op(T.broadcast_to, (input,), {"shape": tuple(target)}, name="ExpandBackward0")


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
        raise shape_error(
            "t", f"t() expects a tensor with <= 2 dimensions, but self is {nd}D", input
        )
    axes = tuple(reversed(range(nd)))
    return apply_op(T.transpose, (input,), {"axes": axes}, name="TBackward0")


def permute(input, *dims):
    dims = _sizes(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise shape_error(
            "permute",
            f"permute(sparse_coo): number of dimensions in the tensor "
            f"input does not match the length of the desired ordering of dimensions "
            f"i.e. input.dim() = {nd} is not equal to len(dims) = {len(dims)}",
            input,
        )
    axes = tuple(_dim(d, nd, "permute") for d in dims)
    if len(set(axes)) != len(axes):
        raise shape_error(
            f"permute with dims {dims}", "permute(): duplicate dims are not allowed.", input
        )
    return apply_op(T.transpose, (input,), {"axes": axes}, name="PermuteBackward0")


def movedim(input, source, destination):
    """Move dims `source` to positions `destination`, the others keeping their order
    (a permute view; PyTorch's node is PermuteBackward0 too)."""
    nd = input._data.ndim
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise shape_error(
            "movedim",
            f"movedim: Invalid source or destination dims: source "
            f"({list(src)} dims) should contain the same number of dims as "
            f"destination ({list(dst)} dims)",
            input,
        )
    src = tuple(_dim(d, nd, "movedim") for d in src)
    dst = tuple(_dim(d, nd, "movedim") for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise shape_error("movedim", "movedim: repeated dim in `source` or `destination`", input)
    rest = iter(d for d in range(nd) if d not in src)
    where = dict(zip(dst, src, strict=True))
    axes = tuple(where[k] if k in where else next(rest) for k in range(nd))
    return apply_op(T.transpose, (input,), {"axes": axes}, name="PermuteBackward0")


moveaxis = movedim


def unflatten(input, dim, sizes):
    """Split dim `dim` into `sizes` (one of them may be -1): a view, ViewBackward0."""
    shape = input._data.shape
    if not shape:
        raise shape_error(
            "unflatten",
            f"Dimension specified as {dim} but tensor has no dimensions",
            input,
            cls=EagerIndexError,
        )
    d = _dim(dim, len(shape), "unflatten")
    sizes = tuple(int(s) for s in sizes)
    known = int(np.prod([s for s in sizes if s != -1]))
    if known != shape[d] if -1 not in sizes else (known != 0 and shape[d] % known):
        raise shape_error(
            "unflatten",
            f"unflatten: Provided sizes [{', '.join(map(str, sizes))}] don't multiply up to "
            f"the size of dim {d} ({shape[d]}) in the input tensor",
            input,
        )
    sizes = _infer_shape(sizes, shape[d], "unflatten", input)
    return view(input, shape[:d] + sizes + shape[d + 1 :])


def _storage_offset(input) -> int:
    """Elements between the start of the memory a view shares with its base and the view's
    first element (0 for a tensor that is not a view)."""
    root = input._base if input._base is not None else input
    start = input._data.__array_interface__["data"][0]
    return (start - root._data.__array_interface__["data"][0]) // input._data.itemsize


def roll(input, shifts, dims=None):
    """Shift elements along dims, wrapping around: per dim one concatenation of the
    tail and the head; dims=None rolls the flattened tensor and restores the shape.
    The last node is named as PyTorch's one node, RollBackward0."""
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise shape_error(
                "roll", f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0", input
            )
        shift = shifts[0] if isinstance(shifts, (tuple, list)) else shifts
        flat = _roll_dim(reshape(input, (-1,)), int(shift), 0, None)
        return apply_op(T.reshape, (flat,), {"shape": tuple(input.shape)}, name="RollBackward0")
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise shape_error(
            "roll",
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}",
            input,
        )
    out = input
    for shift, dim in zip(shifts, dims, strict=True):
        out = _roll_dim(out, int(shift), _dim(dim, input._data.ndim, "roll"), "RollBackward0")
    return out


def _roll_dim(x, shift: int, d: int, name):
    n = x._data.shape[d]
    s = shift % n if n else 0
    head = (slice(None),) * d
    tail, front = x[head + (slice(n - s, n),)], x[head + (slice(0, n - s),)]
    return apply_op(T.concatenate, (tail, front), {"axis": d}, name=name)


def cat(tensors: Sequence[Tensor], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise shape_error("cat", "torch.cat(): expected a non-empty list of Tensors")
    nd = tensors[0].ndim
    d = _dim(dim, nd)
    for i, x in enumerate(tensors[1:], 1):
        if x.ndim != nd:
            raise shape_error(
                "cat",
                f"Tensors must have same number of dimensions: got {nd} and {x.ndim}",
                *tensors,
            )
        for k in range(nd):
            if k != d and x.shape[k] != tensors[0].shape[k]:
                raise shape_error(
                    "cat",
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{tensors[0].shape[k]} but got size {x.shape[k]} for tensor number {i} in "
                    f"the list.",
                    *tensors,
                )
    return apply_op(T.concatenate, tuple(tensors), {"axis": d})


concat = concatenate = cat


def is_inference(input) -> bool:
    """torch.is_inference: whether `input` was made in inference mode (not a view of a
    normal tensor)."""
    return bool(input._inference)


def stack(tensors: Sequence[Tensor], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise shape_error("stack", "stack expects a non-empty TensorList")
    shape = tensors[0].shape
    for i, x in enumerate(tensors[1:], 1):
        if x.shape != shape:
            raise shape_error(
                "stack",
                f"stack expects each tensor to be equal size, but got "
                f"[{', '.join(map(str, shape))}] at entry 0 and "
                f"[{', '.join(map(str, x.shape))}] at entry {i}",
                *tensors,
            )
    d = _dim(dim, len(shape) + 1)
    new = tuple(shape[:d]) + (1,) + tuple(shape[d:])
    parts = [apply_op(T.reshape, (x,), {"shape": new}, name="UnsqueezeBackward0") for x in tensors]
    out = apply_op(T.concatenate, tuple(parts), {"axis": d}, name="StackBackward0")
    return _with_saved(out, {"dim": d})  # grad_fn._saved_dim, as PyTorch


# ------------------------------------------------------------------ matmul


_MM_NAMES = {
    "float32": "float",
    "float64": "double",
    "int64": "long int",
    "int32": "int",
    "bool": "bool",
    "float16": "c10::Half",
}


def check_matmul_dtypes(a, b) -> None:
    """PyTorch multiplies matrices of one dtype only (no promotion)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype != b._data.dtype:
        names = [_MM_NAMES.get(t._data.dtype.name, t._data.dtype.name) for t in (a, b)]
        raise shape_error(
            "matmul",
            f"expected m1 and m2 to have the same dtype, but got: {names[0]} != {names[1]}",
            a,
            b,
            cls=EagerDTypeError,
        )


def matmul(input, other):
    check_matmul_dtypes(input, other)
    return apply_op(T.matmul, (input, other), {})


def mm(input, mat2):
    _check_mm_shapes("mm", input, mat2)
    return apply_op(T.matmul, (input, mat2), {})


def _check_mm_shapes(op, input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise shape_error(
            op, "self must be a matrix" if input.ndim != 2 else "mat2 must be a matrix", input, mat2
        )
    if input.shape[1] != mat2.shape[0]:
        raise shape_error(
            op,
            f"mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x{input.shape[1]} "
            f"and {mat2.shape[0]}x{mat2.shape[1]})",
            input,
            mat2,
        )


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
        raise shape_error(
            "dot",
            f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors",
            input,
            other,
        )
    return apply_op(T.matmul, (input, other), {})


def mv(input, vec):
    return apply_op(T.matmul, (input, vec), {})


def outer(input, vec2):
    return apply_op(T.mul, (unsqueeze(input, 1), vec2), {})


# =================================================== issue 13: more of PyTorch's tensor surface
# Views (narrow, select, split, chunk, unbind) are basic indexing (`getitem`), so they share
# memory and version counter with their base. repeat, gather, index_select and scatter_add
# are one `getitem` / `take_along_axis` / scatter node each, named as PyTorch names them.
# Three rule-table primitives made for this surface (ops/table.py): clamp with tensor
# bounds (one ClampBackward0 node with PyTorch's masks), the vector norm (PyTorch's zero
# gradient at x = 0, where sqrt(sum(x*x)) would give nan), and diagonal / its scatter
# (a writable strided view).


def _index_view(input, index, name, multi=None, saved=None):
    from tracegrad.eager.indexing import getitem

    out = getitem(input, index, name=name)
    if multi is not None:
        out.__dict__["_multi_view"] = multi
    return _with_saved(out, saved)


def _with_saved(out, saved: dict | None):
    """Attach PyTorch's non-tensor saved attributes (`grad_fn._saved_dim`, ...) to out's node."""
    if saved is not None and out._grad_fn is not None:
        out._grad_fn.extra = saved
    return out


def narrow(input, dim, start, length):
    if input.ndim == 0:
        raise shape_error("narrow", "narrow() cannot be applied to a 0-dim tensor.", input)
    d = _dim(dim, input.ndim, "narrow")
    size = input._data.shape[d]
    start = int(start.item()) if isinstance(start, Tensor) else int(start)
    length = int(length)
    if not -size <= start <= size:
        raise shape_error(
            "narrow",
            f"start out of range (expected to be in range of [{-size}, {size}], but got {start})",
            input,
            cls=EagerIndexError,
        )
    if start < 0:
        start += size
    if length < 0:
        raise shape_error("narrow", "narrow(): length must be non-negative.", input)
    if start + length > size:
        raise shape_error(
            "narrow", f"start ({start}) + length ({length}) exceeds dimension size ({size}).", input
        )
    return _index_view(
        input,
        (slice(None),) * d + (slice(start, start + length),),
        "SliceBackward0",
        saved={
            "dim": d,
            "start": start,
            "end": start + length,
            "step": 1,
            "self_sym_sizes": tuple(input.shape),
        },
    )


def select(input, dim, index):
    if input.ndim == 0:
        raise shape_error(
            "select", "select() cannot be applied to a 0-dim tensor.", input, cls=EagerIndexError
        )
    d = _dim(dim, input.ndim, "select")
    size = input._data.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise shape_error(
            "select",
            f"select(): index {index} out of range for tensor of size "
            f"[{', '.join(map(str, input.shape))}] at dimension {d}",
            input,
            cls=EagerIndexError,
        )
    return _index_view(
        input,
        (slice(None),) * d + (index % size,),
        "SelectBackward0",
        saved={"dim": d, "index": index, "self_sym_sizes": tuple(input.shape)},
    )


def _multi_views(input, d, bounds, name, op, saved=None):
    return tuple(
        _index_view(input, (slice(None),) * d + (slice(a, b),), name + "Backward0", (op, i), saved)
        for i, (a, b) in enumerate(bounds)
    )


def split(tensor, split_size_or_sections, dim=0):
    input = tensor
    if input.ndim == 0:
        raise shape_error("split", "split expects at least a 1-dimensional tensor", input)
    d = _dim(dim, input.ndim, "split")
    size = input._data.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if _bsum(sizes) != size or _bany(s < 0 for s in sizes):
            raise shape_error(
                "split",
                f"split_with_sizes expects split_sizes to sum exactly to "
                f"{size} (input tensor's size at dimension {d}), but got "
                f"split_sizes=[{', '.join(map(str, sizes))}]",
                input,
            )
        bounds, a = [], 0
        for s in sizes:
            bounds.append((a, a + s))
            a += s
        return _multi_views(
            input,
            d,
            bounds,
            "SplitWithSizes",
            "SplitWithSizes",
            {"dim": d, "self_sym_sizes": tuple(input.shape), "split_sizes": tuple(sizes)},
        )
    step = int(split_size_or_sections)
    if step < 0 or (step == 0 and size != 0):
        raise shape_error(
            "split",
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            if step == 0
            else f"split expects split_size be non-negative, but got split_size={step}",
            input,
        )
    bounds = [(a, _bmin(a + step, size)) for a in range(0, size, step)] if step else [(0, 0)]
    return _multi_views(
        input,
        d,
        bounds or [(0, 0)],
        "Split",
        "Split",
        {"dim": d, "self_sym_sizes": tuple(input.shape), "split_size": step},
    )


def chunk(input, chunks, dim=0):
    chunks = int(chunks)
    if chunks <= 0:
        raise shape_error(
            "chunk", f"chunk expects `chunks` to be greater than 0, got: {chunks}", input
        )
    if input.ndim == 0:
        raise shape_error("chunk", "chunk expects at least a 1-dimensional tensor", input)
    d = _dim(dim, input.ndim, "chunk")
    size = input._data.shape[d]
    if size == 0:  # PyTorch: `chunks` empty pieces
        return _multi_views(input, d, [(0, 0)] * chunks, "Split", "Split")
    return split(input, -(-size // chunks), d)


def unbind(input, dim=0):
    if input.ndim == 0:
        raise shape_error(
            "unbind",
            "Dimension specified as 0 but tensor has no dimensions",
            input,
            cls=EagerIndexError,
        )
    d = _dim(dim, input.ndim, "unbind")
    return tuple(
        _index_view(input, (slice(None),) * d + (i,), "UnbindBackward0", ("Unbind", i), {"dim": d})
        for i in range(input._data.shape[d])
    )


def repeat(input, *sizes):
    """One node: a gather of x with per-axis index arrays (its backward adds repeats up)."""
    sizes = _sizes(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise shape_error(
            "repeat",
            "Number of dimensions of repeat dims can not be smaller "
            "than number of dimensions of tensor",
            input,
        )
    if _bany(r < 0 for r in sizes):
        raise shape_error(
            "repeat",
            f"Trying to create tensor with negative dimension "
            f"{_bmin(sizes)}: [{', '.join(map(str, sizes))}]",
            input,
        )
    lead = len(sizes) - len(shape)
    full = (1,) * lead + tuple(shape)
    out_shape = tuple(n * r for n, r in zip(full, sizes, strict=True))
    saved = {"repeats": tuple(sizes), "self_sym_sizes": tuple(shape)}
    if _ball(n == 1 for n in shape):  # a broadcast
        return _with_saved(
            apply_op(T.broadcast_to, (input,), {"shape": out_shape}, name="RepeatBackward0"), saved
        )
    arrays = []
    for k, n in enumerate(shape):
        axis = lead + k
        view = [1] * len(out_shape)
        view[axis] = out_shape[axis]
        arrays.append((np.arange(out_shape[axis]) % _bmax(n, 1)).reshape(view))
    arrays[0] = np.broadcast_to(arrays[0], out_shape[:lead] + arrays[0].shape[lead:])
    spec = tuple(("array", k) for k in range(len(shape)))
    out = apply_op(T.getitem, (input, *arrays), {"spec": spec}, name="RepeatBackward0")
    if out._grad_fn is not None:
        # PyTorch's RepeatBackward0 keeps only the repeat counts: a second backward works
        # (the index arrays here are constants made from them, never user data)
        out._grad_fn.saved = False
    return _with_saved(out, saved)


def _index_tensor(index, op: str):
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    return index


def _along_checks(op, input, d, idx, other=None, other_name="self"):
    """gather / scatter_add: PyTorch's checks of an index against self (and src)."""
    if idx.dtype.kind not in "iu":
        raise shape_error(
            op,
            f"{op}(): Expected dtype int64 for index"
            if op == "scatter_add"
            else f"{op}(): Expected dtype int32/int64 for index",
            input,
            cls=RuntimeError,
        )
    nd = _bmax(input.ndim, 1)
    if _bmax(idx.ndim, 1) != nd:
        raise shape_error(
            op,
            "Index tensor must have the same number of dimensions as "
            + ("input tensor" if op == "gather" else "self tensor"),
            input,
        )
    for k in range(idx.ndim):
        if k != d and idx.shape[k] > input._data.shape[k]:
            raise shape_error(
                op,
                f"Size does not match at dimension {k} expected index "
                f"[{', '.join(map(str, idx.shape))}] to be no larger than self "
                f"[{', '.join(map(str, input.shape))}] apart from dimension {d}",
                input,
            )
        if other is not None and idx.shape[k] > other._data.shape[k]:
            raise shape_error(
                op,
                f"Expected index [{', '.join(map(str, idx.shape))}] to be no "
                f"larger than self [{', '.join(map(str, input.shape))}] apart "
                f"from dimension {d} and to be no larger size than src "
                f"[{', '.join(map(str, other.shape))}]",
                input,
            )
    size = input._data.shape[d] if input.ndim else 1  # a 0-d tensor acts as 1 element
    if idx.size:
        bad = idx[(idx < 0) | (idx >= size)]
        if bad.size:
            raise shape_error(
                op,
                f"index {bad.flat[0]} is out of bounds for dimension {d} with size {size}",
                input,
            )


def _grid_index(idx: np.ndarray, d: int):
    """(arrays, spec) addressing x[..., idx, ...] element by element (index smaller than x)."""
    arrays = []
    for k, n in enumerate(idx.shape):
        if k == d:
            arrays.append(idx)
        else:
            view = [1] * idx.ndim
            view[k] = n
            arrays.append(np.arange(n).reshape(view))
    return arrays, tuple(("array", k) for k in range(idx.ndim))


def gather(input, dim, index, *, sparse_grad=False):
    index = _index_tensor(index, "gather")
    d = _dim(dim, input.ndim, "gather")
    idx = index._data
    _along_checks("gather", input, d, idx)
    if idx.ndim != input.ndim or idx.ndim == 0:  # PyTorch treats a 0-d tensor as 1-d here
        flat = gather(reshape(input, (-1,)), 0, reshape(index, (-1,)), sparse_grad=sparse_grad)
        return reshape(flat, idx.shape)
    shape = input._data.shape
    saved = {"dim": d, "sparse_grad": bool(sparse_grad)}
    if idx.shape[:d] == shape[:d] and idx.shape[d + 1 :] == shape[d + 1 :]:  # GatherBackward0
        return _with_saved(apply_op(T.take_along_axis, (input, index), {"axis": d}), saved)
    arrays, spec = _grid_index(idx, d)
    return _with_saved(
        apply_op(T.getitem, (input, *arrays), {"spec": spec}, name="GatherBackward0"), saved
    )


def scatter_add(input, dim, index, src):
    """self + src scattered (added) at index along dim: one ScatterAddBackward0 node over
    self and the scattered src."""
    index = _index_tensor(index, "scatter_add")
    src = _t(src)
    d = _dim(dim, input.ndim, "scatter_add")
    idx = index._data
    if src._data.dtype != input._data.dtype:
        raise shape_error(
            "scatter_add", "scatter(): Expected self.dtype to be equal to src.dtype", input, src
        )
    _along_checks("scatter_add", input, d, idx, src)
    part = src
    if src._data.shape != idx.shape:
        part = _index_view(src, tuple(slice(0, n) for n in idx.shape), "SliceBackward0")
    shape = tuple(input._data.shape)
    if idx.shape[:d] == shape[:d] and idx.shape[d + 1 :] == shape[d + 1 :]:
        scattered = apply_op(T.put_along_axis_add, (part, index), {"axis": d, "shape": shape})
    else:
        arrays, spec = _grid_index(idx, d)
        scattered = apply_op(
            T.index_add_zeros,
            (part, *arrays),
            {"spec": spec, "shape": shape},
            name="ScatterAddBackward0",
        )
    return _with_saved(
        apply_op(T.add, (input, scattered), {}, name="ScatterAddBackward0"), {"dim": d}
    )


def index_select(input, dim, index):
    index = _index_tensor(index, "index_select")
    idx = index._data
    if idx.ndim > 1:
        raise shape_error(
            "index_select",
            "index_select(): Index is supposed to be a vector",
            input,
            cls=EagerIndexError,
        )
    if idx.dtype.kind not in "iu":
        raise shape_error(
            "index_select", "index_select(): Expected dtype int32 or int64 for index", input
        )
    nd = input.ndim
    d = _dim(dim, nd, "index_select")
    size = input._data.shape[d] if nd else 1
    if idx.size and ((idx < 0) | (idx >= size)).any():
        raise shape_error("index_select", "index out of range in self", input, cls=EagerIndexError)
    if nd == 0:
        return apply_op(
            T.reshape,
            (input,),
            {"shape": ()} if idx.ndim == 0 else {"shape": (1,)},
            name="IndexSelectBackward0",
        )
    operand = index if idx.ndim == 1 else idx.reshape(1)
    spec = tuple(
        ("array", 0) if k == d else ("slice", 0, n, 1) for k, n in enumerate(input._data.shape)
    )
    return _with_saved(
        apply_op(T.getitem, (input, operand), {"spec": spec}, name="IndexSelectBackward0"),
        {"dim": d, "self_sym_sizes": tuple(input.shape)},
    )


def _fill_value_for(input, value):
    """masked_fill's value in self's dtype (PyTorch casts it: 1.7 into int64 is 1)."""
    kind = input._data.dtype.kind
    if kind == "b":
        return bool(value)
    if kind in "iu":
        return int(value)
    return value


def _masked_fill_args(input, mask, value):
    """(operands of `where`, node name, visible operands) for masked_fill(_), after
    PyTorch's checks of the mask and the value."""
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = (
            _MM_NAMES.get(mask._data.dtype.name, mask._data.dtype.name)
            if isinstance(mask, Tensor)
            else type(mask).__name__
        )
        raise shape_error(
            "masked_fill",
            f"masked_fill_ only supports boolean masks, but got mask with dtype {got}",
            input,
        )
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise shape_error(
                "masked_fill",
                f"masked_fill_ only supports a 0-dimensional value "
                f"tensor, but got tensor with {value.ndim} "
                f"dimension(s).",
                input,
            )
        if value._data.dtype != input._data.dtype:
            value = value.to(input.dtype)
        return (mask, value, input), "MaskedFillBackward1", (2, 1)
    return (mask, _fill_value_for(input, value), input), "MaskedFillBackward0", (2,)


def masked_fill(input, mask, value):
    args, name, visible = _masked_fill_args(input, mask, value)
    return apply_op(T.where, args, {}, name=name, visible=visible)


def _tensor_where(self, condition, other):
    return where(condition, self, other)


# --------------------------------------------------------- clamp with tensor bounds


clamp_tensor_primitive = T.clamp_tensor  # tests and Tensor.clamp_ use the name


def _clamp_tensors(input, min, max):
    attrs = {"has_lo": min is not None, "has_hi": max is not None}
    return apply_op(
        clamp_tensor_primitive, (input, 0 if min is None else min, 0 if max is None else max), attrs
    )


# ------------------------------------------------------------------ vector norm


vector_norm_primitive = T.vector_norm


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: every p except 'nuc' is linalg.vector_norm over `dim` (all dims if None)."""
    if out is not None:
        raise NotImplementedError("tracegrad.eager: norm(out=...) is not supported")
    x = input if dtype is None else input.to(dtype)
    if x._data.dtype.kind != "f":
        raise shape_error(
            "norm",
            f"linalg.vector_norm: Expected a floating point or complex "
            f"tensor as input. Got {_torch_type(x)}",
            x,
            cls=EagerDTypeError,
        )
    if isinstance(p, str):
        if p != "fro":
            raise EagerNotImplementedError(
                f"tracegrad.eager: norm(p={p!r}) needs a matrix decomposition, which tracegrad "
                "does not have"
            )
        if isinstance(dim, (list, tuple)) and len(dim) > 2:
            raise shape_error(
                "norm",
                "linalg.matrix_norm: dim must be a 2-tuple. Got " + " ".join(map(str, dim)),
                x,
            )
        p = 2
    p = 2.0 if p is None else float(p)
    nd = x.ndim
    axis = (
        None
        if dim is None
        else _dims(dim if isinstance(dim, (list, tuple)) else (dim,), nd, "norm")
    )
    if axis is not None and nd == 0:
        axis = None
    if (
        p == 2.0
        and not isinstance(x._data, np.ndarray)
        and not (x._requires_grad and STATE.grad_enabled)
    ):
        # captured, no gradient through it (clip_grad_norm_): sqrt(sum(x * x)) of kernel ops,
        # where the vector_norm primitive would call NumPy from inside the kernel
        return apply_op(
            T.sqrt,
            (
                apply_op(
                    T.sum_,
                    (apply_op(T.mul, (x, x), {}),),
                    {"axis": axis, "keepdims": bool(keepdim)},
                ),
            ),
            {},
        )
    out = apply_op(vector_norm_primitive, (x,), {"ord": p, "axis": axis, "keepdims": bool(keepdim)})
    return _with_saved(
        out, {"dim": axis, "keepdim": bool(keepdim), "ord": int(p) if float(p).is_integer() else p}
    )


# ------------------------------------------------------------------ diagonal (a view)


_diag_strided = T.diagonal_view
diagonal_primitive = T.diagonal
diagonal_scatter_primitive = T.diagonal_scatter_zeros


def diagonal(input, offset=0, dim1=0, dim2=1):
    nd = input.ndim
    if nd < 2:
        raise shape_error(
            "diagonal",
            f"Dimension out of range (expected to be in range of [{-_bmax(nd, 1)}, "
            f"{_bmax(nd, 1) - 1}], but got 1)",
            input,
            cls=EagerIndexError,
        )
    a, b = _dim(dim1, nd, "diagonal"), _dim(dim2, nd, "diagonal")
    if a == b:
        raise shape_error(
            "diagonal", f"diagonal dimensions cannot be identical {dim1}, {dim2}", input
        )
    return _with_saved(
        apply_op(diagonal_primitive, (input,), {"offset": int(offset), "axis1": a, "axis2": b}),
        {"dim1": a, "dim2": b, "offset": int(offset), "self_sym_sizes": tuple(input.shape)},
    )


def _diagonal_inverse(attrs, in_shape):
    """How an in-place change of a diagonal view goes back into its base (CopySlices)."""
    mask = np.zeros(in_shape, dtype=np.bool_)
    _diag_strided(mask, attrs["offset"], attrs["axis1"], attrs["axis2"])[...] = True
    return mask, diagonal_scatter_primitive, dict(attrs, shape=tuple(in_shape))


VIEW_SCATTERS[diagonal_primitive] = _diagonal_inverse


# ------------------------------------------------------------------ cumsum


def cumsum(input, dim, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    if x.ndim == 0:  # the running sum of one value is that value (integers become int64)
        _dim(dim, 0, "cumsum")
        if x._data.dtype.kind != "f":
            return tensor(x._data.astype(np.int64))
        return _with_saved(
            apply_op(T.reshape, (x,), {"shape": ()}, name="CumsumBackward0"), {"dim": 0}
        )
    d = _dim(dim, x.ndim, "cumsum")
    return _with_saved(apply_op(T.cumsum, (x,), {"axis": d}), {"dim": d})


# ------------------------------------------ more of the surface real scripts use (issue 13)
# Compositions of table primitives; the last node carries PyTorch's name (its
# next_functions may show an intermediate node where PyTorch shows an operand).


def addcmul(input, tensor1, tensor2, *, value=1):
    prod = tensor1 * tensor2 if value == 1 else tensor1 * tensor2 * value
    return apply_op(T.add, (input, prod), {}, name="AddcmulBackward0")


def addcdiv(input, tensor1, tensor2, *, value=1):
    quot = tensor1 / tensor2 if value == 1 else tensor1 / tensor2 * value
    return apply_op(T.add, (input, quot), {}, name="AddcdivBackward0")


def lerp(input, end, weight):
    step = (end - input) * weight
    return apply_op(
        T.add,
        (input, step),
        {},
        name="LerpBackward1" if isinstance(weight, Tensor) else "LerpBackward0",
    )


def index_add(input, dim, index, source, *, alpha=1):
    index = _index_tensor(index, "index_add")
    if index._data.ndim > 1:
        raise shape_error(
            "index_add",
            "index_add_(): Index is supposed to be a vector",
            input,
            cls=EagerIndexError,
        )
    if index._data.dtype.kind not in "iu":
        raise shape_error("index_add", "index_add_(): Expected dtype int32/int64 for index", input)
    d = _dim(dim, input.ndim, "index_add")
    source = _t(source)
    if alpha != 1:
        source = source * alpha
    spec = tuple(
        ("array", 0) if k == d else ("slice", 0, n, 1) for k, n in enumerate(input._data.shape)
    )
    idx = index if index._data.ndim == 1 else index._data.reshape(1)
    scattered = apply_op(
        T.index_add_zeros, (source, idx), {"spec": spec, "shape": tuple(input._data.shape)}
    )
    return _with_saved(
        apply_op(T.add, (input, scattered), {}, name="IndexAddBackward0"),
        {"dim": d, "alpha": alpha},
    )


def _grid(shape, flipped=()):
    """Index arrays addressing every element of `shape` (reversed along `flipped`)."""
    arrays = []
    for k, n in enumerate(shape):
        view = [1] * len(shape)
        view[k] = n
        idx = np.arange(n)[::-1] if k in flipped else np.arange(n)
        arrays.append(idx.reshape(view))
    return arrays, tuple(("array", k) for k in range(len(shape)))


def flip(input, *dims):
    dims = _sizes(dims)
    nd = input.ndim
    axes = {_dim(d, nd, "flip") for d in dims}
    if len(axes) != len(dims):
        raise shape_error(
            "flip",
            "dims has duplicates, original flip dims size="
            f"{len(dims)}, but unique flip dims size={len(axes)}",
            input,
        )
    if nd == 0 or not axes:
        return input.clone()
    arrays, spec = _grid(input._data.shape, axes)
    out = apply_op(T.getitem, (input, *arrays), {"spec": spec}, name="FlipBackward0")
    if out._grad_fn is not None:
        out._grad_fn.saved = False  # PyTorch keeps only the dims (the arrays are made from them)
    return _with_saved(out, {"dims": tuple(sorted(axes))})


def _triangle(input, diagonal, lower: bool):
    if input.ndim < 2:
        raise shape_error(
            "tril" if lower else "triu",
            f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions",
            input,
        )
    rows, cols = input._data.shape[-2:]
    keep = (np.tril if lower else np.triu)(np.ones((rows, cols), dtype=np.bool_), int(diagonal))
    out = apply_op(
        T.where,
        (keep, input, 0),
        {},
        name="TrilBackward0" if lower else "TriuBackward0",
        visible=(1,),
    )
    if out._grad_fn is not None:
        out._grad_fn.saved = False  # PyTorch keeps only `diagonal`
    return _with_saved(out, {"diagonal": int(diagonal)})


def tril(input, diagonal=0):
    return _triangle(input, diagonal, True)


def triu(input, diagonal=0):
    return _triangle(input, diagonal, False)


def masked_select(input, mask):
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        raise shape_error("masked_select", "masked_select: expected BoolTensor for mask", input)
    shape = np.broadcast_shapes(input._data.shape, mask._data.shape)
    x = input if input._data.shape == shape else expand(input, shape)
    where_true = np.nonzero(np.broadcast_to(mask._data, shape))
    spec = tuple(("array", k) for k in range(len(shape)))
    if not shape:
        return reshape(x, (1,))[tensor(np.asarray(mask._data).reshape(1))]
    return apply_op(T.getitem, (x, *where_true), {"spec": spec}, name="MaskedSelectBackward0")


def nonzero(input, *, as_tuple=False):
    data = _t(input)._data
    if as_tuple:
        return tuple(tensor(np.asarray(i, dtype=np.int64)) for i in np.nonzero(data))
    return tensor(np.argwhere(data).astype(np.int64).reshape(-1, data.ndim))


def isnan(input):
    return tensor(np.isnan(_t(input)._data))


def isinf(input):
    return tensor(np.isinf(_t(input)._data))


def _logical_reduce(fn, input, dim, keepdim):
    data = _t(input)._data.astype(np.bool_)
    axis = None if dim is None else _dims(dim, data.ndim, fn.__name__)
    return tensor(np.asarray(fn(data, axis=axis, keepdims=bool(keepdim) and dim is not None)))


def all(input, dim=None, keepdim=False):
    return _logical_reduce(np.all, input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    return _logical_reduce(np.any, input, dim, keepdim)


class _SortResult(_ReturnTypes):
    _name = "sort"


class _TopkResult(_ReturnTypes):
    _name = "topk"


_SortResult.__name__ = _SortResult.__qualname__ = "sort"  # type(x.sort()).__name__, as torch
_TopkResult.__name__ = _TopkResult.__qualname__ = "topk"


def _sorted_indices(data: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable order along axis (PyTorch's CPU order: ties keep their order, NaN is largest)."""
    if not descending:
        return np.argsort(data, axis=axis, kind="stable").astype(np.int64)
    n = data.shape[axis]
    rev = np.flip(data, axis=axis)
    return np.flip(n - 1 - np.argsort(rev, axis=axis, kind="stable"), axis=axis).astype(np.int64)


def argsort(input, dim=-1, descending=False, stable=False):
    x = _t(input)
    if x.ndim == 0:
        return tensor(np.zeros((), np.int64))
    return tensor(_sorted_indices(x._data, _dim(dim, x.ndim, "argsort"), descending))


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices); values gather x along dim (SortBackward0)."""
    x = _t(input)
    if x.ndim == 0:
        return _SortResult(
            apply_op(T.reshape, (x,), {"shape": ()}, name="SortBackward0"),
            tensor(np.zeros((), np.int64)),
        )
    d = _dim(dim, x.ndim, "sort")
    idx = tensor(_sorted_indices(x._data, d, descending))
    values = apply_op(T.take_along_axis, (x, idx), {"axis": d}, name="SortBackward0")
    return _SortResult(_with_saved(values, {"dim": d}), idx)


def topk(input, k, dim=-1, largest=True, sorted=True):
    x = _t(input)
    d = _dim(dim, x.ndim, "topk") if x.ndim else 0
    size = x._data.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise shape_error("topk", "selected index k out of range", x)
    if x.ndim == 0:
        return _TopkResult(
            apply_op(T.reshape, (x,), {"shape": ()}, name="TopkBackward0"),
            tensor(np.zeros((), np.int64)),
        )
    order = _sorted_indices(x._data, d, bool(largest))
    keep = [slice(None)] * x.ndim
    keep[d] = slice(0, int(k))
    idx = tensor(np.ascontiguousarray(order[tuple(keep)]))
    values = apply_op(T.take_along_axis, (x, idx), {"axis": d}, name="TopkBackward0")
    return _TopkResult(_with_saved(values, {"dim": d}), idx)


# ------------------------------------------------------------------ sampling


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from each row of `input` (unnormalized probabilities), int64. Without
    replacement by PyTorch's method: the top `num_samples` of p / Exp(1) noise, so that
    categories of probability 0 come only after all others. The numbers come from
    NumPy's generator (`torch.manual_seed` or `generator=`), not PyTorch's."""
    from tracegrad.eager.creation import _rng_of

    p = input._data
    if p.ndim not in (1, 2):
        raise shape_error("multinomial", "prob_dist must be 1 or 2 dim", input)
    if p.dtype.kind != "f":
        raise shape_error(
            "multinomial", "multinomial only supports floating-point dtypes for input", input
        )
    rows = np.asarray(p, np.float64).reshape(-1, p.shape[-1])
    n = rows.shape[1]
    if num_samples <= 0:
        raise shape_error("multinomial", "cannot sample n_sample <= 0 samples", input)
    if not replacement and num_samples > n:
        raise shape_error(
            "multinomial",
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
            input,
        )
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise shape_error(
            "multinomial", "probability tensor contains either `inf`, `nan` or element < 0", input
        )
    if (rows.sum(axis=1) <= 0).any():
        raise shape_error(
            "multinomial", "invalid multinomial distribution (sum of probabilities <= 0)", input
        )
    rng = _rng_of(generator)
    if replacement:
        cdf = np.cumsum(rows / rows.sum(axis=1, keepdims=True), axis=1)
        u = rng.random((rows.shape[0], num_samples))
        idx = np.stack([np.searchsorted(c, r, side="right") for c, r in zip(cdf, u, strict=True)])
        idx = np.minimum(idx, n - 1)
    else:
        keys = rows / rng.exponential(size=rows.shape)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return tensor(idx.reshape(p.shape[:-1] + (num_samples,)).astype(np.int64))


def _stride(self, dim=None):
    strides = tuple(st // self._data.itemsize for st in self._data.strides)
    return strides if dim is None else strides[_dim(dim, self.ndim, "stride")]


def _element_size(self):
    return int(self._data.itemsize)


def _type_as(self, other):
    return self.to(other.dtype)


# ------------------------------------------------------------ new_* constructors


def _new_dtype(self, dtype):
    from tracegrad.eager.dtypes import to_numpy_dtype

    return self._data.dtype if dtype is None else to_numpy_dtype(dtype)


def _new(arr, requires_grad):
    t = tensor(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        import warnings

        warnings.warn(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or sourceTensor.detach().clone()"
            ".requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
            UserWarning,
            stacklevel=2,
        )
        data = data._data
    return _new(np.array(data, dtype=_new_dtype(self, dtype)), requires_grad)


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(np.zeros(_sizes(size), _new_dtype(self, dtype)), requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(np.ones(_sizes(size), _new_dtype(self, dtype)), requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(np.empty(_sizes(size), _new_dtype(self, dtype)), requires_grad)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _new(np.full(_sizes((size,)), fill_value, _new_dtype(self, dtype)), requires_grad)


def _legacy_new(self, *args, dtype=None, device=None, requires_grad=False):
    """PyTorch's legacy `x.new(...)`: `new(2, 3)` / `new(torch.Size)` is uninitialized memory
    of x's dtype, `new([1, 2])` / `new(ndarray)` copies the data, `new()` is empty."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer, tuple, Tensor)):
        return _new(np.array(args[0], dtype=_new_dtype(self, dtype)), requires_grad)
    if len(args) == 1 and isinstance(args[0], Tensor):
        raise TypeError("new(): use x.detach().clone() to copy a tensor (x.new(tensor))")
    return _new(np.empty(_sizes(args) if args else (0,), _new_dtype(self, dtype)), requires_grad)


# ------------------------------------------------------------- install


_METHODS = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "neg",
    "negative",
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
    "square",
    "reciprocal",
    "maximum",
    "minimum",
    "clamp",
    "clip",
    "gt",
    "lt",
    "ge",
    "le",
    "eq",
    "ne",
    "isfinite",
    "logical_not",
    "logical_and",
    "logical_or",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "var",
    "std",
    "logsumexp",
    "softmax",
    "log_softmax",
    "reshape",
    "view",
    "view_as",
    "reshape_as",
    "flatten",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "transpose",
    "swapaxes",
    "t",
    "permute",
    "matmul",
    "mm",
    "addmm",
    "bmm",
    "dot",
    "mv",
    "outer",
    "allclose",
    "equal",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "absolute",
    "greater",
    "less",
    "greater_equal",
    "less_equal",
    "not_equal",
    "broadcast_to",
    "narrow",
    "select",
    "split",
    "chunk",
    "unbind",
    "repeat",
    "gather",
    "scatter_add",
    "index_select",
    "masked_fill",
    "norm",
    "diagonal",
    "cumsum",
    "addcmul",
    "addcdiv",
    "lerp",
    "index_add",
    "flip",
    "tril",
    "triu",
    "masked_select",
    "nonzero",
    "isnan",
    "isinf",
    "all",
    "any",
    "sort",
    "argsort",
    "topk",
    "movedim",
    "moveaxis",
    "swapdims",
    "unflatten",
    "roll",
    "multinomial",
    "rsqrt",
    "log1p",
    "expm1",
    "floor",
]


def install_methods() -> None:
    g = globals()
    for name in _METHODS:
        setattr(Tensor, name, g[name])
    Tensor.T = property(
        lambda self: apply_op(
            T.transpose,
            (self,),
            {"axes": tuple(reversed(range(self._data.ndim)))},
            name="PermuteBackward0",
        )
    )
    Tensor.mT = property(lambda self: transpose(self, -2, -1))
    Tensor.where = _tensor_where
    Tensor.type_as = _type_as
    Tensor.stride = _stride
    Tensor.storage_offset = _storage_offset
    Tensor.element_size = _element_size
    Tensor.new_tensor = _new_tensor
    Tensor.new_zeros = _new_zeros
    Tensor.new_ones = _new_ones
    Tensor.new_empty = _new_empty
    Tensor.new_full = _new_full
    Tensor.new = _legacy_new


install_methods()

__all__ = [
    n
    for n, v in list(globals().items())
    if callable(v)
    and getattr(v, "__module__", None) == __name__
    and not n.startswith("_")
    and n not in ("install_methods", "repeat")
]  # (torch.repeat does not exist)
