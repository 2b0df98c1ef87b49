"""The primitive: one object per op that serves eager mode, tracing and NumPy.

A `Primitive` holds, side by side:
  - `impl`: the NumPy implementation, `impl(*arrays, **attrs) -> ndarray`;
  - `shape_rule`: abstract evaluation, `shape_rule(*avals, **attrs) -> Aval`;
  - `vjps`: one vector-Jacobian rule per input, written in tracegrad ops,
    `vjp_i(g, out, *inputs, **attrs) -> cotangent` (None: no gradient);
  - `jvp`: the forward-mode rule, `jvp(primals, tangents, out, **attrs) ->
    tangent` (None tangents are zero); without one, `tracegrad.forward.jvp_rule` derives it;
  - `torch_name`: the name of the eager backward node (PyTorch's);
  - `saves`: which values the eager node keeps for backward (version checks);
  - `codegen`: how the code generator emits it (see tracegrad.codegen).

`bind(prim, *args, **attrs)` applies a primitive to values of any kind. Each
kind of value (eager Tensor, tracer, ...) registers a handler; plain arrays and
Python scalars fall through to `impl`. Because vjp rules call `bind` too, the
same rule runs eagerly, records IR while tracing, and nests for grad-of-grad.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class TracegradError(Exception):
    """Base class for errors that tracegrad raises about the user's program."""


class ShapeError(TracegradError, ValueError):
    """An op received operands whose shapes do not fit together."""


class DTypeError(TracegradError, TypeError):
    """An op received operands of a dtype it does not accept."""


class IndexTypeError(DTypeError, IndexError):
    """An index array of a non-integer dtype (NumPy and PyTorch raise IndexError)."""


class ArgumentError(TracegradError, TypeError):
    """An op received something that is not an array (None, a string, ...)."""


class OutOfRangeError(ShapeError, IndexError):
    """An index (or an entry of an index array) lies outside the axis it indexes.

    Compiled functions meet index arrays only at run time, so this is raised
    when the kernel runs, never from inside generated code."""


class Aval(NamedTuple):
    """Abstract value: what the shape rule knows about an operand."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{dtype_short(self.dtype)}[{','.join(map(str, self.shape))}]"


_SHORT = {
    "float32": "f32",
    "float64": "f64",
    "int64": "i64",
    "int32": "i32",
    "bool": "bool",
    "float16": "f16",
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "complex64": "c64",
    "complex128": "c128",
}


def dtype_short(dtype: Any) -> str:
    name: str = np.dtype(dtype).name
    return _SHORT.get(name, name)


@dataclass(eq=False)
class Primitive:
    name: str
    impl: Callable[..., Any]
    shape_rule: Callable[..., Aval]
    vjps: tuple[Any, ...] = ()
    # forward mode: jvp(primals, tangents, out, **attrs) -> tangent of out, in tracegrad
    # ops; a None tangent is zero. None here: derived from `vjps` (tracegrad.forward.jvp_rule).
    jvp: Any = None
    torch_name: Any = None  # str, or callable(*args, **attrs) -> str
    saves: tuple[int | str, ...] = ()  # input indices and/or "out"
    # How the eager node mirrors PyTorch's own (saving policy and display, not derivatives):
    saves_by_call: Any = None  # args -> saves, where the call decides (PowBackward1/2)
    save_only_if_needed: Any = None  # {i: j}: operand i is kept only if operand j needs grad
    torch_visible: Any = None  # args -> the operands PyTorch shows in next_functions
    saves_scalars: bool = False  # a Python scalar operand is kept as a (wrapped) tensor
    codegen: Any = None
    kind: str = "other"  # "elementwise", "reduction", "shape", "matmul", "index", "other"
    nondiff: bool = False  # outputs carry no gradient (comparisons, argmax, ...)
    # vmap: rule(args, batch_dims, **attrs) -> (out, out_batch_dim); None: the default
    # for `kind` in tracegrad.batching, else a per-node loop (tracegrad/batching.py)
    batch_rule: Any = None

    def __call__(self, *args: Any, **attrs: Any) -> Any:
        return bind(self, *args, **attrs)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"

    def node_name(self, *args: Any, **attrs: Any) -> str:
        """PyTorch's name for the eager backward node of this call."""
        tn = self.torch_name
        if callable(tn):
            return str(tn(*args, **attrs))
        return str(tn) if tn else (self.name.capitalize() + "Backward0")


REGISTRY: dict[str, Primitive] = {}


def primitive(name: str, **fields: Any) -> Primitive:
    """Define and register a primitive. Each name is defined once."""
    if name in REGISTRY:
        raise ValueError(f"primitive {name!r} is defined twice")
    prim = Primitive(name=name, **fields)
    REGISTRY[name] = prim
    return prim


