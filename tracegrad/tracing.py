"""Tracing: run a Python function on symbolic values and record an IR graph.

A `Tracer` stands for an array whose shape and dtype are known but whose
values are not. Every tracegrad op (and every NumPy call that NumPy hands to
us through `__array_ufunc__` / `__array_function__`) applied to a tracer goes
through `bind`, which lands in `trace_apply`: it runs the primitive's shape
rule and appends one node to the graph being built.

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x: np.tanh(x) * 2.0, np.ones(3, np.float32))
    >>> print(g)
    graph <lambda>(%0: f32[3] x) -> (%3) {
      %1 = tanh %0 : f32[3]
      %2 = const 2.0 : f32[]
      %3 = mul %1, %2 : f32[3]
      return %3
    }

Python control flow on shapes and static values works; control flow on traced
values raises `TracingError`, which points at `tracegrad.where`.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.ops import core
from tracegrad.ops.core import Aval, Primitive, TracegradError, register_value_kind
from tracegrad.ops.operators import ArrayMethods, ArrayOperators
from tracegrad.pytree import (  # noqa: F401  (pytree names are used here and by front ends)
    TreeDef,
    identifier,
    is_array_like_leaf,
    leaf_paths,
    static_scalar_key,
    tree_flatten,
    tree_unflatten,
)


class TracingError(TracegradError):
    """A traced function did something a static graph cannot express."""


# --------------------------------------------------------------- trace state
_state = threading.local()  # per-thread: the source line and tag new nodes get


def _source_override() -> str | None:
    return getattr(_state, "source", None)


@contextmanager
def node_source(source: str | None, vjp_of: str | None = None):
    """New nodes made inside this block record `source` instead of the caller's
    line, and (reverse mode) which forward node's vjp rule made them."""
    previous = getattr(_state, "source", None), getattr(_state, "vjp_of", None)
    _state.source, _state.vjp_of = source, vjp_of
    try:
        yield
    finally:
        _state.source, _state.vjp_of = previous


def active_contexts() -> list:
    """The traces being recorded in this thread, outermost first."""
    stack = getattr(_state, "active", None)
    if stack is None:
        stack = _state.active = []
    return stack


class TraceContext:
    """One graph being recorded. Tracers point at their context.

    While a function runs under `with context.active():`, tracers of enclosing
    active traces that it closes over are captured: each becomes an extra
    input of this graph (`captures` lists the outer tracers, in input order).
    """

    def __init__(self, name: str = "f"):
        self.graph = Graph(name=name)
        self.tag = "fwd"
        self.vjp_origin: dict[int, str] = {}  # backward node id -> "sqrt %2" it differentiates
        self.captures: list[Tracer] = []
        self._captured: dict[int, Node] = {}
        self._const_by_id: dict[int, tuple[Any, Node]] = {}
        self._scalar_consts: dict[tuple, Node] = {}
        self._substitutes: dict[int, tuple[Any, Tracer]] = {}

    def substitute(self, original: Any, tracer: Tracer) -> None:
        """Use `tracer` wherever the object `original` (an implicit input read from a
        closure or global) reaches a traced op as an operand."""
        self._substitutes[id(original)] = (original, tracer)  # keeps `original` alive

    @contextmanager
    def active(self):
        """Mark this trace as being recorded (so closures over it can be captured)."""
        core.route_object_array_reductions()  # np.max(np.array([x, y])) of tracers
        stack = active_contexts()
        stack.append(self)
        try:
            yield self
        finally:
            stack.remove(self)

    def capture(self, outer: Tracer) -> Tracer:
        """This trace's input standing for a tracer of an enclosing trace."""
        node = self._captured.get(id(outer.node))
        if node is None:
            node = self.graph.add_input(outer.node.aval, f"captured{outer.node.id}")
            self._captured[id(outer.node)] = node
            self.captures.append(outer)
        return Tracer(self, node)

    def new_input(self, aval: Aval, name: str) -> Tracer:
        return Tracer(self, self.graph.add_input(aval, name))

    @contextmanager
    def tagging(self, tag: str):
        """Nodes recorded inside the block get `tag` (the AD pass uses "bwd")."""
        previous, self.tag = self.tag, tag
        try:
            yield
        finally:
            self.tag = previous

    def const_node(self, value: Any, dtype: Any = None) -> Node:
        """A const node for an array or scalar; the same object maps to one node."""
        if isinstance(value, np.ndarray) and dtype is None and value.ndim > 0:
            hit = self._const_by_id.get(id(value))
            if hit is not None:
                return hit[1]
            # A copy: the graph outlives the call, the user's array may change.
            node = self._add_const(np.array(value, copy=True))
            self._const_by_id[id(value)] = (value, node)  # keep `value` alive: ids stay unique
            return node
        arr = np.asarray(value, dtype=dtype)
        if arr.ndim == 0:
            key = (arr.dtype.str, arr.tobytes())
            node = self._scalar_consts.get(key)
            if node is None:
                node = self._scalar_consts[key] = self._add_const(arr)
            return node
        return self._add_const(np.array(arr, copy=True))

    def _add_const(self, arr: np.ndarray) -> Node:
        node = self.graph.add_const(arr, tag=self.tag)
        node.source = _source_override() or core.user_location()
        return node

    def __repr__(self) -> str:
        return f"<TraceContext {self.graph.name}: {len(self.graph.nodes)} nodes>"


