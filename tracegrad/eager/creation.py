"""Tensor constructors: zeros, ones, full, empty, arange, rand, randn, ..."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager import dtypes as _dt
from tracegrad.eager._tensor import (
    REQUIRES_GRAD_DTYPE_MESSAGE,
    Tensor,
    requires_grad_message,
    tensor,
)
from tracegrad.eager.grad_mode import STATE

_rng = np.random.default_rng()


def manual_seed(seed: int):
    """Seed rand/randn/nn init (NumPy's generator: same seed, same numbers; not PyTorch's)."""
    global _rng
    capture_hooks.graph_break("manual_seed() inside a compiled function reseeds at trace time")
    _rng = np.random.default_rng(int(seed))
    return _rng


def generator() -> np.random.Generator:
    """The default generator; inside a capture, a stand-in whose draws are graph inputs
    drawn from this generator on every call, in program order (eager mode's stream)."""
    if capture_hooks.ACTIVE[0] and capture_hooks.current() is not None:
        return CapturedGenerator(None)
    return _rng


class CapturedGenerator:
    """What `generator()` is inside a capture: each draw (`random`, `standard_normal`,
    `uniform`, `normal`, `integers`, `permutation`, ...) becomes a graph input that every
    call of the compiled function draws from the real generator (the default one as it
    is then, after any manual_seed, or `source`), so compiled code consumes the stream
    exactly as eager code does."""

    def __init__(self, source):
        self.source = source  # None: the default generator at call time

    def __getattr__(self, method: str):
        def draw(*args, **kwargs):
            return capture_hooks.random_draw(method, args, kwargs, self.source)

        return draw


def draw_now(source, method: str, args: tuple, kwargs: dict) -> np.ndarray:
    """One draw from the default generator (source None) or `source`, as eager mode does."""
    rng = _rng if source is None else source
    return np.asarray(getattr(rng, method)(*args, **kwargs))


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _check_device(device) -> None:
    if device is not None:
        from tracegrad.eager.compat import check_device

        check_device(device)


def _rng_of(gen) -> np.random.Generator:
    if gen is None:
        return generator()
    rng = getattr(gen, "_np", gen)
    if capture_hooks.ACTIVE[0] and capture_hooks.current() is not None:
        return CapturedGenerator(rng)
    return rng


def _finish(arr: np.ndarray, requires_grad: bool) -> Tensor:
    t = Tensor._wrap(arr)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(requires_grad_message(REQUIRES_GRAD_DTYPE_MESSAGE, arr))
        t._requires_grad = True
    if STATE.inference:
        t._inference = True
    return t


def _np_dtype(dtype, default=None) -> np.dtype:
    """dtype, else `default`, else the default float dtype (torch.set_default_dtype)."""
    if dtype is not None:
        return _dt.to_numpy_dtype(dtype)
    return _dt.default_float() if default is None else np.dtype(default)


def zeros(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """>>> import tracegrad.eager as torch; torch.zeros(2)
    tensor([0., 0.])"""
    _check_device(device)
    return _finish(np.zeros(_shape(size), _np_dtype(dtype)), requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    return _finish(np.ones(_shape(size), _np_dtype(dtype)), requires_grad)


def empty(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    return _finish(np.zeros(_shape(size), _np_dtype(dtype)), requires_grad)


def full(size, fill_value, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    if dtype is None:
        default = (
            np.bool_
            if isinstance(fill_value, bool)
            else (np.int64 if isinstance(fill_value, int) else _dt.default_float())
        )
    else:
        default = None
    return _finish(np.full(_shape((size,)), fill_value, _np_dtype(dtype, default)), requires_grad)


def eye(
    n: int, m: int | None = None, dtype=None, requires_grad: bool = False, device=None
) -> Tensor:
    _check_device(device)
    return _finish(np.eye(n, m, dtype=_np_dtype(dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """>>> import tracegrad.eager as torch; torch.arange(3), torch.arange(0, 1, 0.5)
    (tensor([0, 1, 2]), tensor([0.0000, 0.5000]))"""
    _check_device(device)
    if end is None:
        start, end = 0, start
    is_float = any(isinstance(v, float) for v in (start, end, step))
    default = _dt.default_float() if is_float else np.int64
    arr = np.arange(start, end, step, dtype=np.float64 if is_float else np.int64)
    return _finish(arr.astype(_np_dtype(dtype, default)), requires_grad)


def linspace(
    start, end, steps: int, dtype=None, requires_grad: bool = False, device=None
) -> Tensor:
    _check_device(device)
    return _finish(np.linspace(start, end, steps).astype(_np_dtype(dtype)), requires_grad)


def rand(*size, dtype=None, requires_grad: bool = False, generator=None, device=None) -> Tensor:
    _check_device(device)
    rng, shape, d = _rng_of(generator), _shape(size), _np_dtype(dtype)
    if d.kind == "c":  # PyTorch: real and imaginary parts each uniform on [0, 1)
        return _finish((rng.random(shape) + 1j * rng.random(shape)).astype(d), requires_grad)
    return _finish(rng.random(shape).astype(d), requires_grad)


def randn(*size, dtype=None, requires_grad: bool = False, generator=None, device=None) -> Tensor:
    _check_device(device)
    rng, shape, d = _rng_of(generator), _shape(size), _np_dtype(dtype)
    if d.kind == "c":  # PyTorch: unit variance, half of it in each part
        parts = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return _finish((parts * np.sqrt(0.5)).astype(d), requires_grad)
    return _finish(rng.standard_normal(shape).astype(d), requires_grad)


def randint(low, high=None, size=(), dtype=None, generator=None, device=None) -> Tensor:
    _check_device(device)
    if isinstance(high, (tuple, list)):  # randint(high, size), as PyTorch's overload
        if size != ():
            raise TypeError("randint(): size given twice (randint(high, size, size=...))")
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if isinstance(size, (int, np.integer)):
        raise TypeError(
            f"randint(): argument 'size' must be tuple of ints, not {type(size).__name__}"
        )
    return _finish(
        _rng_of(generator).integers(low, high, size=tuple(size)).astype(_np_dtype(dtype, np.int64)),
        False,
    )


def randperm(n: int, generator=None, dtype=None, device=None) -> Tensor:
    _check_device(device)
    return _finish(_rng_of(generator).permutation(n).astype(np.int64), False)


def _like(x: Tensor, dtype) -> tuple:
    return x._data.shape, (x._data.dtype if dtype is None else _dt.to_numpy_dtype(dtype))


def zeros_like(input: Tensor, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    shape, d = _like(input, dtype)
    return _finish(np.zeros(shape, d), requires_grad)


def ones_like(input: Tensor, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    shape, d = _like(input, dtype)
    return _finish(np.ones(shape, d), requires_grad)


def full_like(
    input: Tensor, fill_value, dtype=None, requires_grad: bool = False, device=None
) -> Tensor:
    _check_device(device)
    shape, d = _like(input, dtype)
    return _finish(np.full(shape, fill_value, d), requires_grad)


def empty_like(input: Tensor, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    return zeros_like(input, dtype, requires_grad)


def rand_like(input: Tensor, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    shape, d = _like(input, dtype)
    return _finish(_rng.random(shape).astype(d), requires_grad)


def randn_like(input: Tensor, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    _check_device(device)
    shape, d = _like(input, dtype)
    return _finish(_rng.standard_normal(shape).astype(d), requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array` (writes show through both ways)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _dt.from_numpy_dtype(array.dtype)
    return Tensor._wrap(array)


def as_tensor(data: Any, dtype=None, device=None) -> Tensor:
    _check_device(device)
    if isinstance(data, Tensor) and dtype is None:
        return data
    if isinstance(data, np.ndarray) and (dtype is None or _dt.to_numpy_dtype(dtype) == data.dtype):
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype)


def numel(input: Tensor) -> int:
    return input.numel()


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def clone(input: Tensor) -> Tensor:
    return input.clone()


def detach(input: Tensor) -> Tensor:
    return input.detach()
