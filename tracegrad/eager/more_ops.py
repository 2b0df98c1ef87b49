"""More of torch's functions and Tensor methods that model code calls (issue 26): einsum,
scatter, repeat_interleave, cumprod, prod, baddbmm, tile, meshgrid, diag, nan_to_num,
isin, unique, the trigonometric family, rounding, and more.

Each differentiable function is a composition of rule-table primitives (through the eager
ops of torch_ops.py or `apply_op`), so its backward is the table's vjp rules; no function
here has a backward of its own. Integer-valued, boolean and sampling functions compute
their values with NumPy and are not differentiable, as in PyTorch.

    >>> import tracegrad.eager as torch
    >>> q, k = torch.ones(2, 3, 4), torch.ones(2, 5, 4)
    >>> torch.einsum("bqd,bkd->bqk", q, k).shape
    torch.Size([2, 3, 5])
    >>> torch.repeat_interleave(torch.tensor([1, 2]), 2).tolist()
    [1, 1, 2, 2]
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from tracegrad.eager import torch_ops as O
from tracegrad.eager._tensor import VIEW_SCATTERS, Tensor, apply_op, inplace_composite, tensor
from tracegrad.eager.errors import shape_error
from tracegrad.ops import table as T

_bmax, _bmin, _babs = builtins.max, builtins.min, builtins.abs
_t, _dim, _sizes = O._t, O._dim, O._sizes


def _const(x: Tensor, values) -> Tensor:
    """A constant tensor (no history) in x's dtype."""
    return Tensor._wrap(np.asarray(values, dtype=x._data.dtype))


def _float(x: Tensor) -> Tensor:
    return x if x._data.dtype.kind == "f" else x.to(np.float32)


# ------------------------------------------------------------------ elementwise


def tan(input):
    return apply_op(T.div, (O.sin(input), O.cos(input)), {}, name="TanBackward0")


def asin(input):
    return apply_op(T.arcsin, (_float(input),), {}, name="AsinBackward0")


def acos(input):
    return apply_op(T.arccos, (_float(input),), {}, name="AcosBackward0")


def atan(input):
    return apply_op(T.arctan, (_float(input),), {}, name="AtanBackward0")


def atan2(input, other):
    return apply_op(T.arctan2, (_float(input), _float(_t(other))), {}, name="Atan2Backward0")


def sinh(input):
    e, f = O.exp(input), O.exp(-input)
    return (e - f) * 0.5


def cosh(input):
    e, f = O.exp(input), O.exp(-input)
    return (e + f) * 0.5


def asinh(input):
    a = O.abs(input)
    return O.sign(input) * O.log(a + O.sqrt(a * a + 1.0))


def acosh(input):
    return O.log(input + O.sqrt(input * input - 1.0))


def atanh(input):
    return (O.log1p(input) - O.log1p(-input)) * 0.5


def log2(input):
    return O.log(input) * (1.0 / math.log(2.0))


def log10(input):
    return O.log(input) * (1.0 / math.log(10.0))


def exp2(input):
    return O.exp(_float(input) * math.log(2.0))


def erf(input):
    return apply_op(T.erf, (_float(input),), {}, name="ErfBackward0")


def erfc(input):
    return 1.0 - erf(input)


def _rounded(input, values: np.ndarray, name: str) -> Tensor:
    """`values` (a rounding of input) with floor's zero gradient: floor(x) + (values - floor)."""
    if input._data.dtype.kind != "f":
        return tensor(values.astype(input._data.dtype))
    fl = O.floor(input)
    return apply_op(T.add, (fl, values - fl._data), {}, name=name)


def ceil(input):
    return _rounded(input, np.ceil(input._data), "CeilBackward0")


def trunc(input):
    return _rounded(input, np.trunc(input._data), "TruncBackward0")


fix = trunc


def round(input, *, decimals: int = 0):
    """Half to even, as PyTorch; zero gradient."""
    if decimals:
        scale = 10.0**decimals
        return round(input * scale) / scale
    return _rounded(input, np.round(input._data), "RoundBackward0")


def frac(input):
    return input - trunc(input)


def fmod(input, other):
    """input - other * trunc(input / other) (the sign of input, C's fmod)."""
    if input._data.dtype.kind in "iub" and not isinstance(other, float):
        o = other._data if isinstance(other, Tensor) else other
        return tensor(np.fmod(input._data, o))
    return input - other * trunc(input / other)


def remainder(input, other):
    """Python's modulo (the sign of other)."""
    if isinstance(input, (int, float)):
        input = tensor(input)
    return apply_op(T.remainder, (input, other), {}, name="RemainderBackward0")


def floor_divide(input, other):
    if input._data.dtype.kind in "iu" and not isinstance(other, float):
        o = other._data if isinstance(other, Tensor) else other
        if (np.asarray(o) == 0).any():
            raise shape_error("floor_divide", "ZeroDivisionError", input, cls=RuntimeError)
        return tensor(np.floor_divide(input._data, o))
    return O.floor(input / other)


def hypot(input, other):
    return O.sqrt(input * input + other * other)


def logaddexp(input, other):
    m = O.maximum(input, other).detach()
    return m + O.log(O.exp(input - m) + O.exp(other - m))


def logaddexp2(input, other):
    return logaddexp(input * math.log(2.0), other * math.log(2.0)) * (1.0 / math.log(2.0))


def logit(input, eps=None):
    x = input if eps is None else O.clamp(input, eps, 1.0 - eps)
    return O.log(x / (1.0 - x))


def xlogy(input, other):
    input, other = _t(input), _t(other)
    zero = input._data == 0
    safe = O.where(tensor(zero), _const(_float(other), 1.0), other)
    out = input * O.log(safe)
    nan = np.isnan(other._data)
    return O.where(tensor(zero & ~nan), _const(out, 0.0), out)


def float_power(input, exponent):
    x = _t(input).to(np.float64)
    e = exponent.to(np.float64) if isinstance(exponent, Tensor) else float(exponent)
    return O.pow(x, e)


def sgn(input):
    return O.sign(input)


def signbit(input):
    return tensor(np.signbit(input._data))


def heaviside(input, values):
    v = values._data if isinstance(values, Tensor) else values
    return tensor(np.heaviside(input._data, v).astype(input._data.dtype))