# ------------------------------------------------------------------- Tracer


OBJECT_ARRAY_LIMIT = 256  # elements: np.array(...) of a larger traced array raises


class Tracer(ArrayOperators, ArrayMethods):
    """A symbolic array: shape and dtype are static, values are not.

    Operators (`+ - * / ** @`, comparisons, `x[i]`) and NumPy-style methods
    (`x.sum(axis=1)`, `x.T`, `x.reshape(...)`, `x.astype(...)`) come from the
    shared mixins and go through `bind`, like every op.
    """

    __slots__ = ("context", "node")
    __array_priority__ = 1000  # NumPy defers binary operators to us

    def __init__(self, context: TraceContext, node: Node):
        self.context = context
        self.node = node

    # Static facts are plain Python values, so shape-driven control flow works.
    @property
    def shape(self) -> tuple:
        return self.node.shape

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return len(self.node.shape)

    @property
    def size(self) -> int:
        return self.node.size

    @property
    def aval(self) -> Aval:
        return self.node.aval

    def __len__(self) -> int:
        if not self.node.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.node.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Tracer({self.node.type_str()}, {self.node.name} = {self.node.op})"

    # ---- conversions a static graph cannot do
    def __bool__(self):
        raise _concrete_error(self, "bool()", "an `if`, `while`, `and`/`or` or `assert` on it")

    def __float__(self):
        raise _concrete_error(self, "float()", "float(x)")

    def __int__(self):
        raise _concrete_error(self, "int()", "int(x)")

    def __index__(self):
        raise _concrete_error(self, "an index", "using it as a Python index or in range()")

    def __complex__(self):
        raise _concrete_error(self, "complex()", "complex(x)")

    def item(self, *args):
        raise _concrete_error(self, ".item()", "x.item()")

    def __setitem__(self, index, value):
        loc = core.user_location()
        raise TracingError(
            "item assignment on a traced value (x[i] = v) is not supported: traced arrays "
            "are immutable, each op makes a new value"
            + (f"\n  at {loc}" if loc else "")
            + "\n  Build the result instead: tracegrad.where(mask, v, x) to replace "
            "elements where a mask holds, or tracegrad.concatenate / tracegrad.stack of "
            "the pieces."
        )

    def tolist(self):
        raise _concrete_error(self, ".tolist()", "x.tolist()")

    def __array__(self, dtype=None, copy=None):
        # NumPy's array() cannot be overridden: np.array([x, 2 * x]) converts each element
        # with this call. A small traced array becomes an object array of its traced
        # elements (NumPy then nests them); tracegrad ops unbox such arrays again
        # (core.unbox_object_array). Large ones would trace one node per element, and
        # tracegrad's own code (eager ops given a tracer) gets the error and its hint.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if (
            (dtype is None or np.dtype(dtype) == object)
            and self.size <= OBJECT_ARRAY_LIMIT
            and not caller.startswith("tracegrad.")
        ):
            out = np.empty(self.shape, dtype=object)
            if not self.shape:
                out[()] = self
            else:
                for index in np.ndindex(*self.shape):
                    out[index] = self[index]
            return out
        raise _concrete_error(
            self,
            "a NumPy array",
            "np.asarray(x) or np.array(x) of a "
            f"traced array of more than {OBJECT_ARRAY_LIMIT} elements, or a "
            "NumPy function tracegrad does not capture (build arrays of "
            "traced values with tracegrad.array([...]) or tracegrad.stack)",
        )

    # ---- NumPy protocol: record NumPy calls instead of computing them
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _numpy_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _numpy_function(func, args, kwargs)


def _no_extra_kwargs(name: str, kwargs: dict) -> None:
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if kwargs:
        raise TracingError(
            f"{name}(): keyword arguments {sorted(kwargs)} are not supported "
            f"while tracing{core.user_location_suffix()}"
        )


def _concrete_error(tracer: Tracer, what: str, how: str) -> TracingError:
    node = tracer.node
    made = f" (made at {node.source})" if node.source else ""
    loc = core.user_location()
    where = f"\n  at {loc}" if loc else ""
    return TracingError(
        f"cannot convert a traced value to {what}: {how}{where}\n"
        f"  The value is {node.name} = {node.op} : {node.type_str()}{made}.\n"
        "  While tracing, arrays are symbolic: a static graph cannot depend on data.\n"
        + _hint_for_caller()
    )