# ---------------------------------------------------------------- value kinds
# A value kind is a class plus a handler `handler(prim, args, attrs)`. The kind
# with the highest priority among the arguments handles the call.
_KINDS: dict[type, tuple[int, Callable[..., Any]]] = {}


def register_value_kind(cls: type, priority: int, handler: Callable[..., Any]) -> None:
    _KINDS[cls] = (priority, handler)


def _kind_of(value: Any) -> tuple[int, Callable[..., Any]] | None:
    entry = _KINDS.get(type(value))
    if entry is None and not isinstance(value, (np.ndarray, float, int, bool, np.generic)):
        for cls, e in _KINDS.items():
            if isinstance(value, cls):
                return e
    return entry


_PLAIN_TYPES = frozenset({np.ndarray, float, int, bool, complex})


def bind(prim: Primitive, *args: Any, **attrs: Any) -> Any:
    """Apply `prim` to `args`, dispatching on the kind of value."""
    best: tuple[int, Callable[..., Any]] | None = None
    plain = True
    for a in args:
        if type(a) in _PLAIN_TYPES:  # fast path: arrays and Python scalars need no dispatch
            continue
        plain = False
        e = _kind_of(a)
        if e is not None and (best is None or e[0] > best[0]):
            best = e
    if best is not None:
        return best[1](prim, args, attrs)
    if plain:  # (eager backward runs its vjp rules here, so this path is hot)
        try:
            return prim.impl(*args, **attrs)
        except Exception as exc:
            unboxed = unbox_object_arrays(args)
            if unboxed is not None:  # np.array([x, 2 * x]) of traced values
                return bind(prim, *unboxed, **attrs)
            if isinstance(exc, TracegradError):
                raise
            # else numpy_apply re-runs it and explains the failure
    return numpy_apply(prim, args, attrs)


def unbox_object_array(value: Any) -> Any:
    """An object array holding values of a registered kind (np.array([x, 2 * x]) of
    tracers gives one: NumPy's array() cannot be overridden) as one value of that
    kind, built by tracegrad.array; None if `value` is not such an array."""
    if type(value) is not np.ndarray or value.dtype != object or value.size == 0:
        return None
    if not any(type(v) in _KINDS or _kind_of(v) is not None for v in value.flat):
        return None
    from tracegrad.ops import api

    return api.array(value.tolist())


def unbox_object_arrays(args: tuple[Any, ...]) -> list[Any] | None:
    """`args` with object arrays of tracers (or tensors) unboxed; None if there were none."""
    out, changed = list(args), False
    for i, a in enumerate(args):
        unboxed = unbox_object_array(a)
        if unboxed is not None:
            out[i], changed = unboxed, True
    return out if changed else None


# NumPy reduces an object array with Python comparisons (`bool(a >= b)`, which a
# traced comparison refuses), and __array_function__ never sees its elements, so
# np.max(np.array([x, 2 * x])) cannot reach tracegrad by NumPy's protocols. Once a
# trace starts, the three private helpers NumPy's functions call
# (fromnumeric._wrapreduction[_any_all] and _wrapfunc, and _methods._mean/_var/_std) are
# wrapped: an object array of traced values is unboxed and the public function
# called again on it, which dispatches to the traced op; every other call goes to
# the original unchanged. The public functions stay NumPy's own objects (Numba
# types np.max by identity: replacing it broke every njit function using it).
_REDUCTIONS = frozenset({"max", "min", "any", "all"})  # by _wrapreduction's `method`
_WRAPPED_METHODS = frozenset({"argmax", "argmin", "argsort"})  # by _wrapfunc's
_ROUTED: dict[tuple[Any, str], Callable[..., Any]] = {}  # (module, name) -> NumPy's original


def _traced_unboxed(a: Any) -> Any:
    """The traced value an object array (or a list/tuple) of tracers stands for; None
    otherwise, cheaply for plain arrays (eager tensors keep NumPy's element-wise
    path, which their bool() supports)."""
    kind = type(a)
    if kind is np.ndarray:
        if a.dtype.kind != "O" or a.size == 0 or not any(_is_traced(v) for v in a.flat):
            return None
        return unbox_object_array(a)
    if (
        (kind is list or kind is tuple)
        and 0 < len(a) <= _LIST_LIMIT
        and any(_is_traced(v) for v in a)
    ):  # np.max([x[0], 2 * x[1]])
        from tracegrad.ops import api

        return api.array(list(a))
    return None


def _is_traced(value: Any) -> bool:
    """A value of a registered kind that NumPy dispatches to (a tracer)."""
    return type(value) in _KINDS and hasattr(type(value), "__array_function__")