def nan_to_num(input, nan: float = 0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf (default: the dtype's max), -inf -> neginf (its min);
    gradient 1 at finite elements, 0 at the replaced ones."""
    d = input._data
    if d.dtype.kind != "f":
        return input.clone()
    info = np.finfo(d.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    filled = np.where(np.isnan(d), nan, np.where(d > 0, hi, lo))
    return O.where(tensor(~np.isfinite(d)), _const(input, filled), input)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    a, b = _t(input)._data, _t(other)._data
    return tensor(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def isposinf(input):
    return tensor(np.isposinf(input._data))


def isneginf(input):
    return tensor(np.isneginf(input._data))


def isreal(input):
    return tensor(np.ones(input._data.shape, dtype=np.bool_))


def logical_xor(input, other):
    return tensor(np.logical_xor(input._data, _t(other)._data))


def _bitwise(fn):
    def op(input, other):
        o = other._data if isinstance(other, Tensor) else other
        return tensor(fn(input._data, o))

    return op


bitwise_and = _bitwise(np.bitwise_and)
bitwise_or = _bitwise(np.bitwise_or)
bitwise_xor = _bitwise(np.bitwise_xor)


def bitwise_not(input):
    return tensor(np.invert(input._data))


def clamp_min(input, min):
    return O.clamp(input, min=min)


def clamp_max(input, max):
    return O.clamp(input, max=max)


def _special_op(prim, input, **attrs):
    from tracegrad.ops import special as S

    return apply_op(getattr(S, prim), (_float(_t(input)),), attrs)


def lgamma(input):
    """log|Gamma(x)| (the rule table's gammaln); its derivative is digamma."""
    return _special_op("gammaln", input)


def digamma(input):
    return _special_op("digamma", input)


def polygamma(n, input):
    """The n-th derivative of digamma (torch.polygamma(n, x); as a method, x.polygamma(n))."""
    return _special_op("polygamma", input, n=int(n))


def erfinv(input):
    return _special_op("erfinv", input)


def mvlgamma(input, p: int):
    """The multivariate log-gamma of dimension p: sum_j lgamma(x - j/2) + const."""
    out = lgamma(input)
    for j in range(1, p):
        out = out + lgamma(input - j / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (gradient 0 there)."""
    x = _float(input)
    zero = tensor(x._data == 0)
    safe = O.where(zero, _const(x, 1.0), x) * math.pi
    return O.where(zero, _const(x, 1.0), O.sin(safe) / safe)


# ------------------------------------------------------------------ reductions


def _last(input, dim) -> tuple[Tensor, int]:
    """input with `dim` moved last, and the normalized dim."""
    d = _dim(dim, _bmax(input.ndim, 1), "dim")
    return (input if input.ndim == 0 or d == input.ndim - 1 else O.movedim(input, d, -1)), d


def _prod_last(x: Tensor) -> Tensor:
    """The product over the last dim by halving (log2(n) multiplications, exact gradients
    where elements are 0)."""
    n = x._data.shape[-1]
    if n == 0:
        return O.sum(x, -1) + 1  # (the empty product)
    while n > 1:
        if n % 2:
            one = Tensor._wrap(np.ones(x._data.shape[:-1] + (1,), x._data.dtype))
            x = O.cat([x, one], -1)
            n += 1
        x = O.narrow(x, -1, 0, n // 2) * O.narrow(x, -1, n // 2, n // 2)
        n //= 2
    return O.squeeze(x, -1)


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    if x._data.dtype.kind in "bi" and dtype is None:
        x = x.to(np.int64)
    if dim is None:
        return _prod_last(O.reshape(x, (-1,)))
    x, d = _last(x, dim)
    if x.ndim == 0:
        return x.clone()
    out = _prod_last(x)
    return O.unsqueeze(out, d) if keepdim else out


def cumprod(input, dim, *, dtype=None):
    """Running products along dim: one multiplication per step (exact where zeros are)."""
    x = input if dtype is None else input.to(dtype)
    if x._data.dtype.kind in "bi" and dtype is None:
        x = x.to(np.int64)
    if x.ndim == 0:
        return x.clone()
    x, d = _last(x, dim)
    parts = O.unbind(x, -1)
    acc, outs = parts[0], [parts[0]]
    for p in parts[1:]:
        acc = acc * p
        outs.append(acc)
    out = O.stack(outs, -1) if outs else x.clone()
    return out if d == x.ndim - 1 else O.movedim(out, -1, d)


def _cum_extreme(input, dim, fn, name):
    x = input
    d = _dim(dim, _bmax(x.ndim, 1), name)
    data = x._data if x.ndim else x._data.reshape(1)
    acc = fn.accumulate(data, axis=d)
    n = data.shape[d]
    shape = [1] * data.ndim
    shape[d] = n
    pos = np.broadcast_to(np.arange(n).reshape(shape), data.shape)
    hit = np.where(data == acc, pos, -1)  # PyTorch: the last index of the running extreme
    hit = np.where(np.isnan(data), pos, hit) if data.dtype.kind == "f" else hit
    idx = np.maximum.accumulate(hit, axis=d).astype(np.int64)
    if x.ndim == 0:
        idx = idx.reshape(())
    values = O.gather(x, d, tensor(idx)) if x.ndim else x.clone()
    return _ValuesIndices(values, tensor(idx))


class _ValuesIndices(tuple):
    """(values, indices) with PyTorch's field names."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])


def cummax(input, dim):
    return _cum_extreme(input, dim, np.maximum, "cummax")


def cummin(input, dim):
    return _cum_extreme(input, dim, np.minimum, "cummin")


def logcumsumexp(input, dim):
    m = O.amax(input, dim, keepdim=True).detach() if input.ndim else input.detach()
    return O.log(O.cumsum(O.exp(input - m), dim)) + m


def median(input, dim=None, keepdim: bool = False):
    """The lower median (PyTorch's), through sort's gradient; with dim: (values, indices)."""
    if dim is None:
        flat = O.reshape(input, (-1,))
        n = flat._data.shape[0]
        return O.sort(flat).values[(n - 1) // 2]
    d = _dim(dim, _bmax(input.ndim, 1), "median")
    if input.ndim == 0:
        return _ValuesIndices(input.clone(), tensor(np.int64(0)))
    s = O.sort(input, d, stable=True)
    k = (input._data.shape[d] - 1) // 2
    values, indices = O.select(s.values, d, k), O.select(s.indices, d, k)
    if keepdim:
        values, indices = O.unsqueeze(values, d), O.unsqueeze(indices, d)
    return _ValuesIndices(values, indices)


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    clean = O.where(tensor(np.isnan(input._data)), _const(input, 0.0), input)
    return O.sum(clean, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    count = (~np.isnan(input._data)).sum(
        axis=None if dim is None else O._dims(dim, input.ndim), keepdims=keepdim
    )
    return nansum(input, dim, keepdim, dtype=dtype) / _const(input, count)


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return (
        O.std(input, dim, unbiased, keepdim, correction=correction),
        O.mean(input, dim, keepdim),
    )


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return (
        O.var(input, dim, unbiased, keepdim, correction=correction),
        O.mean(input, dim, keepdim),
    )


def aminmax(input, *, dim=None, keepdim: bool = False):
    class _MinMax(tuple):
        min = property(lambda self: self[0])
        max = property(lambda self: self[1])

    return _MinMax((O.amin(input, dim, keepdim), O.amax(input, dim, keepdim)))


def count_nonzero(input, dim=None):
    axis = None if dim is None else O._dims(dim, input.ndim)
    return tensor(np.asarray(np.count_nonzero(input._data, axis=axis), dtype=np.int64))


def trace(input):
    if input.ndim != 2:
        raise shape_error("trace", "trace: expected a matrix", input)
    return O.sum(O.diagonal(input))


def dist(input, other, p=2):
    return O.norm(input - other, p)


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    d = _dim(dim, input.ndim, "diff")
    x = input
    if prepend is not None or append is not None:
        x = O.cat([t for t in (prepend, x, append) if t is not None], d)
    for _ in range(n):
        m = x._data.shape[d]
        if m == 0:
            break
        x = O.narrow(x, d, 1, m - 1) - O.narrow(x, d, 0, m - 1)
    return x


# ------------------------------------------------------------------ shapes and indexing


def tensor_split(input, indices_or_sections, dim: int = 0):
    """Views split at indices, or into n parts whose first (size % n) have one more."""
    d = _dim(dim, input.ndim, "tensor_split")
    size = input._data.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise shape_error(
                "tensor_split",
                f"number of sections must be larger than 0, got {n}",
                input,
                cls=RuntimeError,
            )
        q, r = divmod(size, n)
        bounds = np.cumsum([0] + [q + 1] * r + [q] * (n - r)).tolist()
    else:
        bounds = [0, *(_bmin(_bmax(int(i), 0), size) for i in indices_or_sections), size]
    return tuple(
        O.narrow(input, d, a, _bmax(b - a, 0)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    )


def hsplit(input, sections):
    return tensor_split(input, sections, 1 if input.ndim > 1 else 0)


def vsplit(input, sections):
    return tensor_split(input, sections, 0)


def _atleast(t: Tensor, n: int) -> Tensor:
    if n == 1:
        return O.reshape(t, (1,)) if t.ndim == 0 else t
    if n == 2:
        return O.reshape(t, (1, -1)) if t.ndim < 2 else t
    if t.ndim == 0:
        return O.reshape(t, (1, 1, 1))
    if t.ndim == 1:
        return O.reshape(t, (1, -1, 1))
    return O.unsqueeze(t, -1) if t.ndim == 2 else t


def atleast_1d(*tensors):
    out = [_atleast(_t(t), 1) for t in tensors]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_2d(*tensors):
    out = [_atleast(_t(t), 2) for t in tensors]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_3d(*tensors):
    out = [_atleast(_t(t), 3) for t in tensors]
    return out[0] if len(out) == 1 else tuple(out)


def hstack(tensors):
    ts = [_atleast(t, 1) for t in tensors]
    return O.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return O.cat([_atleast(t, 2) for t in tensors], 0)


row_stack = vstack


def dstack(tensors):
    return O.cat([_atleast(t, 3) for t in tensors], 2)


def column_stack(tensors):
    return O.cat([O.reshape(t, (-1, 1)) if t.ndim < 2 else t for t in tensors], 1)


def tile(input, *dims):
    dims = _sizes(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + tuple(dims)
    return O.repeat(input, *dims)


def meshgrid(*tensors, indexing: str = "ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(
            f"torch.meshgrid: indexing must be one of 'xy' or 'ij', but received: {indexing}"
        )
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = -1
        out.append(O.expand(O.reshape(t, view), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return O.stack([O.reshape(g, (-1,)) for g in grids], 1)


def _embed(values: Tensor, rows: np.ndarray, cols: np.ndarray, shape: tuple) -> Tensor:
    """A zero tensor of `shape` whose last two dims hold values[..., k] at (rows[k],
    cols[k]) (index_add_zeros: its vjp reads the values back)."""
    lead = shape[:-2]
    spec = tuple(("slice", 0, n, 1) for n in lead) + (("array", 0), ("array", 0))
    arrays = (rows, cols)
    spec = tuple(("slice", 0, n, 1) for n in lead) + (("array", 0), ("array", 1))
    return apply_op(T.index_add_zeros, (values, *arrays), {"spec": spec, "shape": tuple(shape)})


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    n = input._data.shape[-1]
    m = n + _babs(offset)
    k = np.arange(n)
    rows, cols = (k, k + offset) if offset >= 0 else (k - offset, k)
    out = _embed(input, rows, cols, input._data.shape[:-1] + (m, m))
    nd = out.ndim
    d1, d2 = _dim(dim1, nd, "diag_embed"), _dim(dim2, nd, "diag_embed")
    if (d1, d2) != (nd - 2, nd - 1):
        out = O.movedim(out, (nd - 2, nd - 1), (d1, d2))
    return out


def diag(input, diagonal: int = 0):
    """1-D: the square matrix with input on the `diagonal`-th diagonal; 2-D: that diagonal
    (a copy, as PyTorch's diag)."""
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return O.diagonal(input, diagonal).clone()
    raise shape_error("diag", "diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D", input)


def diagflat(input, offset: int = 0):
    return diag_embed(O.reshape(input, (-1,)), offset)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None):
    r, c = np.triu_indices(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64).reshape(2, -1))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None):
    r, c = np.tril_indices(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64).reshape(2, -1))


def fliplr(input):
    return O.flip(input, 1)


def flipud(input):
    return O.flip(input, 0)


def rot90(input, k: int = 1, dims=(0, 1)):
    d0, d1 = (_dim(d, input.ndim, "rot90") for d in dims)
    k %= 4
    if k == 0:
        return input.clone()
    if k == 1:
        return O.transpose(O.flip(input, d1), d0, d1)
    if k == 2:
        return O.flip(input, d0, d1)
    return O.flip(O.transpose(input, d0, d1), d1)


def take(input, index):
    return O.reshape(input, (-1,))[index]


def take_along_dim(input, indices, dim=None):
    if dim is None:
        return O.gather(O.reshape(input, (-1,)), 0, O.reshape(indices, (-1,)))
    d = _dim(dim, input.ndim, "take_along_dim")
    a, b = list(input._data.shape), list(indices._data.shape)
    a[d] = b[d] = 1
    shape = list(np.broadcast_shapes(tuple(a), tuple(b)))
    shape_in, shape_idx = list(shape), list(shape)
    shape_in[d], shape_idx[d] = input._data.shape[d], indices._data.shape[d]
    return O.gather(O.expand(input, shape_in), d, O.expand(indices, shape_idx))


def argwhere(input):
    return O.nonzero(input)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) repeated: an index_select, so the gradient sums
    the copies. repeat_interleave(counts) alone gives arange(n) repeated counts times."""
    if repeats is None:  # torch.repeat_interleave(repeats)
        counts = input._data
        return tensor(np.repeat(np.arange(counts.shape[0]), counts).astype(np.int64))
    x = O.reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else _dim(dim, input.ndim, "repeat_interleave")
    n = x._data.shape[d] if x.ndim else 1
    reps = repeats._data if isinstance(repeats, Tensor) else np.asarray(repeats)
    if reps.ndim and reps.shape[0] not in (1, n):
        raise shape_error(
            "repeat_interleave", "repeats must have the same size as input along dim", input
        )
    if (reps < 0).any():
        raise shape_error("repeat_interleave", "repeats can not be negative", input)
    index = np.repeat(np.arange(n), reps.reshape(-1) if reps.ndim else int(reps))
    return O.index_select(x, d, tensor(index.astype(np.int64)))


def _scatter_mask(input, d, idx) -> tuple[np.ndarray, np.ndarray]:
    """(mask of the input positions written, mask of the index entries that write last:
    PyTorch's CPU kernel writes in order, so the last of duplicate targets wins)."""
    arrays, _ = O._grid_index(idx, d)
    target = np.ravel_multi_index(
        tuple(np.broadcast_to(a, idx.shape) for a in arrays), input._data.shape
    ).reshape(-1)
    order = np.arange(target.size)
    last = np.full(input._data.size, -1)
    np.maximum.at(last, target, order)
    wins = (last[target] == order).reshape(idx.shape)
    written = np.zeros(input._data.size, dtype=np.bool_)
    written[target] = True
    return written.reshape(input._data.shape), wins


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """input with src (or value) written at index along dim; the gradient reaches input
    where nothing was written, and src is gradient.gather(dim, index), as in PyTorch.
    Of duplicate targets the last write wins (PyTorch's CPU order)."""
    if src is not None and not isinstance(src, Tensor):
        value, src = src, None
    index = O._index_tensor(index, "scatter")
    d = _dim(dim, input.ndim, "scatter")
    idx = index._data
    if reduce is not None:
        if reduce != "add" or src is None:
            raise NotImplementedError(f"scatter(reduce={reduce!r}): only reduce='add' with src")
        return O.scatter_add(input, d, index, src)
    O._along_checks("gather", input, d, idx, src)
    written, wins = _scatter_mask(input, d, idx)
    if src is None:
        return O.where(tensor(written), _const(input, value), input)
    part = src if src._data.shape == idx.shape else src[tuple(slice(0, n) for n in idx.shape)]
    if not wins.all():  # losers add 0 to the value but still get the gathered gradient
        part = part * _const(part, wins) + (part - part.detach()) * _const(part, ~wins)
    kept = O.where(tensor(written), _const(input, 0), input)
    return O.scatter_add(kept, d, index, part)


def index_fill(input, dim, index, value):
    d = _dim(dim, input.ndim, "index_fill")
    mask = np.zeros(input._data.shape[d] if input.ndim else 1, dtype=np.bool_)
    mask[_t(index)._data.reshape(-1)] = True
    shape = [1] * input.ndim
    if input.ndim:
        shape[d] = -1
    v = value if isinstance(value, Tensor) else _const(input, value)
    return O.where(tensor(mask.reshape(shape)), v, input)


def index_copy(input, dim, index, source):
    d = _dim(dim, input.ndim, "index_copy")
    idx = _t(index)._data
    shape = [1] * input.ndim
    shape[d] = -1
    full = np.broadcast_to(
        idx.reshape(shape),
        tuple(source._data.shape[:d]) + (idx.size,) + tuple(source._data.shape[d + 1 :]),
    )
    return scatter(input, d, tensor(np.ascontiguousarray(full)), source)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    e = _t(elements)._data
    t = _t(test_elements)._data
    return tensor(np.isin(e, t, invert=invert))


def unique(
    input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None
):
    data = input._data
    res = np.unique(data, return_inverse=True, return_counts=True, axis=dim)
    values, inverse, counts = res
    out = [tensor(values)]
    if return_inverse:
        shape = data.shape if dim is None else (data.shape[dim],)
        out.append(tensor(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(tensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...) is not supported")
    data = input._data.reshape(-1)
    if data.size == 0:
        starts = np.zeros(0, dtype=np.int64)
    else:
        starts = np.flatnonzero(np.concatenate([[True], data[1:] != data[:-1]]))
    out = [tensor(data[starts])]
    if return_inverse:
        inv = np.cumsum(np.isin(np.arange(data.size), starts)) - 1
        out.append(tensor(inv.reshape(input._data.shape).astype(np.int64)))
    if return_counts:
        out.append(tensor(np.diff(np.append(starts, data.size)).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    seq = sorted_sequence._data
    vals = _t(input)._data
    side = side or ("right" if right else "left")
    dt = np.int32 if out_int32 else np.int64
    if seq.ndim == 1:
        return tensor(np.searchsorted(seq, vals, side=side).astype(dt))
    rows = [
        np.searchsorted(s, v, side=side)
        for s, v in zip(
            seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1]), strict=True
        )
    ]
    return tensor(np.stack(rows).reshape(vals.shape).astype(dt))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength: int = 0):
    w = None if weights is None else weights._data
    out = np.bincount(input._data, w, minlength)
    if w is None:
        return tensor(out.astype(np.int64))
    return tensor(out.astype(w.dtype if w.dtype.kind == "f" else np.float64))


def histc(input, bins: int = 100, min=0, max=0):
    d = input._data
    lo, hi = float(min), float(max)
    if lo == hi and d.size:
        lo, hi = float(d.min()), float(d.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts, _ = np.histogram(d, bins=bins, range=(lo, hi))
    return tensor(counts.astype(d.dtype))


def kron(input, other):
    nd = _bmax(input.ndim, other.ndim)
    a = O.reshape(input, (1,) * (nd - input.ndim) + tuple(input.shape))
    b = O.reshape(other, (1,) * (nd - other.ndim) + tuple(other.shape))
    a_shape, b_shape = a._data.shape, b._data.shape
    a = O.reshape(a, tuple(x for n in a_shape for x in (n, 1)))
    b = O.reshape(b, tuple(x for n in b_shape for x in (1, n)))
    return O.reshape(a * b, tuple(m * n for m, n in zip(a_shape, b_shape, strict=True)))


def cross(input, other, dim=None):
    shape = np.broadcast_shapes(input._data.shape, other._data.shape)
    if dim is None:
        dim = next((k for k, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise shape_error("cross", "no dimension of size 3 in input", input, other)
    d = _dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise shape_error(
            "cross",
            f"linalg.cross: inputs dimension {d} must have length 3. "
            f"Got {input.shape[d]} and {other.shape[d]}",
            input,
            other,
            cls=RuntimeError,
        )
    a, b = O.expand(input, shape), O.expand(other, shape)
    a0, a1, a2 = O.unbind(a, d)
    b0, b1, b2 = O.unbind(b, d)
    return O.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def block_diag(*tensors):
    from tracegrad.eager.nn.functional import pad

    mats = [O.reshape(t, (1, -1)) if t.ndim < 2 else t for t in map(_t, tensors)]
    if t_dtype := [m._data.dtype for m in mats]:
        dt = np.result_type(*t_dtype)
        mats = [m if m._data.dtype == dt else m.to(dt) for m in mats]
    total = sum(m._data.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        w = m._data.shape[1]
        rows.append(pad(m, (left, total - left - w)))
        left += w
    return O.cat(rows, 0)


def cdist(x1, x2, p: float = 2.0, compute_mode=None):
    diff = O.unsqueeze(x1, -2) - O.unsqueeze(x2, -3)
    return O.norm(diff, p, dim=-1)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    return O.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """PyTorch's formula: each operand divided by max(its 2-norm, eps), then the dot."""
    n1 = O.clamp(O.norm(x1, 2, dim=dim, keepdim=True), min=eps)
    n2 = O.clamp(O.norm(x2, 2, dim=dim, keepdim=True), min=eps)
    return O.sum((x1 / n1) * (x2 / n2), dim)


# ------------------------------------------------------------------ products


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    prod = O.bmm(batch1, batch2)
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return prod + _const(prod, np.zeros(()))
    return (input if beta == 1 else input * beta) + prod


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    prod = O.sum(O.bmm(batch1, batch2), 0)
    prod = prod if alpha == 1 else prod * alpha
    return prod if beta == 0 else (input if beta == 1 else input * beta) + prod


def addmv(input, mat, vec, *, beta=1, alpha=1):
    prod = O.mv(mat, vec)
    prod = prod if alpha == 1 else prod * alpha
    return prod if beta == 0 else (input if beta == 1 else input * beta) + prod


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    prod = O.outer(vec1, vec2)
    prod = prod if alpha == 1 else prod * alpha
    return prod if beta == 0 else (input if beta == 1 else input * beta) + prod


def matrix_power(input, n: int):
    """input @ input @ ... (n times; n = 0: the identity; n < 0: of the inverse)."""
    from tracegrad.eager import linalg as _linalg

    if n < 0:
        return matrix_power(_linalg.inv(input), -n)
    if n == 0:
        eye = np.broadcast_to(np.eye(input.shape[-1], dtype=input._data.dtype), input._data.shape)
        return tensor(eye.copy())
    out, base = None, input
    while n:
        if n & 1:
            out = base if out is None else O.matmul(out, base)
        n >>= 1
        if n:
            base = O.matmul(base, base)
    return out


def chain_matmul(*matrices):
    out = matrices[0]
    for m in matrices[1:]:
        out = O.mm(out, m)
    return out


def _einsum_parse(equation: str, operands) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            "einsum(): more operands were provided than specified in the equation"
            if len(operands) > len(terms)
            else "einsum(): fewer operands were provided than specified in the equation"
        )
    used = set(c for c in eq if c.isalpha())
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used)
    ell_len = 0
    for term, op in zip(terms, operands, strict=True):
        if "..." in term:
            ell_len = _bmax(ell_len, op.ndim - (len(term) - 3))
    ell = "".join(next(spare) for _ in range(ell_len))
    full = []
    for term, op in zip(terms, operands, strict=True):
        if "..." in term:
            k = op.ndim - (len(term) - 3)
            term = term.replace("...", ell[ell_len - k :])
        if len(term) != op.ndim:
            raise shape_error(
                "einsum",
                f"einsum(): the number of subscripts in the equation ({len(term)}) does not "
                f"match the number of dimensions ({op.ndim}) for operand "
                f"{len(full)}{'' if '...' in equation else ' and no ellipsis was given'}",
                op,
                cls=RuntimeError,
            )
        full.append(term)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for term in full:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return full, out


def _einsum_prepare(op: Tensor, term: str, keep: set) -> tuple[Tensor, str]:
    """Take repeated subscripts' diagonals and sum subscripts no one else needs."""
    while True:
        dup = next((c for c in term if term.count(c) > 1), None)
        if dup is None:
            break
        i = term.index(dup)
        j = term.index(dup, i + 1)
        op = O.diagonal(op, 0, i, j)  # the diagonal goes last
        term = term[:i] + term[i + 1 : j] + term[j + 1 :] + dup
    drop = [k for k, c in enumerate(term) if c not in keep]
    if drop:
        op = O.sum(op, tuple(drop))
        term = "".join(c for c in term if c in keep)
    return op, term


def _einsum_pair(a: Tensor, ta: str, b: Tensor, tb: str, keep: set) -> tuple[Tensor, str]:
    """Contract two operands with one (batched) matmul."""
    batch = [c for c in ta if c in tb and c in keep]
    contract = [c for c in ta if c in tb and c not in keep]
    only_a = [c for c in ta if c not in tb]
    only_b = [c for c in tb if c not in ta]
    size = {}
    for t, term in ((a, ta), (b, tb)):
        for c, n in zip(term, t._data.shape, strict=True):
            size[c] = _bmax(size.get(c, 1), n)

    def arrange(t, term, first, second):
        order = batch + first + second
        t = O.permute(t, *[term.index(c) for c in order]) if list(term) != order else t
        target = [size[c] for c in order]
        if list(t._data.shape) != target:  # size-1 batch dims broadcast
            t = O.expand(t, target)
        nb = len(batch)
        m = int(np.prod([size[c] for c in first]))
        k = int(np.prod([size[c] for c in second]))
        return O.reshape(t, tuple(target[:nb]) + (m, k))

    am = arrange(a, ta, only_a, contract)
    bm = arrange(b, tb, contract, only_b)
    out = O.matmul(am, bm)
    shape = tuple(size[c] for c in batch + only_a + only_b)
    return O.reshape(out, shape), "".join(batch + only_a + only_b)


def einsum(equation: str, *operands):
    """Einstein summation: repeated subscripts in one operand take a diagonal, subscripts
    that appear nowhere else are summed, and operands are contracted pairwise, left to
    right, each pair by one batched matmul (so the gradient is matmul's)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ops = [_t(o) for o in operands]
    terms, out = _einsum_parse(equation, ops)
    for c in out:
        if not any(c in t for t in terms):
            raise shape_error(
                "einsum",
                f"einsum(): output subscript {c} does not appear in the equation for any "
                "input operand",
                *ops,
                cls=RuntimeError,
            )
    pairs = list(zip(ops, terms, strict=True))

    def needed(skip: int) -> set:
        keep = set(out)
        for k, (_, t) in enumerate(pairs):
            if k != skip:
                keep |= set(t)
        return keep

    pairs = [_einsum_prepare(op, t, needed(k)) for k, (op, t) in enumerate(pairs)]
    while len(pairs) > 1:
        (a, ta), (b, tb) = pairs[0], pairs[1]
        rest = pairs[2:]
        keep = set(out)
        for _, t in rest:
            keep |= set(t)
        pairs = [_einsum_pair(a, ta, b, tb, keep), *rest]
    res, term = pairs[0]
    res, term = _einsum_prepare(res, term, set(out))
    if term != out:
        res = O.permute(res, *[term.index(c) for c in out]) if len(out) > 1 else res
    return res if res is not ops[0] else res.clone()


# ------------------------------------------------------------------ more (issue 26, part 2)


def copysign(input, other):
    """|input| with other's sign (gradient: sign(input) * sign(result) where input != 0)."""
    o = other._data if isinstance(other, Tensor) else np.asarray(other)
    sign = np.where(np.signbit(o), -1.0, 1.0)
    return O.abs(input) * _const(_float(input), sign)


def fmax(input, other):
    """maximum, with NaN losing to a number."""
    a, b = _t(input), _t(other)
    nan_a = tensor(np.isnan(a._data)) if a._data.dtype.kind == "f" else None
    out = O.maximum(a, b)
    return out if nan_a is None else O.where(nan_a, O.expand_as(b, out), out)


def fmin(input, other):
    a, b = _t(input), _t(other)
    nan_a = tensor(np.isnan(a._data)) if a._data.dtype.kind == "f" else None
    out = O.minimum(a, b)
    return out if nan_a is None else O.where(nan_a, O.expand_as(b, out), out)


def deg2rad(input):
    return _float(input) * (math.pi / 180.0)


def rad2deg(input):
    return _float(input) * (180.0 / math.pi)


def ldexp(input, other):
    return input * O.pow(_const(_float(input), 2.0), _t(other).to(_float(input).dtype))


def inner(input, other):
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return O.matmul(input, O.transpose(other, -1, -2) if other.ndim > 1 else other)


def vdot(input, other):
    """torch.vdot: the dot product with `input` conjugated (complex tensors)."""
    if input._data.dtype.kind == "c":
        input = input.conj()
    return O.dot(input, other)


def msort(input):
    return O.sort(input, 0).values


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest element along dim (1-based) and its index, through sort."""
    d = _dim(dim, _bmax(input.ndim, 1), "kthvalue")
    if input.ndim == 0:
        return _ValuesIndices(input.clone(), tensor(np.int64(0)))
    s = O.sort(input, d, stable=True)
    values, indices = O.select(s.values, d, k - 1), O.select(s.indices, d, k - 1)
    if keepdim:
        values, indices = O.unsqueeze(values, d), O.unsqueeze(indices, d)
    return _ValuesIndices(values, indices)


def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along dim (the smallest of ties) and the last index where
    it occurs, as PyTorch's CPU kernel."""
    d = _dim(dim, _bmax(input.ndim, 1), "mode")
    data = np.moveaxis(input._data if input.ndim else input._data.reshape(1), d, -1)
    rows = data.reshape(-1, data.shape[-1])
    idx = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        vals, counts = np.unique(row, return_counts=True)
        best = vals[np.argmax(counts)]
        idx[r] = np.flatnonzero(row == best)[-1]
    idx = idx.reshape(data.shape[:-1])
    index = tensor(np.expand_dims(idx, d) if input.ndim else idx.reshape(1))
    values = O.gather(input if input.ndim else O.reshape(input, (1,)), d, index)
    if not keepdim or input.ndim == 0:
        values, index = O.squeeze(values, d), O.squeeze(index, d)
    return _ValuesIndices(values, index)


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """Quantiles through sort (so the gradient reaches the two order statistics)."""
    x = O.reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else _dim(dim, input.ndim, "quantile")
    n = x._data.shape[d]
    qs = np.atleast_1d(q._data if isinstance(q, Tensor) else np.asarray(q, np.float64))
    if ((qs < 0) | (qs > 1)).any():
        raise shape_error("quantile", "quantile() q values must be in the range [0, 1]", input)
    s = O.sort(x, d).values
    outs = []
    for qv in qs:
        pos = qv * (n - 1)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        a, b = O.select(s, d, lo), O.select(s, d, hi)
        if interpolation == "lower":
            v = a
        elif interpolation == "higher":
            v = b
        elif interpolation == "nearest":
            v = O.select(s, d, int(np.round(pos)))
        elif interpolation == "midpoint":
            v = (a + b) * 0.5
        else:
            v = a + (b - a) * float(pos - lo)
        if keepdim:
            v = O.unsqueeze(v, d) if dim is not None else O.reshape(v, (1,) * input.ndim)
        outs.append(v)
    scalar_q = (
        not isinstance(q, Tensor) and np.ndim(q) == 0 or isinstance(q, Tensor) and q.ndim == 0
    )
    return outs[0] if scalar_q else O.stack(outs, 0)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    if np.isnan(input._data).any():
        raise NotImplementedError("nanquantile with NaN values is not supported by tracegrad.eager")
    return quantile(input, q, dim, keepdim, interpolation=interpolation)


def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights/aweights are not supported by tracegrad.eager")
    x = O.reshape(input, (1, -1)) if input.ndim == 1 else input
    n = x._data.shape[1]
    centered = x - O.mean(x, 1, keepdim=True)
    out = O.matmul(centered, O.transpose(centered, 0, 1)) / float(_bmax(n - correction, 0))
    return O.reshape(out, ()) if input.ndim == 1 else out


def corrcoef(input):
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = O.sqrt(O.diagonal(c))
    return O.clamp(c / O.unsqueeze(d, 1) / O.unsqueeze(d, 0), -1.0, 1.0)


def is_signed(self) -> bool:
    return self._data.dtype.kind in "fi"


def masked_scatter(input, mask, source):
    """input with the masked positions filled by source's elements in order."""
    m = np.broadcast_to(mask._data, input._data.shape)
    k = int(m.sum())
    taken = O.reshape(source, (-1,))[:k] if k else None
    if taken is None:
        return input.clone()
    spec_arrays = np.nonzero(m)
    from tracegrad.ops import table as _T

    spec = tuple(("array", i) for i in range(input.ndim))
    placed = apply_op(
        _T.index_add_zeros, (taken, *spec_arrays), {"spec": spec, "shape": input._data.shape}
    )
    return O.where(tensor(m), placed, input)


def index_put(input, indices, values, accumulate: bool = False):
    """input with input[indices] = values (or += with accumulate), out of place."""
    out = input.clone()
    if accumulate:
        idx = tuple(indices)
        from tracegrad.ops import table as _T

        arrays = [i._data if isinstance(i, Tensor) else np.asarray(i) for i in idx]
        spec = tuple(("array", i) for i in range(len(arrays))) + tuple(
            ("slice", 0, n, 1) for n in input._data.shape[len(arrays) :]
        )
        target = np.broadcast_shapes(*(a.shape for a in arrays)) + tuple(
            input._data.shape[len(arrays) :]
        )
        v = _t(values)
        v = O.expand(v, target) if tuple(v.shape) != target else v
        added = apply_op(
            _T.index_add_zeros, (v, *arrays), {"spec": spec, "shape": input._data.shape}
        )
        return input + added
    out[tuple(indices)] = values
    return out


def put(input, index, source, accumulate: bool = False):
    """input with its flattened elements at `index` set to (or, accumulating, increased
    by) `source`, out of place (PyTorch's Tensor.put; put_ is the in-place form)."""
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError(
            f"put_(): Expected a long tensor for index, but got "
            f"{getattr(index, 'dtype', type(index).__name__)}"
        )
    source = _t(source)
    if index._data.size != source._data.size:
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source._data.size}, index.numel() = {index._data.size}"
        )
    n = input._data.size
    flat_index = index._data.reshape(-1)
    if flat_index.size and (flat_index.min() < -n or flat_index.max() >= n):
        raise IndexError(f"put_(): index out of range for a tensor of {n} elements")
    flat = index_put(O.reshape(input, (-1,)), (flat_index,), O.reshape(source, (-1,)), accumulate)
    return O.reshape(flat, tuple(input._data.shape))


def scatter_reduce(input, dim, index, src, reduce: str, *, include_self: bool = True):
    """reduce 'sum' or 'mean' of src into input at index (PyTorch's include_self rule)."""
    if reduce not in ("sum", "mean"):
        raise NotImplementedError(f"scatter_reduce(reduce={reduce!r}): only 'sum' and 'mean'")
    d = _dim(dim, input.ndim, "scatter_reduce")
    written, _ = _scatter_mask(input, d, index._data)
    base = input if include_self else O.where(tensor(written), _const(input, 0), input)
    total = O.scatter_add(base, d, index, src)
    if reduce == "sum":
        return total
    counts = np.zeros(input._data.shape, np.float64)
    arrays, _ = O._grid_index(index._data, d)
    np.add.at(counts, tuple(np.broadcast_to(a, index._data.shape) for a in arrays), 1.0)
    counts = counts + (1.0 if include_self else 0.0)
    counts = np.where(counts == 0, 1.0, counts)
    if input._data.dtype.kind in "iu":
        return tensor(np.floor_divide(total._data, counts.astype(input._data.dtype)))
    return total / _const(total, counts)


def logspace(
    start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False
):
    from tracegrad.eager import dtypes as _dt

    npd = _dt.default_float() if dtype is None else _dt.to_numpy_dtype(dtype)
    out = tensor(np.power(base, np.linspace(float(start), float(end), int(steps))).astype(npd))
    return out.requires_grad_() if requires_grad else out


def seed() -> int:
    """Reseed the default generator from fresh entropy; returns the seed."""
    from tracegrad.eager.creation import manual_seed

    s = int(np.random.SeedSequence().entropy % (2**63))
    manual_seed(s)
    _SEED[0] = s
    return s


_SEED = [None]


def initial_seed() -> int:
    from tracegrad.eager import creation

    return _SEED[0] if _SEED[0] is not None else getattr(creation, "_seed", 0)


def get_rng_state():
    """The default generator's state as a uint8 tensor (NumPy's bit-generator state,
    pickled: it round-trips through set_rng_state, it is not PyTorch's byte layout)."""
    import pickle

    from tracegrad.eager import creation

    blob = pickle.dumps(creation._rng.bit_generator.state)
    return tensor(np.frombuffer(blob, np.uint8).copy())


def set_rng_state(new_state) -> None:
    import pickle

    from tracegrad.eager import creation

    state = pickle.loads(new_state._data.astype(np.uint8).tobytes())
    if not isinstance(state, dict) or "bit_generator" not in state:
        raise RuntimeError("set_rng_state: not a state from tracegrad.eager.get_rng_state()")
    creation._rng.bit_generator.state = state


# ------------------------------------------------------------------ scatters and misc


def _scatter_into(input, index, src):
    out = input.clone()
    out[index] = src
    return out


def select_scatter(input, src, dim: int, index: int):
    """input with input.select(dim, index) replaced by src (a clone written in place:
    the gradient reaches input outside the slice and src inside)."""
    d = _dim(dim, input.ndim, "select_scatter")
    return _scatter_into(input, (slice(None),) * d + (index,), src)


def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1):
    d = _dim(dim, input.ndim, "slice_scatter")
    return _scatter_into(input, (slice(None),) * d + (slice(start, end, step),), src)


def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    out = input.clone()
    O.diagonal(out, offset, dim1, dim2).copy_(src)
    return out


def split_with_sizes(input, split_sizes, dim: int = 0):
    return O.split(input, list(split_sizes), dim)


def renorm(input, p, dim: int, maxnorm):
    """Each slice along dim with p-norm above maxnorm scaled down to maxnorm."""
    d = _dim(dim, input.ndim, "renorm")
    others = tuple(k for k in range(input.ndim) if k != d)
    norms = O.norm(input, p, dim=others, keepdim=True)
    over = tensor(norms._data > maxnorm)
    scale = O.where(over, maxnorm / (norms + 1e-7), _const(norms, 1.0))
    return input * scale


def sum_to_size(input, *size):
    """input summed over the dims where `size` is 1 (or missing in front)."""
    size = _sizes(size)
    lead = input.ndim - len(size)
    out = O.sum(input, tuple(range(lead))) if lead else input
    dims = tuple(k for k, n in enumerate(size) if n == 1 and out.shape[k] != 1)
    return O.sum(out, dims, keepdim=True) if dims else out


def rsub(input, other, *, alpha=1):
    return other - input * alpha


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    d = _dim(dim, y.ndim, "trapezoid")
    n = y.shape[d]
    left, right = O.narrow(y, d, 0, n - 1), O.narrow(y, d, 1, n - 1)
    if x is None:
        return O.sum(left + right, d) * ((1.0 if dx is None else dx) / 2.0)
    dxs = O.narrow(x, -1 if x.ndim == 1 else d, 1, n - 1) - O.narrow(
        x, -1 if x.ndim == 1 else d, 0, n - 1
    )
    return O.sum((left + right) * dxs, d) / 2.0


def trapz(y, x=None, *, dx=None, dim: int = -1):
    return trapezoid(y, x, dx=dx, dim=dim)


def combinations(input, r: int = 2, with_replacement: bool = False):
    import itertools

    n = input.shape[0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    if idx.size == 0:
        return tensor(np.zeros((0, r), input._data.dtype))
    return O.stack([input[tensor(idx[:, k])] for k in range(r)], 1)


def _fill_diagonal_(self, fill_value, wrap: bool = False):
    """The main diagonal (all dims equal for ndim > 2) set to fill_value, in place; with
    wrap=True a tall matrix's diagonal restarts every cols + 1 rows (NumPy's and
    PyTorch's fill_diagonal_)."""
    shape = self._data.shape
    if self.ndim < 2 or (self.ndim > 2 and len(set(shape)) != 1):
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(shape, bool)
    if self.ndim == 2 and wrap and shape[0] > shape[1] + 1:
        flat = mask.reshape(-1)
        flat[:: shape[1] + 1] = True
        mask = flat.reshape(shape)
    else:
        k = min(shape)
        mask[(np.arange(k),) * self.ndim] = True
    return self.masked_fill_(tensor(mask), fill_value)


def _random_fill(name):
    def fill(self, *args, generator=None, **kwargs):
        from tracegrad.eager._tensor import check_inplace

        check_inplace(self)
        rng = _rng(generator)
        shape = self._data.shape
        if name == "exponential_":
            lambd = args[0] if args else kwargs.get("lambd", 1.0)
            v = rng.exponential(1.0 / lambd, shape)
        elif name == "log_normal_":
            mean = args[0] if args else kwargs.get("mean", 1.0)
            std = args[1] if len(args) > 1 else kwargs.get("std", 2.0)
            v = rng.lognormal(mean, std, shape)
        elif name == "cauchy_":
            median = args[0] if args else kwargs.get("median", 0.0)
            sigma = args[1] if len(args) > 1 else kwargs.get("sigma", 1.0)
            v = median + sigma * rng.standard_cauchy(shape)
        elif name == "geometric_":
            v = rng.geometric(args[0] if args else kwargs["p"], shape)
        else:  # random_(from=0, to=None): integers in [from, to)
            lo, hi = (0, args[0]) if len(args) == 1 else (args + (None, None))[:2]
            lo = kwargs.get("from", lo if lo is not None else 0)
            hi = kwargs.get("to", hi)
            if hi is None:
                kind = self._data.dtype
                hi = 2 ** (np.finfo(kind).nmant + 1) if kind.kind == "f" else np.iinfo(kind).max
            v = rng.integers(lo, hi, shape)
        return self._fill_values(np.asarray(v).astype(self._data.dtype))

    fill.__name__ = name
    return fill


# ------------------------------------------------------------------ random


def _rng(generator):
    from tracegrad.eager.creation import _rng_of

    return _rng_of(generator)


def bernoulli(input, p=None, *, generator=None):
    """1.0 with probability input (or p), else 0.0, in input's dtype; not differentiable."""
    probs = input._data if p is None else np.broadcast_to(np.asarray(p), input._data.shape)
    if ((probs < 0) | (probs > 1)).any():
        raise shape_error(
            "bernoulli", "Expected p_in >= 0 && p_in <= 1 to be true, but got false.", input
        )
    draws = _rng(generator).random(input._data.shape) < probs
    return tensor(draws.astype(input._data.dtype if input._data.dtype.kind == "f" else np.float32))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """mean + std * N(0, 1): differentiable in mean and std when they are tensors."""
    rng = _rng(generator)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        shape = tuple(_sizes((size,))) if size is not None else ()
        dt = get_default_dtype() if dtype is None else dtype
        out = tensor(rng.standard_normal(shape) * std + mean)
        return out.to(dt)
    ref = mean if isinstance(mean, Tensor) else std
    shape = np.broadcast_shapes(getattr(mean, "shape", ()), getattr(std, "shape", ()))
    if isinstance(std, Tensor) and (std._data < 0).any():
        raise shape_error("normal", "normal expects all elements of std >= 0.0", std)
    eps = _const(ref, rng.standard_normal(shape))
    return mean + std * eps


def poisson(input, generator=None):
    return tensor(_rng(generator).poisson(input._data).astype(input._data.dtype))


# ------------------------------------------------------------------ dtypes


def get_default_dtype():
    from tracegrad.eager import dtypes as _dt

    return _dt.get_default_dtype()


def set_default_dtype(d) -> None:
    """torch.set_default_dtype(torch.float64): Python floats, float factories (zeros,
    rand, arange of floats, ...) and new layers' parameters in that dtype."""
    from tracegrad.eager import dtypes as _dt

    _dt.set_default_dtype(d)


def is_floating_point(input) -> bool:
    return input._data.dtype.kind == "f"


def is_complex(input) -> bool:
    return input._data.dtype.kind == "c"


def is_nonzero(input) -> bool:
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input._data.reshape(-1)[0])


def promote_types(type1, type2):
    from tracegrad.eager import dtypes as _dt

    a, b = _dt.to_numpy_dtype(type1), _dt.to_numpy_dtype(type2)
    from tracegrad.eager._tensor import _promote_inferred

    return _dt.from_numpy_dtype(_promote_inferred(a, b))


def result_type(tensor1, tensor2):
    """The dtype of tensor1 + tensor2 under PyTorch's promotion (0-d tensors and Python
    numbers do not promote within their category)."""
    from tracegrad.eager import dtypes as _dt

    a = tensor1.detach() if isinstance(tensor1, Tensor) else tensor(tensor1)
    b = tensor2.detach() if isinstance(tensor2, Tensor) else tensor2
    return _dt.from_numpy_dtype((a + b)._data.dtype)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:  # fmt: skip
    """torch.set_printoptions (tracegrad/eager/formatting.py)."""
    from tracegrad.eager import formatting

    formatting.set_printoptions(precision, threshold, edgeitems, linewidth, profile, sci_mode)


class finfo:
    """torch.finfo(dtype): bits, eps, max, min, tiny (smallest_normal), resolution."""

    def __init__(self, type=None):
        from tracegrad.eager import dtypes as _dt

        f = np.finfo(np.float32 if type is None else _dt.to_numpy_dtype(type))
        self.bits = f.bits
        self.eps = float(f.eps)
        self.max = float(f.max)
        self.min = float(f.min)
        self.tiny = self.smallest_normal = float(f.tiny)
        self.resolution = float(f.resolution)
        self.dtype = str(f.dtype)


class iinfo:
    """torch.iinfo(dtype): bits, max, min."""

    def __init__(self, type):
        from tracegrad.eager import dtypes as _dt

        i = np.iinfo(_dt.to_numpy_dtype(type))
        self.bits, self.max, self.min, self.dtype = i.bits, int(i.max), int(i.min), str(i.dtype)


class memory_format:
    """torch.contiguous_format, channels_last, channels_last_3d, preserve_format: the
    layouts contiguous() and is_contiguous() take (_perm: the dims in memory order)."""

    def __init__(self, name: str, perm: tuple = ()):
        self._name, self._perm = name, perm

    def __repr__(self) -> str:
        return f"torch.{self._name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last", (0, 2, 3, 1))
channels_last_3d = memory_format("channels_last_3d", (0, 2, 3, 4, 1))


def _adjoint(self):
    """The conjugate transpose of the last two dims (a transpose for real tensors)."""
    if self.ndim < 2:
        raise shape_error(
            "adjoint",
            "tensor.adjoint() is only supported on matrices or batches of matrices.",
            self,
            cls=RuntimeError,
        )
    out = O.transpose(self, -2, -1)
    return out.conj() if out._data.dtype.kind == "c" else out


def _H(self):
    if self.ndim not in (0, 2):
        raise shape_error(
            "H",
            f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.",
            self,
            cls=RuntimeError,
        )
    out = O.transpose(self, 0, 1) if self.ndim == 2 else self
    return out.conj() if out._data.dtype.kind == "c" else out


# ------------------------------------------------------------------ Tensor methods

_METHODS = [
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh",
    "log2", "log10", "exp2", "erf", "erfc", "ceil", "trunc", "fix", "round", "frac", "fmod",
    "remainder", "floor_divide", "hypot", "logaddexp", "logaddexp2", "logit", "xlogy",
    "float_power", "sgn", "signbit", "heaviside", "nan_to_num", "isclose", "isposinf",
    "isneginf", "isreal", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "prod", "cumprod", "cummax", "cummin", "logcumsumexp", "median",
    "nansum", "nanmean", "aminmax", "count_nonzero", "trace", "dist", "diff",
    "tensor_split", "hsplit", "vsplit", "tile", "diag", "diag_embed", "diagflat", "fliplr",
    "flipud", "rot90", "take", "take_along_dim", "argwhere", "repeat_interleave", "scatter",
    "index_fill", "index_copy", "unique", "unique_consecutive", "bincount", "histc", "kron",
    "cross", "baddbmm", "addbmm", "addmv", "addr", "bernoulli", "is_complex", "is_nonzero",
    "lgamma", "digamma", "erfinv", "mvlgamma", "sinc", "copysign", "fmax", "fmin",
    "deg2rad", "rad2deg", "ldexp", "inner", "vdot", "msort", "kthvalue", "mode", "quantile",
    "nanquantile", "cov", "corrcoef", "is_signed", "masked_scatter", "index_put",
    "scatter_reduce", "select_scatter", "slice_scatter", "diagonal_scatter",
    "split_with_sizes", "renorm", "sum_to_size", "put",
]  # fmt: skip
_METHODS += ["arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh", "arctanh"]
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
arcsinh, arccosh, arctanh = asinh, acosh, atanh


def _inplace(fn):
    def method(self, *args, **kwargs):
        return inplace_composite(self, lambda t: fn(t, *args, **kwargs))

    method.__name__ = fn.__name__ + "_"
    return method


_INPLACE = [
    "tril", "triu", "scatter", "index_fill", "index_copy", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "atan2", "log2", "log10", "erf", "ceil", "trunc", "round", "frac",
    "fmod", "remainder", "hypot", "nan_to_num", "logit", "cumsum", "cumprod", "clamp_min",
    "clamp_max", "exp2", "lerp", "addcmul", "addcdiv", "baddbmm", "addmm", "copysign",
    "masked_scatter", "index_put", "scatter_reduce", "deg2rad", "rad2deg", "sgn", "xlogy",
    "floor_divide", "float_power", "erfinv", "lgamma", "digamma", "sinc", "hypot", "ldexp",
    "put",
]  # fmt: skip


def install_methods() -> None:
    g = globals()
    for name in _METHODS:
        setattr(Tensor, name, g[name])
    for name in _INPLACE:
        if hasattr(Tensor, name + "_") and name + "_" in Tensor.__dict__:
            continue
        fn = g.get(name) or getattr(O, name)
        setattr(Tensor, name + "_", _inplace(fn))
    Tensor.bernoulli_ = _bernoulli_
    Tensor.is_floating_point = lambda self: self._data.dtype.kind == "f"
    Tensor.unfold = unfold
    Tensor.adjoint = _adjoint
    Tensor.fill_diagonal_ = _fill_diagonal_
    for name in ("exponential_", "log_normal_", "cauchy_", "geometric_", "random_"):
        setattr(Tensor, name, _random_fill(name))
    for alias, target in (("divide_", "div_"), ("multiply_", "mul_"), ("subtract_", "sub_"),
                          ("true_divide_", "div_"), ("negative_", "neg_")):  # fmt: skip
        setattr(Tensor, alias, getattr(Tensor, target))
    for name in ("gt", "lt", "ge", "le", "eq", "ne", "logical_and", "logical_or", "logical_xor"):
        setattr(Tensor, name + "_", _compare_inplace(name))
    Tensor.logical_not_ = lambda self: self._fill_values(
        np.logical_not(self._data).astype(self._data.dtype)
    )
    Tensor.rsqrt_ = _inplace(O.rsqrt)
    Tensor.get_device = lambda self: -1
    Tensor.is_pinned = lambda self: False
    Tensor.data_ptr = lambda self: int(self._data.__array_interface__["data"][0])
    Tensor.cuda = _cuda
    Tensor.unsqueeze_ = _unsqueeze_
    Tensor.squeeze_ = _squeeze_
    Tensor.t_ = _t_
    Tensor.transpose_ = Tensor.swapdims_ = Tensor.swapaxes_ = _transpose_
    from tracegrad.eager import linalg as _linalg

    for name in ("det", "logdet", "slogdet", "inverse", "pinverse", "cholesky_solve",
                 "triangular_solve", "svd", "qr"):  # fmt: skip
        setattr(Tensor, name, _linalg.TOP_LEVEL[name])
    Tensor.cholesky = lambda self, upper=False: _linalg.TOP_LEVEL["cholesky"](self, upper)
    Tensor.matrix_power = lambda self, n: matrix_power(self, n)
    Tensor.polygamma = lambda self, n: polygamma(n, self)
    Tensor.mH = property(_adjoint)
    Tensor.H = property(_H)
    Tensor.as_strided = as_strided
    Tensor.positive = lambda self: self
    Tensor.ravel = lambda self: O.reshape(self, (-1,))
    Tensor.is_same_size = lambda self, other: tuple(self.shape) == tuple(other.shape)
    Tensor.half = lambda self: self.to(np.float16)
    Tensor.short = lambda self: self.to(np.int16)
    Tensor.char = lambda self: self.to(np.int8)
    Tensor.byte = lambda self: self.to(np.uint8)
    Tensor.is_cuda = False
    Tensor.is_cpu = True
    Tensor.is_sparse = False
    Tensor.is_quantized = False
    Tensor.is_meta = False
    Tensor.nbytes = property(lambda self: int(self._data.nbytes))
    Tensor.itemsize = property(lambda self: int(self._data.itemsize))


def _compare_inplace(name):
    """x.gt_(y): x's memory holds (x > y) in x's dtype (no gradient, as PyTorch)."""

    def op(self, other):
        from tracegrad.eager._tensor import check_inplace

        check_inplace(self)
        o = other._data if isinstance(other, Tensor) else other
        fn = {"gt": np.greater, "lt": np.less, "ge": np.greater_equal, "le": np.less_equal,
              "eq": np.equal, "ne": np.not_equal, "logical_and": np.logical_and,
              "logical_or": np.logical_or, "logical_xor": np.logical_xor}[name]  # fmt: skip
        return self._fill_values(fn(self._data, o).astype(self._data.dtype))

    op.__name__ = name + "_"
    return op


def _cuda(self, device=None, non_blocking: bool = False, memory_format=None):
    raise AssertionError("Torch not compiled with CUDA enabled")


def _bernoulli_(self, p=0.5, *, generator=None):
    from tracegrad.eager._tensor import check_inplace

    check_inplace(self)
    draws = _rng(generator).random(self._data.shape) < (p._data if isinstance(p, Tensor) else p)
    return self._fill_values(draws.astype(self._data.dtype))


# ------------------------------------------------------------------ in-place layout methods


def _inplace_view(self, fn, name: str, node: str | None = None):
    """unsqueeze_, squeeze_, t_, transpose_, swapdims_: self takes the view's shape and
    history (PyTorch's UnsqueezeBackward1, ...), the version counter moves on. A view
    also takes the new view's remake chain from its base."""
    from tracegrad.eager._tensor import check_inplace

    check_inplace(self)
    out = fn(self)
    if self._base is not None:
        if out._base is not self._base or "_view" not in out.__dict__:
            raise NotImplementedError(f"{name}: this view cannot change shape in place")
        ops, version = out.__dict__["_view"]
        if node is not None and ops:  # the remade node carries the in-place op's name
            ops = (*ops[:-1], (*ops[-1][:3], node))
        self.__dict__["_view"] = [ops, version]
    self._data = out._data
    if out._grad_fn is not None:
        if node is not None and hasattr(out._grad_fn, "_name"):
            out._grad_fn._name = node  # PyTorch's in-place overload's node
        self._grad_fn = out._grad_fn
        self._requires_grad = out._requires_grad
    self._counter[0] += 1
    return self


def _unsqueeze_(self, dim):
    return _inplace_view(self, lambda t: O.unsqueeze(t, dim), "unsqueeze_", "UnsqueezeBackward1")


def _squeeze_(self, dim=None):
    node = "SqueezeBackward3" if dim is None else "SqueezeBackward4"
    return _inplace_view(self, lambda t: O.squeeze(t, dim), "squeeze_", node)


def _t_(self):
    return _inplace_view(self, O.t, "t_", "TBackward1")


def _transpose_(self, dim0, dim1):
    return _inplace_view(
        self, lambda t: O.transpose(t, dim0, dim1), "transpose_", "TransposeBackward1"
    )


# ------------------------------------------------------------------ layout: unfold, as_strided


def unfold(self, dimension: int, size: int, step: int):
    """Windows of `size` along `dimension`, `step` apart, as a new last dim: a view, as
    PyTorch's Tensor.unfold (writes go through to the tensor where windows do not
    overlap; overlapping windows are read-only); the gradient sums overlapping windows."""
    nd = _bmax(self.ndim, 1)
    d = _dim(dimension, nd, "unfold")
    n = self._data.shape[d] if self.ndim else 1
    if size > n:
        raise shape_error(
            "unfold",
            f"maximum size for tensor at dimension {d} is {n} but size is {size}",
            self,
            cls=RuntimeError,
        )
    if step <= 0:
        raise shape_error("unfold", f"step is {step} but must be > 0", self, cls=RuntimeError)
    x = O.reshape(self, (1,)) if self.ndim == 0 else self
    out = apply_op(T.unfold, (x,), {"dimension": d, "size": int(size), "step": int(step)})
    return O.reshape(out, (size,)) if self.ndim == 0 else out


def as_strided(self, size, stride, storage_offset=None):
    """PyTorch's as_strided over this tensor's contiguous storage (elements in C order,
    starting at the tensor's own storage offset): a view, so writes reach the tensor
    where no two elements share memory; the gradient sums the elements read more than
    once."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise shape_error(
            "as_strided", "mismatch in length of strides and shape", self, cls=RuntimeError
        )
    if not self.is_contiguous():
        raise shape_error(
            "as_strided",
            "as_strided of a non-contiguous tensor reads PyTorch's storage layout, which "
            "tracegrad.eager does not model: call .contiguous() first",
            self,
            cls=NotImplementedError,
        )
    if any(s < 0 for s in stride):
        raise shape_error(
            "as_strided",
            "as_strided: Negative strides are not supported at the moment",
            self,
            cls=RuntimeError,
        )
    offset = 0 if storage_offset is None else int(storage_offset)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if math.prod(size) and last >= self.numel():
        raise shape_error(
            "as_strided",
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{offset}, and itemsize {self._data.itemsize} requiring a storage size of "
            f"{(last + 1) * self._data.itemsize} are out of bounds for storage of "
            f"size {self.numel() * self._data.itemsize}",
            self,
            cls=RuntimeError,
        )
    flat = O.reshape(self, (-1,))
    return apply_op(T.as_strided, (flat,), {"size": size, "stride": stride, "offset": offset})


def _window_write_back(backward, view_shape_of):
    """How an in-place change of an unfold/as_strided view goes back into its base
    (CopySlices): the elements the view covers are replaced (its windows do not
    overlap: an overlapping view is read-only)."""

    def inverse(attrs, in_shape):
        extra = {"shape": tuple(in_shape)} if backward is T.unfold_backward else {}
        if backward is T.as_strided_backward:
            extra = {"length": int(in_shape[0])}
        covered = backward.impl(np.ones(view_shape_of(attrs, in_shape)), **attrs, **extra)
        return covered > 0, backward, dict(attrs, **extra)

    return inverse


VIEW_SCATTERS[T.unfold] = _window_write_back(
    T.unfold_backward,
    lambda a, shape: T._unfold_shape(tuple(shape), a["dimension"], a["size"], a["step"]),
)
VIEW_SCATTERS[T.as_strided] = _window_write_back(T.as_strided_backward, lambda a, _: a["size"])


install_methods()

__all__ = (
    [
        n
        for n, v in list(globals().items())
        if (callable(v) or isinstance(v, type))
        and getattr(v, "__module__", None) == __name__
        and not n.startswith("_")
        and n not in ("install_methods", "unfold", "as_strided")
    ]
    + ["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]
    + ["arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh", "arctanh", "as_strided"]
)