def _hint_for_caller() -> str:
    """The fix that fits what the user's line does (an eager op, a `while`, an `if`)."""
    eager_fn, user, scipy_frame = None, None, None
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("tracegrad.eager"):
            eager_fn = frame.f_code.co_name
        elif module.startswith("scipy."):
            scipy_frame = frame  # the outermost one is the function the user called
        elif not module.startswith(("tracegrad", "numpy")):
            user = frame
            break
        frame = frame.f_back
    if scipy_frame is not None:
        return _scipy_hint(scipy_frame)
    if eager_fn is not None:
        return (
            f"  tracegrad.eager's {eager_fn}() got a traced value: inside tracegrad.compile, "
            f"grad or value_and_grad write it with tracegrad's ops (tg.{eager_fn}(x), "
            "NumPy names) or as an array method, which trace."
        )
    line = ""
    if user is not None:
        import linecache

        line = linecache.getline(user.f_code.co_filename, user.f_lineno).strip()
    if line.startswith("while ") or line.startswith("while("):
        return (
            "  A loop that runs until a traced value says stop: use "
            "tracegrad.while_loop(cond_fun, body_fun, init) (forward only), or "
            "tracegrad.fori_loop(lower, upper, body, init) / tracegrad.scan when the trip "
            "count is known; they run inside the graph."
        )
    if line.startswith(("if ", "elif ", "if(")):
        return (
            "  Use tracegrad.cond(pred, true_fun, false_fun, *operands) to run one branch "
            "(its gradient only), or tracegrad.where(cond, a, b) to select elementwise, e.g.\n"
            "      tg.where(x > 0, x, 0.0)   instead of   x if x > 0 else 0.0"
        )
    return (
        "  Use tracegrad.where(cond, a, b) to select values elementwise, e.g.\n"
        "      tg.where(x > 0, x, 0.0)   instead of   x if x > 0 else 0.0\n"
        "  or make the value a static Python scalar argument (it is then part of the "
        "cache key)."
    )


def _scipy_hint(frame) -> str:
    """SciPy's functions run NumPy code that cannot trace: name tracegrad.scipy's twin."""
    module = frame.f_globals.get("__name__", "")
    fn = frame.f_code.co_name
    this = frame.f_locals.get("self")  # scipy.stats.norm -> "norm"
    dist = getattr(this, "name", None) or type(this).__name__.removesuffix("_gen")
    if module.startswith("scipy.stats") and isinstance(dist, str):
        theirs, ours = f"scipy.stats.{dist}.{fn}", f"tracegrad.scipy.stats.{dist}.{fn}"
    else:
        part = "stats" if module.startswith("scipy.stats") else "special"
        theirs, ours = f"{module}.{fn}", f"tracegrad.scipy.{part}"
    return (
        f"  SciPy's {theirs}() got a traced value: SciPy computes with NumPy and cannot "
        f"trace. Use {ours} (spelled as jax.scipy), which traces and differentiates."
    )


# -------------------------------------------------------------- trace_apply


def trace_apply(prim: Primitive, args: tuple, attrs: dict) -> Tracer:
    """Record `prim(*args, **attrs)` as one node of the graph the tracers belong to."""
    if _has_eager_tensor(args):  # tensors of a capture (tracegrad.capture): their tracers
        args = [_tensor_value(a) for a in args]
    context = _context_of(prim, args)
    args = [_substituted(a) for a in args] if _any_substitutes() else args
    operands = [
        (
            context.capture(a)
            if isinstance(a, Tracer) and a.context is not context
            else _operand(context, a, prim)
        )
        for a in args
    ]
    avals = [o.node.aval if isinstance(o, Tracer) else _static_aval(o) for o in operands]
    out_aval = prim.shape_rule(*avals, **attrs)
    scalar_dtype = _weak_scalar_dtype(avals)
    nodes = []
    for operand in operands:
        if isinstance(operand, Tracer):
            nodes.append(operand.node)
        elif isinstance(operand, np.ndarray):
            nodes.append(context.const_node(operand))
        else:  # a weakly typed Python scalar takes the dtype of its array operands
            nodes.append(context.const_node(operand, dtype=scalar_dtype))
    source = _source_override() or core.user_location()
    node = context.graph.new_node(prim.name, nodes, attrs, out_aval, source=source, tag=context.tag)
    origin = getattr(_state, "vjp_of", None)
    if origin is not None:
        context.vjp_origin[node.id] = origin
    return Tracer(context, node)


def _has_eager_tensor(args) -> bool:
    return any(type(a).__name__ == "Tensor" and hasattr(a, "_requires_grad") for a in args)


def _tensor_value(value: Any) -> Any:
    """An eager tensor's value while a capture runs: its tracer (a concrete tensor is
    lifted into a graph input first); anything else as it is."""
    if type(value).__name__ != "Tensor" or not hasattr(value, "_requires_grad"):
        return value
    from tracegrad.eager import capture_hooks

    capture_hooks.lift(value)
    return value._data if not isinstance(value._data, np.ndarray) else value