_LIST_LIMIT = 1024  # longer lists are not scanned for traced values


def _route(module: Any, name: str, make: Callable[..., Any]) -> None:
    original = getattr(module, name, None)
    if original is not None and (module, name) not in _ROUTED:
        _ROUTED[(module, name)] = original
        setattr(module, name, make(original))


def _traced_reduction(
    obj: Any, method: str, axis: Any, out: Any, kwargs: dict[str, Any]
) -> tuple[Any] | None:
    """np.<method> of the traced value `obj` stands for, or None (NumPy's path)."""
    unboxed = _traced_unboxed(obj) if method in _REDUCTIONS else None
    if unboxed is None:
        return None
    passed = {k: v for k, v in kwargs.items() if v is not np._NoValue}
    if out is not None:
        passed["out"] = out
    return (getattr(np, method)(unboxed, axis=axis, **passed),)


def _routed_reduction(original: Callable[..., Any]) -> Callable[..., Any]:
    def _wrapreduction(
        obj: Any, ufunc: Any, method: str, axis: Any, dtype: Any, out: Any, **kwargs: Any
    ) -> Any:
        if type(obj) is not np.ndarray or obj.dtype.kind == "O":  # (the hot path skips)
            traced = _traced_reduction(obj, method, axis, out, kwargs)
            if traced is not None:
                return traced[0]
        return original(obj, ufunc, method, axis, dtype, out, **kwargs)

    return _wrapreduction


def _routed_any_all(original: Callable[..., Any]) -> Callable[..., Any]:
    def _wrapreduction_any_all(
        obj: Any, ufunc: Any, method: str, axis: Any, out: Any, **kwargs: Any
    ) -> Any:
        if type(obj) is not np.ndarray or obj.dtype.kind == "O":
            traced = _traced_reduction(obj, method, axis, out, kwargs)
            if traced is not None:
                return traced[0]
        return original(obj, ufunc, method, axis, out, **kwargs)

    return _wrapreduction_any_all


def _routed_method(original: Callable[..., Any]) -> Callable[..., Any]:
    def _wrapfunc(obj: Any, method: str, *args: Any, **kwds: Any) -> Any:
        if type(obj) is np.ndarray and obj.dtype.kind != "O":  # the hot path
            return original(obj, method, *args, **kwds)
        unboxed = _traced_unboxed(obj) if method in _WRAPPED_METHODS else None
        if unboxed is None:
            return original(obj, method, *args, **kwds)
        # NumPy passes its defaults (kind=None, stable=None) that the traced op lacks
        return getattr(np, method)(
            unboxed, *args, **{k: v for k, v in kwds.items() if v is not None}
        )

    return _wrapfunc


def _routed_statistic(name: str) -> Callable[..., Any]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def statistic(a: Any, *args: Any, **kwargs: Any) -> Any:
            if type(a) is np.ndarray and a.dtype.kind != "O":  # the hot path
                return original(a, *args, **kwargs)
            unboxed = _traced_unboxed(a)
            if unboxed is None:
                return original(a, *args, **kwargs)
            return getattr(np, name)(unboxed, *args, **kwargs)

        return statistic

    return make


def route_object_array_reductions() -> None:
    """Make np.max/min/amax/amin/any/all/argmax/argmin/argsort/mean/var/std of an
    object array of traced values (np.array([x, 2 * x])) the traced op. Idempotent;
    a NumPy without these private helpers keeps its behaviour. Called when a trace
    starts; then, in user code (tracegrad's own modules never build object arrays),
    `tg.grad(lambda x: np.max(np.array([x[0], 3 * x[1]])))(np.array([1.0, 2.0]))`
    is `array([0., 3.])` (tests/compile/test_peer_gaps.py).

    >>> route_object_array_reductions()  # idempotent
    >>> from numpy._core import fromnumeric
    >>> fromnumeric._wrapreduction.__module__
    'tracegrad.ops.core'
    """
    if _ROUTED:
        return
    try:
        from numpy._core import _methods, fromnumeric
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core import _methods, fromnumeric  # type: ignore[attr-defined,no-redef]
        except ImportError:
            return
    _route(fromnumeric, "_wrapreduction", _routed_reduction)
    _route(fromnumeric, "_wrapreduction_any_all", _routed_any_all)  # NumPy >= 2.3
    _route(fromnumeric, "_wrapfunc", _routed_method)
    for name in ("mean", "var", "std"):
        _route(_methods, f"_{name}", _routed_statistic(name))


# Calling a primitive IS bind (no extra frame on this hot path).
Primitive.__call__ = bind  # type: ignore[method-assign,assignment]