def _any_substitutes() -> bool:
    return any(c._substitutes for c in active_contexts())


def _substituted(value: Any) -> Any:
    """The tracer standing for `value` if it is an implicit input of an active trace."""
    if isinstance(value, Tracer) or type(value) in (bool, int, float, complex):
        return value
    for context in reversed(active_contexts()):
        hit = context._substitutes.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
    return value


def _context_of(prim: Primitive, args: tuple) -> TraceContext:
    """The innermost active trace among the operands' traces."""
    context = None
    stack = active_contexts()
    for a in args:
        if isinstance(a, Tracer) and a.context is not context:
            if a.context not in stack:
                raise _escaped_error(prim.name, a)
            if context is None or stack.index(a.context) > stack.index(context):
                context = a.context
    return context


def _escaped_error(what: str, tracer: Tracer) -> TracingError:
    made = f" (made at {tracer.node.source})" if tracer.node.source else ""
    return TracingError(
        f"{what}: a traced value escaped from a trace that has finished: {tracer.node.name} = "
        f"{tracer.node.op} : {tracer.node.type_str()}{made}. Values seen while tracing are "
        "symbolic and only valid inside the traced function; return them from it instead of "
        "storing them." + core.user_location_suffix()
    )


def _operand(context: TraceContext, value: Any, prim: Primitive):
    """A Tracer, a Python scalar (weak), or an ndarray to be made a const."""
    if isinstance(value, Tracer) or type(value) in (bool, int, float, complex):
        return value
    if isinstance(value, np.ndarray):
        unboxed = core.unbox_object_array(value) if value.dtype == object else None
        return value if unboxed is None else unboxed
    if isinstance(value, np.generic):
        return np.asarray(value)
    detach = getattr(value, "detach", None)
    if detach is not None and hasattr(value, "requires_grad"):  # an eager Tensor closed over
        return np.asarray(detach().numpy())
    return core.as_operand(value, prim)


def _static_aval(value):
    if isinstance(value, np.ndarray):
        return Aval(value.shape, value.dtype)
    return value  # Python scalars reach shape rules as themselves (weakly typed)


def _weak_scalar_dtype(avals: Sequence) -> np.dtype:
    strong = [a.dtype for a in avals if isinstance(a, Aval)]
    weak = [a for a in avals if not isinstance(a, Aval)]
    return np.result_type(*strong, *weak)


register_value_kind(Tracer, 20, trace_apply)


def _object_loop_method(name: str):
    def method(self):
        return _api(name)(self)

    method.__name__ = name
    return method


# NumPy's ufuncs on object arrays (np.tanh(np.array([x, 2 * x]))) call the method of
# the same name on each element.
for _name in (
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "cbrt",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "square",
    "reciprocal",
    "sign",
    "floor",
    "ceil",
    "rint",
    "deg2rad",
    "rad2deg",
    "conjugate",
):
    if not hasattr(Tracer, _name):
        setattr(Tracer, _name, _object_loop_method(_name))


# --------------------------------------------------------- NumPy protocol


def _api(name: str) -> Callable:
    from tracegrad.ops import api

    fn = getattr(api, name, None)
    if fn is None:
        raise TracingError(
            f"tracegrad has no op {name!r} yet, so it cannot be traced"
            + core.user_location_suffix()
        )
    return fn


# NumPy ufunc name -> tracegrad op name, where they differ (None: identity).
_UFUNC_NAMES = {
    "true_divide": "divide",
    "absolute": "abs",
    "fabs": "abs",
    "float_power": "power",
    "positive": None,
}


def _numpy_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    name = ufunc.__name__
    if method != "__call__" or kwargs:
        what = f"numpy.{name}.{method}" if method != "__call__" else f"numpy.{name}"
        extra = f" with keyword arguments {sorted(kwargs)}" if kwargs else ""
        raise TracingError(
            f"{what}{extra} is not supported on traced values{core.user_location_suffix()}"
        )
    op_name = _UFUNC_NAMES.get(name, name)
    if op_name is None:  # np.positive: identity
        return inputs[0]
    fn = _lookup_api(op_name)
    if fn is None and name == "square":
        return _api("multiply")(inputs[0], inputs[0])
    special = sys.modules.get("scipy.special")
    if fn is None and special is not None and getattr(special, name, None) is ufunc:
        raise TracingError(
            f"scipy.special.{name} got a traced value: SciPy's ufuncs compute with NumPy "
            f"and cannot trace. Use tracegrad.scipy.special.{name} (spelled as "
            f"jax.scipy.special), which traces and differentiates{core.user_location_suffix()}"
        )
    if fn is None:
        raise TracingError(
            f"numpy.{name} is not supported on traced values: tracegrad has no "
            f"op for it. Use the tracegrad ops (tracegrad.exp, tracegrad.where, "
            f"...) instead{core.user_location_suffix()}"
        )
    return fn(*inputs)


def _lookup_api(name: str):
    from tracegrad.ops import api

    return getattr(api, name, None)


def _static_shape(x, *args, **kwargs):
    return tuple(np.shape(x) if not isinstance(x, Tracer) else x.shape)


def _np_reduction(op_name: str):
    def handler(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        if dtype is not None or out is not None or kwargs:
            raise TracingError(
                f"numpy.{op_name}: dtype=, out=, where=, initial= are not "
                f"supported on traced values{core.user_location_suffix()}"
            )
        return _api(op_name)(a, axis=axis, keepdims=bool(keepdims))

    return handler


def _np_dot(a, b, out=None):
    if out is not None:
        raise TracingError(
            "numpy.dot: out= is not supported on traced values" + core.user_location_suffix()
        )
    return _api("dot")(a, b)


def _np_transpose(a, axes=None):
    return _api("transpose")(a, None if axes is None else tuple(axes))


def _np_reshape(a, *args, **kwargs):
    shape = kwargs.pop("newshape", kwargs.pop("shape", args[0] if args else None))
    order = kwargs.pop("order", args[1] if len(args) > 1 else "C")
    if order != "C" or kwargs:
        raise TracingError(
            "numpy.reshape: only order='C' is supported while tracing" + core.user_location_suffix()
        )
    if isinstance(shape, int):
        shape = (shape,)
    return _api("reshape")(a, tuple(shape))


def _np_where(cond, x=None, y=None):
    if x is None or y is None:
        raise TracingError(
            "numpy.where(cond) with one argument returns data-dependent shapes; "
            "a static graph needs where(cond, x, y)" + core.user_location_suffix()
        )
    return _api("where")(cond, x, y)


def _np_like(name: str):
    def handler(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
        if shape is not None or kwargs:
            raise TracingError(
                f"numpy.{name}: shape= is not supported on traced values"
                + core.user_location_suffix()
            )
        return _api(name)(a, dtype=dtype)

    return handler


def _np_concatenate(arrays, axis=0, **kwargs):
    _no_extra_kwargs("numpy.concatenate", {k: v for k, v in kwargs.items() if v is not None})
    return _api("concatenate")(list(arrays), axis=axis)


def _np_stack(arrays, axis=0, **kwargs):
    _no_extra_kwargs("numpy.stack", {k: v for k, v in kwargs.items() if v is not None})
    return _api("stack")(list(arrays), axis=axis)


def _np_swapaxes(a, axis1, axis2):
    nd = len(_static_shape(a))
    axes = list(range(nd))
    axes[axis1 % nd], axes[axis2 % nd] = axes[axis2 % nd], axes[axis1 % nd]
    return _api("transpose")(a, tuple(axes))


def _np_moveaxis(a, source, destination):
    nd = len(_static_shape(a))
    src = [s % nd for s in np.atleast_1d(source).tolist()]
    dst = [d % nd for d in np.atleast_1d(destination).tolist()]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _api("transpose")(a, tuple(order))


# NumPy function name -> handler. Anything else raises naming the function.
_NUMPY_FUNCTIONS: dict[str, Callable] = {
    "shape": _static_shape,
    "ndim": lambda a: len(_static_shape(a)),
    "size": lambda a, axis=None: (
        int(np.prod(_static_shape(a))) if axis is None else _static_shape(a)[axis]
    ),
    "result_type": lambda *xs: np.result_type(
        *[x.dtype if isinstance(x, Tracer) else x for x in xs]
    ),
    "sum": _np_reduction("sum"),
    "mean": _np_reduction("mean"),
    "max": _np_reduction("max"),
    "amax": _np_reduction("max"),
    "min": _np_reduction("min"),
    "amin": _np_reduction("min"),
    "dot": _np_dot,
    "matmul": lambda a, b, **kw: _api("matmul")(a, b),
    "where": _np_where,
    "transpose": _np_transpose,
    "swapaxes": _np_swapaxes,
    "moveaxis": _np_moveaxis,
    "reshape": _np_reshape,
    "concatenate": _np_concatenate,
    "stack": _np_stack,
    "squeeze": lambda a, axis=None: _api("squeeze")(a, axis),
    "expand_dims": lambda a, axis: _api("expand_dims")(a, axis),
    "broadcast_to": lambda a, shape, subok=False: _api("broadcast_to")(a, tuple(shape)),
    "clip": lambda a, a_min=None, a_max=None, **kw: _api("clip")(a, a_min, a_max),
    "take_along_axis": lambda a, indices, axis: _api("take_along_axis")(a, indices, axis),
    "maximum": lambda a, b: _api("maximum")(a, b),
    "minimum": lambda a, b: _api("minimum")(a, b),
    "zeros_like": _np_like("zeros_like"),
    "ones_like": _np_like("ones_like"),
    "full_like": lambda a, fill_value, dtype=None, **kw: _api("full_like")(a, fill_value, dtype),
    "copy": lambda a, **kw: a,
    "asarray": lambda a, dtype=None, **kw: a if dtype is None else _api("astype")(a, dtype),
    "ravel": lambda a, order="C": _api("ravel")(a),
    "var": lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False: _api("var")(
        a, axis=axis, ddof=ddof, keepdims=keepdims
    ),
    "argmax": lambda a, axis=None, out=None, keepdims=False: _api("argmax")(
        a, axis=axis, keepdims=keepdims
    ),
    "argmin": lambda a, axis=None, out=None, keepdims=False: _api("argmin")(
        a, axis=axis, keepdims=keepdims
    ),
    "norm": lambda x, ord=None, axis=None, keepdims=False: (  # numpy.linalg.norm
        _api("norm")(x, ord=ord, axis=axis, keepdims=keepdims)
    ),
}
for _name in (
    "cholesky",
    "solve",
    "inv",
    "det",
    "slogdet",
    "eigh",
    "eigvalsh",
    "qr",
    "svd",
    "svdvals",
    "pinv",
    "lstsq",
    "matrix_rank",
):  # numpy.linalg (ops/linalg.py)
    _NUMPY_FUNCTIONS[_name] = lambda *a, _n=_name, **kw: getattr(_api("linalg"), _n)(*a, **kw)


for _name in (
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "fftshift",
    "ifftshift",
):  # numpy.fft (ops/fourier.py)
    _NUMPY_FUNCTIONS[_name] = lambda *a, _n=_name, **kw: getattr(_api("fft"), _n)(*a, **kw)
for _name in ("eig", "eigvals"):  # numpy.linalg (ops/linalg_eig.py)
    _NUMPY_FUNCTIONS[_name] = lambda *a, _n=_name, **kw: getattr(_api("linalg"), _n)(*a, **kw)
for _name in ("real", "imag", "conj", "conjugate", "angle"):  # complex numbers
    _NUMPY_FUNCTIONS.setdefault(_name, lambda *a, _n=_name, **kw: _api(_n)(*a, **kw))
# dtype questions have static answers
_NUMPY_FUNCTIONS["iscomplexobj"] = lambda x: core.aval_of(x).dtype.kind == "c"
_NUMPY_FUNCTIONS["isrealobj"] = lambda x: core.aval_of(x).dtype.kind != "c"


def _numpy_function(func, args: tuple, kwargs: dict):
    name = getattr(func, "__name__", repr(func))
    handler = _NUMPY_FUNCTIONS.get(name)
    if handler is None:
        handler = _lookup_api(name) if name in _API_PASSTHROUGH else None
    if handler is None:
        module = getattr(func, "__module__", None) or "numpy"
        module = "numpy" if "._" in module else module
        raise TracingError(
            f"{module}.{name} is not supported on traced values: tracegrad would have to "
            "compute it on concrete values, which a static graph does not have. Use a "
            f"tracegrad op instead{core.user_location_suffix()}"
        )
    return handler(*args, **kwargs)


# NumPy functions whose tracegrad op has the same name and signature.
_API_PASSTHROUGH = {
    "softmax",
    "log_softmax",
    "logsumexp",
    "squeeze",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "abs",
    "sin",
    "cos",
    # issue 13: NumPy coverage (tracegrad/ops/api.py, same signatures)
    "einsum",
    "tensordot",
    "prod",
    "repeat",
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
    "cumsum",
    "cumprod",
    "trace",
    "roll",
    "diag",
    "diagflat",
    "diagonal",
    "triu",
    "tril",
    "outer",
    "inner",
    "vdot",
    "kron",
    "cross",
    "std",
    "sort",
    "argsort",
    "sinc",
    "real",
    "imag",
    "tile",
    "flip",
    "fliplr",
    "flipud",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "diff",
    "tan",
    "sinh",
    "cosh",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "hypot",
    "logaddexp",
    "square",
    "conj",
    "conjugate",
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
    "meshgrid",
    "nanmax",
    "nanmin",
    "nanprod",
    "nanvar",
    "nanstd",
    "nancumsum",
    "append",
}


# -------------------------------------------------------------------- trace


class TracedFunction:
    """The result of tracing: the graph plus the argument and output structure."""

    def __init__(
        self,
        graph: Graph,
        in_tree: TreeDef,
        out_tree: TreeDef,
        input_paths: list[str],
        captures: list | None = None,
    ):
        self.graph = graph
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.input_paths = input_paths
        self.captures = captures or []  # tracers of enclosing traces, the last graph inputs


def argument_names(fn: Callable, count: int) -> list[str]:
    """Parameter names of `fn` for its first `count` positional arguments."""
    names: list[str] = []
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            names.extend(f"{p.name}{i}" for i in range(count - len(names)))
    names.extend(f"arg{i}" for i in range(len(names), count))
    return names[:count]


def abstract_leaf(value: Any) -> Aval:
    """The aval a leaf is traced with (eager tensors and lists included)."""
    if isinstance(value, Tracer):
        return value.aval
    if type(value) in (int, float, bool, complex):
        return Aval((), np.asarray(value).dtype)
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype") and not isinstance(value, np.ndarray):
        return Aval(
            tuple(shape), np.dtype(getattr(value, "np_dtype", None) or _numpy_dtype(value.dtype))
        )
    arr = core.as_operand(value)
    arr = np.asarray(arr)
    return Aval(arr.shape, arr.dtype)


def _numpy_dtype(dtype) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:  # an eager dtype object: use its name
        return np.dtype(str(dtype).rsplit(".", 1)[-1])


# ------------------------------------------------------- NumPy random draws
# A function that draws from numpy.random while it is traced bakes that draw into the
# graph as a constant; HIPS autograd and JAX's un-jitted grad run it afresh on every
# call. `RandomWatch` notices such draws (the global RandomState, and RandomState or
# Generator objects the function reaches through closures and globals) by comparing
# their states around the trace, so the compiled function can retrace every call.


def _rng_fingerprint(rng) -> bytes:
    import pickle

    state = rng.get_state() if isinstance(rng, np.random.RandomState) else rng.bit_generator.state
    return pickle.dumps(state)


def _reachable_rngs(fn, depth: int = 4) -> list:
    """RandomState/Generator objects `fn` can reach: its closure cells and the globals
    its code names (also of nested code), and functions among those, `depth` deep."""
    kinds = (np.random.RandomState, np.random.Generator)
    found, seen, todo = [np.random.mtrand._rand], set(), [(fn, 0)]
    while todo:
        obj, level = todo.pop()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        if isinstance(obj, kinds):
            found.append(obj)
            continue
        if isinstance(obj, functools.partial):
            todo.extend((v, level + 1) for v in (obj.func, *obj.args, *obj.keywords.values()))
            continue
        fn_obj = getattr(obj, "__func__", obj)  # bound methods
        if not inspect.isfunction(fn_obj):
            continue
        values = [c.cell_contents for c in (fn_obj.__closure__ or ()) if _cell_full(c)]
        names, stack = set(), [fn_obj.__code__]
        while stack:
            co = stack.pop()
            names.update(co.co_names)
            stack.extend(c for c in co.co_consts if inspect.iscode(c))
        glob = getattr(fn_obj, "__globals__", {})
        values += [glob[n] for n in names if n in glob]
        todo.extend((v, level + 1) for v in values if isinstance(v, kinds) or callable(v))
    return list({id(r): r for r in found}.values())


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell (a name assigned later)
        return False
    return True


class RandomWatch:
    """`with RandomWatch(fn) as watch: trace...`; then `watch.drew` names a random
    number generator the trace drew from (None if none did)."""

    def __init__(self, fn):
        self.fn = fn
        self.drew: str | None = None

    def __enter__(self):
        self.rngs = _reachable_rngs(self.fn)
        self.before = [_rng_fingerprint(r) for r in self.rngs]
        return self

    def __exit__(self, *exc):
        for rng, before in zip(self.rngs, self.before, strict=True):
            if _rng_fingerprint(rng) != before:
                glob = rng is np.random.mtrand._rand
                self.drew = "numpy.random" if glob else f"a {type(rng).__name__}"
                break
        return False


def trace_flat(
    fn: Callable,
    args: tuple,
    avals: Sequence[Aval] | None = None,
    name: str | None = None,
    in_tree: TreeDef | None = None,
    scalar_argnums: Sequence[int] = (),
) -> TracedFunction:
    """Trace `fn(*args)`; array leaves of `args` become graph inputs (with `avals`
    if given), static leaves are passed through. Returns the graph and structure."""
    arg_names = argument_names(fn, len(args))
    leaves: list = []
    trees = []
    for i, a in enumerate(args):
        sub_leaves, sub_tree = tree_flatten(a, arrays_only_scalars=i in scalar_argnums)
        leaves.extend(sub_leaves)
        trees.append(sub_tree)
    in_tree = TreeDef("tuple", trees)
    paths = [p for name_, t in zip(arg_names, trees, strict=True) for p in leaf_paths(t, name_)]
    if avals is None:
        avals = [abstract_leaf(v) for v in leaves]
    context = TraceContext(name or getattr(fn, "__name__", "f"))
    used: set[str] = set()
    tracers = [
        context.new_input(aval, _unique(identifier(p), used))
        for aval, p in zip(avals, paths, strict=True)
    ]
    traced_args = tree_unflatten(in_tree, tracers)
    with context.active():
        result = traceable(fn)(*traced_args)
        if inspect.isgenerator(result) or inspect.iscoroutine(result) or inspect.isasyncgen(result):
            raise TracingError(
                f"{getattr(fn, '__name__', 'the function')} returned a "
                f"{type(result).__name__} object, not arrays: its body runs only when it is "
                "iterated, after tracing ended. Return a tuple or list of arrays instead"
                + core.user_location_suffix()
            )
        out_leaves, out_tree = tree_flatten(result, arrays_only_scalars=True)
        graph = context.graph
        for leaf in out_leaves:
            graph.outputs.append(output_node(context, leaf))
    return TracedFunction(graph, in_tree, out_tree, paths, context.captures)


def _converter(np_fn: Callable) -> Callable:
    def convert(a, dtype=None, *args, **kwargs):
        if isinstance(a, Tracer):
            return a if dtype is None else _api("astype")(a, dtype)
        return np_fn(a, dtype, *args, **kwargs)

    convert.__name__ = np_fn.__name__
    return convert


# NumPy's array constructors, written in C, call neither __array_function__ nor code
# of the user's: given to a transform as the function itself (jvp(np.asarray, ...)),
# they reached Tracer.__array__ from tracegrad's frame and raised.
_CONVERTERS = [(f, _converter(f)) for f in (np.asarray, np.array, np.asanyarray)]


def traceable(fn: Callable) -> Callable:
    """`fn`, or the tracing stand-in of a NumPy array constructor passed as the
    function itself (`tg.jvp(np.asarray, (1.0,), (2.0,))`, as JAX's test)."""
    for np_fn, convert in _CONVERTERS:
        if fn is np_fn:
            return convert
    return fn


def trace_subgraph(fn: Callable, in_tree: TreeDef, avals: Sequence[Aval], name: str):
    """Trace `fn(*args)` (args: `in_tree` of tracers with `avals`) into a graph of its
    own, for the bodies of loops, branches and custom rules. Returns (graph, output
    structure, captured outer tracers, which are the graph's last inputs)."""
    context = TraceContext(name)
    with context.active():
        tracers = [context.new_input(a, f"in{k}") for k, a in enumerate(avals)]
        result = traceable(fn)(*tree_unflatten(in_tree, tracers))
        out_leaves, out_tree = tree_flatten(result, arrays_only_scalars=True)
        for leaf in out_leaves:
            context.graph.outputs.append(output_node(context, leaf))
    return context.graph, out_tree, list(context.captures)


def _unique(name: str, used: set) -> str:
    candidate, n = name, 1
    while candidate in used:
        candidate, n = f"{name}_{n}", n + 1
    used.add(candidate)
    return candidate


def output_node(context: TraceContext, leaf: Any) -> Node:
    """The node for an output leaf: a tracer's own node, or a const."""
    if isinstance(leaf, Tracer):
        if leaf.context is context:
            return leaf.node
        if leaf.context not in active_contexts():
            raise _escaped_error("output", leaf)
        return context.capture(leaf).node  # an enclosing trace's value, returned as is
    value = _operand(context, leaf, None)
    if isinstance(value, Tracer):  # an object array of traced values, unboxed
        return output_node(context, value)
    return context.const_node(np.asarray(value))


def trace(fn: Callable, *example_args: Any) -> Graph:
    """Trace `fn` on arguments shaped like `example_args`; return the IR graph.

    Array arguments (and tuples/lists/dicts of arrays) become graph inputs;
    Python scalars are static and baked in.

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x, w: tg.sum(x * w), np.ones((2, 3)), np.ones(3))
    >>> [n.op for n in g.nodes]
    ['input', 'input', 'mul', 'sum']
    """
    return trace_flat(fn, example_args).graph


def make_graph(fn: Callable) -> Callable:
    """JAX's `make_jaxpr`: `tg.make_jaxpr(f)(*example_args)` is `tg.trace(f, *example_args)`.

    >>> import numpy as np, tracegrad as tg
    >>> print(tg.make_jaxpr(lambda x: x * 2.0)(np.ones(2)).nodes[-1].op)
    mul
    """

    def traced(*example_args: Any) -> Graph:
        return trace(fn, *example_args)

    return traced


def eval_shape(fn: Callable, *example_args: Any) -> Any:
    """JAX's `eval_shape`: the shapes and dtypes of `fn`'s outputs (as `Aval`s, in the
    output's pytree structure) without computing anything.

        >>> import numpy as np, tracegrad as tg
        >>> tg.eval_shape(lambda x, y: (x @ y, x.sum()), np.ones((2, 3)), np.ones((3, 4)))
        (Aval(shape=(2, 4), dtype=dtype('float64')), Aval(shape=(), dtype=dtype('float64')))
    """
    leaves, in_tree = tree_flatten(example_args)
    traced = trace_flat(lambda *xs: fn(*tree_unflatten(in_tree, xs)), tuple(leaves))
    avals = [node.aval for node in traced.graph.outputs]
    return tree_unflatten(traced.out_tree, avals)