def numpy_apply(prim: Primitive, args: tuple[Any, ...], attrs: dict[str, Any]) -> Any:
    arrays = [as_operand(a, prim) for a in args]
    try:
        return prim.impl(*arrays, **attrs)
    except TracegradError:
        raise
    except Exception as exc:  # re-check with the shape rule for a clear message
        prim.shape_rule(*[aval_of(a) for a in arrays], **attrs)
        raise op_error(prim, [aval_of(a) for a in arrays], str(exc)) from exc


def as_operand(value: Any, prim: Primitive | None = None) -> Any:
    """Arrays stay arrays, Python scalars stay weakly typed scalars."""
    if isinstance(value, (np.ndarray, float, int, bool, complex, np.generic)):
        return value
    if value is None or isinstance(value, str):
        name = prim.name if prim is not None else "op"
        raise ArgumentError(
            f"{name}: expected an array, got {type(value).__name__} {value!r}"
            + user_location_suffix()
        )
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise ShapeError(
            f"cannot make an array from {type(value).__name__}: {exc}" + user_location_suffix()
        ) from None
    if arr.dtype == object:
        name = prim.name if prim is not None else "op"
        raise ArgumentError(
            f"{name}: cannot use a value of type {type(value).__name__} as an "
            "array" + user_location_suffix()
        )
    return arr


def aval_of(value: Any) -> Aval:
    """The abstract value of an array, a Python scalar, or any value kind."""
    if isinstance(value, Aval):
        return value
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return Aval(tuple(shape), np.dtype(getattr(value, "np_dtype", value.dtype)))
    if isinstance(value, bool):
        return Aval((), np.dtype(bool))
    if isinstance(value, int):
        return Aval((), np.dtype(np.int64))
    if isinstance(value, float):
        return Aval((), np.dtype(np.float64))
    if isinstance(value, complex):
        return Aval((), np.dtype(np.complex128))
    arr = as_operand(value)
    return Aval(arr.shape, arr.dtype)


# -------------------------------------------------------- errors and locations
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tracegrad/


def _inside_package(filename: str) -> bool:
    if os.path.isabs(filename):
        return _absolute_inside_package(filename)
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)  # (depends on the cwd)


@functools.lru_cache(maxsize=4096)
def _absolute_inside_package(filename: str) -> bool:
    # cached: normalizing the path of every frame of every traced op was ~5% of tracing
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def user_frame() -> types.FrameType | None:
    """The innermost stack frame outside the tracegrad package (the user's line).

    Generated kernel modules (named tg_<hash>, living in the cache directory)
    count as tracegrad's own code too, and so do NumPy's Python wrappers (np.max of
    a traced object array reaches tracegrad through them)."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        module = f.f_globals.get("__name__", "")
        if (
            not _inside_package(fn)
            and not fn.startswith("<frozen")
            and not _is_generated_module(module)
            and not module.startswith("numpy.")
        ):
            return f
        f = f.f_back
    return None


def _is_generated_module(name: str) -> bool:
    """Kernel modules are named tg_<32 hex digits> (tracegrad.runtime.cache)."""
    return len(name) == 35 and name.startswith("tg_")


def user_location() -> str | None:
    f = user_frame()
    if f is None:
        return None
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def user_location_suffix() -> str:
    loc = user_location()
    return f"\n  (at {loc})" if loc else ""


def op_error(
    prim: Primitive | str,
    avals: Iterable[Any],
    reason: str,
    cls: type[Exception] = ShapeError,
) -> Exception:
    """The error to raise for `prim` on operands `avals`: a TracegradError subclass by
    default (ShapeError); a few callers pass NumPy's own class (TypeError, ValueError)."""
    name = prim if isinstance(prim, str) else prim.name
    operands = ", ".join(str(aval_of(a)) for a in avals)
    return cls(f"{name}: {reason} (operands: {operands}){user_location_suffix()}")


def promote(*operands: Any) -> np.dtype[Any]:
    """Result dtype of an elementwise op. Python scalars are weak, as in NumPy 2:
    f32 array * 2.0 stays f32."""
    parts = [o.dtype if isinstance(o, Aval) else o for o in operands]
    return np.result_type(*parts)


def is_float(dtype: Any) -> bool:
    return np.issubdtype(np.dtype(dtype), np.floating)


def is_complex(dtype: Any) -> bool:
    """complex64 or complex128 (accepts a dtype, an Aval or any value with a dtype)."""
    dtype = getattr(dtype, "dtype", dtype)
    return bool(np.dtype(dtype).kind == "c")


def is_inexact(dtype: Any) -> bool:
    """A floating-point or complex dtype: one that carries gradients."""
    return np.issubdtype(np.dtype(dtype), np.inexact)
