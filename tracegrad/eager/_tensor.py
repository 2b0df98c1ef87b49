"""The eager `Tensor`: an ndarray plus PyTorch's autograd bookkeeping.

Every op on tensors is one primitive of the rule table applied by
`eager_apply`: it runs the primitive's NumPy `impl` and, when grad mode is on
and an operand requires grad, records ONE backward node (graph.Node) named as
PyTorch names it. The node's backward calls the table's vjp rules, so eager
mode contains no derivative formulas of its own.

    >>> import tracegrad.eager as torch
    >>> x = torch.tensor([2.0], requires_grad=True)
    >>> y = torch.tensor([3.0], requires_grad=True)
    >>> z = x * y + x ** 2
    >>> z
    tensor([10.], grad_fn=<AddBackward0>)
    >>> z.backward(); x.grad, y.grad
    (tensor([7.]), tensor([2.]))
"""

from __future__ import annotations

import traceback
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager import dtypes as _dt
from tracegrad.eager.capture_hooks import ACTIVE as CAPTURING
from tracegrad.eager.errors import with_pytorch_class
from tracegrad.eager.grad_mode import STATE
from tracegrad.eager.graph import HOOKS_ACTIVE, Node, SavedValue, grad_accumulator, pack_saved
from tracegrad.ops import table as T
from tracegrad.ops.core import (
    _KINDS as _VALUE_KINDS,
)
from tracegrad.ops.core import (
    TracegradError,
    as_operand,
    aval_of,
    bind,
    register_value_kind,
)
from tracegrad.ops.operators import ArrayOperators
from tracegrad.ops.parallel import keep_freed_memory

keep_freed_memory()  # eager steps reuse their large temporaries (tracegrad/ops/parallel.py)

INFERENCE_SAVE_MESSAGE = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`."
)
INFERENCE_INPLACE_MESSAGE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)
LEAF_INPLACE_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
LEAF_VIEW_INPLACE_MESSAGE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)
REQUIRES_GRAD_DTYPE_MESSAGE = (
    "Only Tensors of floating point and complex dtype can require gradients"
)
NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information."
)
NUMPY_GRAD_MESSAGE = (
    "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
)

_PLAIN = (float, int, bool, np.ndarray, np.generic)


def requires_grad_message(text: str, data: np.ndarray) -> str:
    """PyTorch's text, then the offending dtype and the user's line."""
    from tracegrad.eager.errors import context

    return text + context(
        f"requires_grad on a {data.dtype.name} tensor of shape {tuple(data.shape)}"
    )


class Size(tuple):
    """A shape; prints like PyTorch's `torch.Size([2, 3])`."""

    def __repr__(self) -> str:
        return f"torch.Size([{', '.join(map(str, self))}])"

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n


# ====================================================================== apply


def eager_apply(prim, args: tuple, attrs: dict):
    """The value-kind handler: apply `prim` to tensors (and scalars/arrays)."""
    return apply_op(prim, args, attrs)


def apply_op(
    prim,
    args: Sequence,
    attrs: dict,
    name: str | None = None,
    visible: tuple | None = None,
    inplace_of: Tensor | None = None,
) -> Tensor:
    """Run `prim.impl` on the operands' arrays and record a backward node if needed.

    name: PyTorch's node name when the wrapper knows better (unsqueeze via reshape);
    visible: operand indices shown in next_functions; inplace_of: the tensor an
    in-place op will overwrite (its saved value must be a snapshot).
    """
    arrays = []
    requires_grad = False
    traced = False
    for a in args:
        if isinstance(a, Tensor):
            if a._base is not None:
                refresh_view(a)
            d = a._data
            if type(d) is not np.ndarray:
                if type(d) in _VALUE_KINDS:  # a tracer (inside tracegrad.compile)
                    traced = True
            elif CAPTURING[0]:  # a concrete tensor met inside a capture: a graph input
                capture_hooks.lift(a)
                d = a._data
                traced = type(d) in _VALUE_KINDS
            arrays.append(d)
            if a._requires_grad:
                requires_grad = True
        elif isinstance(a, _PLAIN):
            arrays.append(a)
        elif type(a) in _VALUE_KINDS:  # a tracer given to an eager op
            if not CAPTURING[0] or capture_hooks.current() is None:
                raise capture_hooks.NeedsCapture(
                    f"tracegrad.eager's {prim.name}() got a traced value: PyTorch-style code "
                    "(eager ops, nn.Module, backward, optimizers) is captured by "
                    "tracegrad.compile; grad, value_and_grad and vmap trace tracegrad's own "
                    f"ops: write tg.{prim.name}(x) (NumPy names) or an array method there"
                    + capture_hooks.user_location_suffix()
                )
            arrays.append(a)
            traced = True
        else:
            arrays.append(as_operand(a, prim))
    if traced:
        return _apply_traced(prim, args, arrays, attrs, requires_grad, name, visible, inplace_of)
    try:
        out = prim.impl(*arrays, **attrs)
    except TracegradError as exc:
        raise with_pytorch_class(exc) from None
    except Exception as exc:
        raise with_pytorch_class(_clear_error(prim, arrays, attrs, exc)) from None
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    dt = out.dtype
    kind = dt.kind
    if (kind in "fc" or (kind in "iu" and prim.kind == "elementwise")) and "dtype" not in attrs:
        out = _in_pytorch_dtype(prim, out, arrays, arrays, attrs, _run_impl)
        dt = out.dtype
    result = Tensor._wrap(out)
    state = STATE
    if state.inference:
        result._inference = True
    if (
        prim.kind == "shape"
        and out.base is not None
        and isinstance(args[0], Tensor)
        and np.may_share_memory(out, arrays[0])
    ):
        _make_view(result, args[0], prim, attrs, name)
    return _record_grad(
        result, dt, prim, args, arrays, attrs, requires_grad, name, visible, inplace_of
    )


def _record_grad(result, dt, prim, args, arrays, attrs, requires_grad, name, visible, inplace_of):
    """`result` with its grad_fn where the op is recorded (eager and captured alike)."""
    if (
        requires_grad
        and STATE.grad_enabled
        and dt.kind in "fc"
        and not prim.nondiff
        and not result._inference  # a view of an inference tensor is not recorded (PyTorch)
    ):
        result._grad_fn = _make_node(prim, args, arrays, attrs, result, name, visible, inplace_of)
        result._requires_grad = True
    return result


_F64 = np.dtype(np.float64)


def _apply_traced(prim, args, arrays, attrs, requires_grad, name, visible, inplace_of):
    """apply_op inside a capture: the op records an IR node (bind reaches the tracer's
    handler) and the result wraps the tracer; dtypes and the eager node follow eager
    mode, so a backward() in the captured code runs the same vjp rules on tracers."""
    try:
        out = bind(prim, *arrays, **attrs)
    except TracegradError as exc:
        raise with_pytorch_class(exc) from None
    if type(out) not in _VALUE_KINDS:
        out = np.asarray(out)
    dt = out.dtype
    if (
        dt.kind in "fc" or (dt.kind in "iu" and prim.kind == "elementwise")
    ) and "dtype" not in attrs:
        out = _in_pytorch_dtype(
            prim, out, arrays, [_dtype_stand_in(a) for a in arrays], attrs, bind
        )
        dt = out.dtype
    result = Tensor._wrap(out)
    state = STATE
    if state.inference:
        result._inference = True
    if (
        prim.kind == "shape"
        and prim is not T.concatenate
        and isinstance(args[0], Tensor)
        and (prim is not T.reshape or _reshape_would_view(args[0], attrs["shape"]))
    ):
        _make_view(result, args[0], prim, attrs, name)  # a view, as in eager mode
    return _record_grad(
        result, dt, prim, args, arrays, attrs, requires_grad, name, visible, inplace_of
    )


def _reshape_would_view(x: Tensor, shape) -> bool:
    """Inside a capture, where values have no strides: whether eager mode's reshape of
    `x` would be a view (NumPy's rule: no copy needed). The view chain from x's root
    (taken as C-contiguous) is replayed on a strided stand-in that owns one byte, whose
    shape and strides are all that is read; a reshape that needs a copy makes a new
    tensor, as in eager mode (`x.t().reshape(-1)` must not write into x)."""
    if x._base is None:
        return True
    root_shape = tuple(x._base._data.shape)
    strides, step = [], 1
    for n in reversed(root_shape):
        strides.insert(0, step)
        step *= max(int(n), 1)
    layout = np.lib.stride_tricks.as_strided(np.empty(1, np.uint8), root_shape, strides)
    for prim, attrs, _, _ in x.__dict__["_view"][0]:
        if prim is T.transpose:
            layout = np.transpose(layout, attrs["axes"])
        elif prim is T.broadcast_to:
            layout = np.broadcast_to(layout, attrs["shape"])
        elif prim is T.getitem:
            from tracegrad.ops.rulekit import spec_to_index

            layout = layout[spec_to_index(attrs["spec"], ()) + (Ellipsis,)]
        elif prim is T.reshape:
            layout = layout.view()
            layout.shape = attrs["shape"]
        else:  # (diagonal and the views defined outside the table: taken as views)
            return True
    probe = layout.view()
    try:
        probe.shape = shape
    except AttributeError:
        return False
    return True


def _in_pytorch_dtype(prim, out, arrays, described, attrs, run):
    """`out` in PyTorch's result dtype where NumPy's differs (`described`: what
    dtypes.result_type reads of each operand). PyTorch computes in the result dtype
    (`f32 * f64_0d` multiplies in float32, `int * 2.5` too): an elementwise op's array
    operands are cast and `run(prim, *operands)` again."""
    want = _promoted_dtype(out.dtype, described)
    if want is None:
        return out
    if want.kind == "f" and prim.kind == "elementwise":
        out = run(
            prim,
            *[
                a.astype(want)
                if (type(a) is np.ndarray or type(a) in _VALUE_KINDS)
                and a.dtype != want
                and a.dtype.kind in "fiu"
                else a
                for a in arrays
            ],
            **attrs,
        )
        if type(out) not in _VALUE_KINDS and type(out) is not np.ndarray:
            out = np.asarray(out)
    return out.astype(want) if out.dtype != want else out


def _run_impl(prim, *arrays, **attrs):
    return prim.impl(*arrays, **attrs)


def _dtype_stand_in(a):
    """What dtypes.result_type reads of a tracer: an ndarray of its dtype and ndim."""
    if type(a) is np.ndarray or isinstance(a, (int, float, np.generic)):
        return a
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def refresh_view(view: Tensor) -> None:
    """After an in-place change of its base, a view's history is remade from the
    base's current history (PyTorch regenerates a view's grad_fn the same way)."""
    info = view.__dict__["_view"]
    root = view._base
    if info[1] == root._counter[0]:
        return
    info[1] = root._counter[0]
    if type(root._data) in _VALUE_KINDS:  # captured: no shared memory, remake the value
        data = root._data
        for prim, attrs, _, _ in info[0]:
            data = bind(prim, data, **attrs)
        view._data = data
    if not (root._requires_grad and STATE.grad_enabled):
        return
    t = root
    for prim, attrs, _, name in info[0]:
        t = apply_op(prim, (t,), attrs, name=name)
    old = view._grad_fn
    view._grad_fn = t._grad_fn
    view._requires_grad = t._requires_grad
    if view._retains_grad:  # PyTorch moves the retains_grad hook to the new grad_fn
        _move_retain_grad(view, old, t._grad_fn)


def _move_retain_grad(t: Tensor, old, new) -> None:
    """retain_grad() follows `t` to its new grad_fn (tensor hooks stay with the old one)."""
    if old is not None and old.retain_ref is not None and old.retain_ref() is t:
        old.retain_ref = None
    if new is not None and type(new) is Node:
        new.retain_ref = weakref.ref(t)


def _fresh_view(view: Tensor) -> Tensor:
    """`view` with a history remade from its root base's current one: an in-place op on
    a view takes this as its operand, so the view's own node -- and any hook or
    retain_grad on it or on an intermediate view -- is not part of the new graph
    (PyTorch's CopySlices links the base's old history directly). Same memory and
    version counter as `view`."""
    t = view._base
    for prim, attrs, _, name in view.__dict__["_view"][0]:
        t = apply_op(prim, (t,), attrs, name=name)
    proxy = Tensor._wrap(view._data)
    proxy._counter = view._counter
    proxy._grad_fn = t._grad_fn
    proxy._requires_grad = t._requires_grad
    proxy._inference = view._inference
    return proxy


def inplace_operand(view: Tensor) -> Tensor:
    """What an in-place op on `view` (a view, refreshed) records as its operand."""
    if STATE.grad_enabled and view._base._requires_grad:
        return _fresh_view(view)
    return view


def _promoted_dtype(dt: np.dtype, arrays) -> np.dtype | None:
    """PyTorch's result dtype for these operands where it is not NumPy's `dt`, else
    None (dtypes.result_type: 0-d tensors and Python scalars do not promote within
    their category, a Python float is float32, an integer op with a float result gives
    float32): `f64_0d * f32` is float32, `int * 2.5` and `int / int` float32."""
    has_dim = False
    for a in arrays:  # the common case: operands of out's own dtype, and scalars
        if type(a) is np.ndarray:
            if a.dtype is not dt:
                break
            if a.ndim:
                has_dim = True
        elif not isinstance(a, _SCALARS):
            break
    else:
        if has_dim:
            return None
    want = _dt.result_type(arrays)
    if dt.kind == "f":
        if want is not None and want.kind == "c":  # abs, real, imag, angle of complex
            return None
        if want is None or want.kind != "f":
            want = _dt.default_float()
    elif dt.kind == "c":  # a complex result keeps the precision of real operands
        if want is None:
            return None
        if want.kind != "c":
            want = _dt.complex_of(want) if want.kind == "f" else _dt.default_complex()
    elif want is None or want.kind not in "iu":
        return None
    return None if want == dt else want


_SCALARS = (int, float)
_F32 = np.dtype(np.float32)


def _make_view(view: Tensor, base: Tensor, prim, attrs, name: str | None = None) -> None:
    """`view` shares `base`'s memory: share the version counter and remember how
    to remake it from the root base (to refresh its history after an in-place
    change of the base, and to push an in-place change of the view into the base)."""
    if base._inference:  # a view of an inference tensor is one too, and not tracked as a view
        view._inference = True
        view._counter = base._counter
        return
    if STATE.inference:  # in inference mode, a view of a normal tensor stays normal (PyTorch)
        view._inference = False
    root = base._base if base._base is not None else base
    ops = base.__dict__["_view"][0] if base._base is not None else ()
    view._counter = base._counter
    view._base = root
    view.__dict__["_view"] = [ops + ((prim, attrs, base._data.shape, name),), base._counter[0]]
    # PyTorch's creation_meta: a view made in no_grad / inference mode (or a view of one)
    # may not be modified in place once grad mode is back on
    if STATE.inference:
        view.__dict__["_creation"] = "inference"
    elif not STATE.grad_enabled:
        view.__dict__["_creation"] = "no_grad"
    elif base._base is not None:
        made = base.__dict__.get("_creation")
        if made is not None:
            view.__dict__["_creation"] = made if made.endswith("_vv") else made + "_vv"


# View primitives defined outside the table (functions.diagonal): prim -> fn(attrs, in_shape)
# returning (mask of the base's elements the view covers, scatter primitive, its attrs).
VIEW_SCATTERS: dict = {}


def _clear_error(prim, arrays, attrs, exc) -> Exception:
    """The impl failed: let the shape rule explain (op, shapes, user's line)."""
    from tracegrad.ops.core import op_error

    try:
        prim.shape_rule(
            *[
                a if isinstance(a, (int, float)) and not isinstance(a, bool) else aval_of(a)
                for a in arrays
            ],
            **attrs,
        )
    except TracegradError as rule_error:
        return rule_error
    except Exception:
        pass
    return op_error(prim, [a for a in arrays if not isinstance(a, (int, float))], str(exc))


class _EagerRules:
    """Per-primitive eager policy, looked up once per primitive."""

    __slots__ = (
        "saves",
        "saves_by_call",
        "policy",
        "visible",
        "name",
        "name_from_arrays",
        "saves_scalars",
    )

    def __init__(self, prim):
        self.name = prim.torch_name if isinstance(prim.torch_name, str) else None
        self.saves = prim.saves
        self.saves_by_call = prim.saves_by_call
        self.policy = prim.save_only_if_needed
        self.visible = prim.torch_visible
        # matmul's name reads only the operands' ndim: the arrays answer it faster than tensors
        self.name_from_arrays = prim.kind == "matmul" and callable(prim.torch_name)
        self.saves_scalars = prim.saves_scalars


_RULES: dict = {}


def _make_node(prim, args, arrays, attrs, result, name, visible, inplace_of):
    rules = _RULES.get(prim)
    if rules is None:
        rules = _RULES[prim] = _EagerRules(prim)
    saves = rules.saves if rules.saves_by_call is None else rules.saves_by_call(args)
    policy = rules.policy
    n = len(args)
    inputs = [None] * n
    in_meta = [None] * n
    operands = [None] * n
    saved = False
    for i in range(n):
        a = args[i]
        if isinstance(a, Tensor):
            d = a._data
            if a._requires_grad:
                fn = a._grad_fn
                inputs[i] = fn if fn is not None else grad_accumulator(a)
            dt = d.dtype
            in_meta[i] = (d.shape, dt)
            # integer/bool operands (indices, masks) are data the rules read, always kept
            if i in saves or dt.kind not in "fc":
                if policy is not None and i in policy:
                    other = args[policy[i]]
                    if not (isinstance(other, Tensor) and other._requires_grad):
                        continue
                if a._inference:
                    raise RuntimeError(INFERENCE_SAVE_MESSAGE)
                if a is inplace_of:
                    operands[i] = _snapshot(a)
                else:
                    counter = a._counter
                    operands[i] = (d, counter, counter[0], a, False)
                saved = True
        else:
            d = arrays[i]
            if type(d) is np.ndarray:
                in_meta[i] = (d.shape, d.dtype)
                if i in saves or d.dtype.kind not in "fc":
                    operands[i] = d
                    if d.dtype.kind in "biu":
                        saved = True  # indices/masks: PyTorch saves them, freed by backward
            else:
                operands[i] = d  # a Python scalar
                if rules.saves_scalars and i in saves:
                    saved = True  # PyTorch saves it as a wrapped tensor, freed by backward
    out = result._data
    out_saved = None
    if "out" in saves:
        counter = result._counter
        out_saved = (out, counter, counter[0], None, True)
        saved = True
    if name is None:
        if rules.name is not None:
            name = rules.name
        else:
            name = prim.node_name(*(arrays if rules.name_from_arrays else args), **attrs)
    if visible is None and rules.visible is not None:
        visible = rules.visible(args)
    if name == _COPY_SLICES:
        saved = True  # PyTorch's CopySlices drops its fn after backward: a second one raises
    node = Node(
        prim,
        attrs,
        name,
        tuple(inputs),
        tuple(in_meta),
        tuple(operands),
        out_saved,
        (out.shape, out.dtype),
        visible,
        saved,
    )
    state = STATE
    if state.anomaly:
        from tracegrad.eager.engine import anomaly_trace

        node.trace = anomaly_trace(traceback.format_stack()[:-3])
    if state.ckpt is not None:  # inside a non-reentrant checkpoint (checkpointing.py)
        state.ckpt.record(node)
    elif HOOKS_ACTIVE[0] and saved:  # saved_tensors_hooks (graph.py)
        pack_saved(node, args, result)
    return node


_COPY_SLICES = "torch::autograd::CopySlices"


def _snapshot(t: Tensor) -> tuple:
    """The pre-update value of a tensor an in-place op overwrites (PyTorch's original_self)."""
    copy = Tensor._wrap(t._data.copy())
    copy._requires_grad = t._requires_grad
    copy._grad_fn = t._grad_fn
    return SavedValue(copy._data, None, copy, False)


# ===================================================================== Tensor


class Tensor(ArrayOperators):
    """A multi-dimensional array with PyTorch's autograd (see module docstring)."""

    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_counter", "__weakref__", "__dict__")
    # Rarely set per tensor: class-level defaults, so making a tensor assigns 4 fields.
    _grad = None
    _acc_ref = None
    _hooks = None
    _post_acc_hooks = None
    _inference = False
    _base = None
    _retains_grad = False
    __array_ufunc__ = None  # numpy_array * tensor -> Tensor.__rmul__

    if TYPE_CHECKING:  # for mypy: some methods are installed from tables (eager/more_ops.py)

        def __getattr__(self, name: str) -> Any: ...

    def __array_function__(self, func, types, args, kwargs):
        """NumPy functions (np.linalg.cholesky(t), np.concatenate([...])) of a tensor:
        inside tracegrad.compile, of its tracer (they are traced); otherwise NumPy's
        own implementation, which reads the values as before."""
        if any(type(a._data) in _VALUE_KINDS for a in _tensors_in(args, kwargs)):
            return func(*_tracers_of(args), **_tracers_of(kwargs))
        return func._implementation(*args, **kwargs)

    __hash__ = object.__hash__

    def __init__(self, data: Any = (), dtype=None, requires_grad: bool = False):
        t = tensor(
            data,
            dtype=dtype if dtype is not None else _dt.get_default_dtype(),
            requires_grad=requires_grad,
        )
        Tensor._init_from(self, t._data)
        self.requires_grad = requires_grad

    @staticmethod
    def _init_from(self, data: np.ndarray) -> None:
        self._data = data
        self._requires_grad = False
        self._grad_fn = None
        self._counter = [0]

    @classmethod
    def _wrap(cls, data: np.ndarray) -> Tensor:
        t = object.__new__(cls)
        t._data = data
        t._requires_grad = False
        t._grad_fn = None
        t._counter = [0]
        return t

    # ------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_dim(dim, self._data.ndim, "size")]

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    @property
    def dtype(self) -> _dt.dtype:
        return _dt.from_numpy_dtype(self._data.dtype)

    @property
    def np_dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> str:
        return "cpu"

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_contiguous(self, memory_format=None) -> bool:
        """C order, ignoring the strides of size-1 dims (PyTorch's rule, and NumPy's flag);
        with memory_format=torch.channels_last, NHWC order of a 4-d tensor.
        A value being captured by tracegrad.compile has no memory layout: True."""
        flags = getattr(self._data, "flags", None)
        if flags is None:
            return True
        if memory_format is not None and getattr(memory_format, "_perm", None):
            perm = memory_format._perm
            if self._data.ndim != len(perm):
                return False
            return bool(self._data.transpose(perm).flags.c_contiguous)
        return bool(flags.c_contiguous)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    # ------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self._grad_fn is not None:
            if flag:
                return  # already requires grad (PyTorch allows this on non-leaves)
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if flag and self._data.dtype.kind not in "fc":
            raise RuntimeError(requires_grad_message(REQUIRES_GRAD_DTYPE_MESSAGE, self._data))
        self._requires_grad = bool(flag)

    @requires_grad.deleter
    def requires_grad(self) -> None:
        raise RuntimeError("Deletion of requires_grad not allowed (set it to False instead)")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and self._data.dtype.kind not in "fc":
            raise RuntimeError(
                requires_grad_message(
                    "only Tensors of floating point dtype can require gradients", self._data
                )
            )
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self):
        if self._base is not None:
            refresh_view(self)
        return self._grad_fn

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and self._grad_fn is not None and not self._retains_grad:
            import warnings

            warnings.warn(NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of "
                    f"type {type(value).__name__}"
                )
            if value._data.shape != self._data.shape:
                raise RuntimeError("assigned grad has data of a different size")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (PyTorch's private Tensor._is_view)."""
        return self._base is not None

    @property
    def output_nr(self) -> int:
        """Which output of its grad_fn this tensor is (0 for leaves and one-output ops)."""
        multi = self.__dict__.get("_multi_view")
        if multi is not None:
            return multi[1]
        slot = getattr(self._grad_fn, "_slot", None) if self._grad_fn is not None else None
        return slot if type(slot) is int else 0

    def __delattr__(self, name: str) -> None:
        if name == "_grad_fn":
            raise RuntimeError("Deletion of _grad_fn not allowed. Detach tensor instead!")
        if name in ("_data", "_counter", "_requires_grad", "_backward_hooks"):
            raise RuntimeError(f"Deletion of {name} not allowed")
        object.__delattr__(self, name)

    @property
    def is_inference(self):
        return lambda: self._inference

    @property
    def data(self) -> Tensor:
        """The same memory, detached, with its own version counter (PyTorch's .data)."""
        t = Tensor._wrap(self._data)
        return t

    @data.setter
    def data(self, value: Tensor) -> None:
        if isinstance(value, Tensor):
            if self._requires_grad and value._data.dtype.kind not in "fc":
                raise RuntimeError(
                    "data set to a tensor that requires gradients must be floating point or "
                    "complex dtype"
                )
            self._data = value._data
        elif isinstance(value, np.ndarray):
            self._data = value
        else:
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")

    @data.deleter
    def data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    @property
    def _version(self) -> int:
        """PyTorch's version counter: how many in-place changes this tensor's memory has seen
        (shared with its views). Internally `_counter` is the shared one-element list."""
        return self._counter[0]

    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Sequence[Tensor] | None = None,
    ) -> None:
        """Accumulate d(self)/d(leaf) into each leaf's `.grad`.

        >>> import tracegrad.eager as torch
        >>> x = torch.tensor([2.0], requires_grad=True)
        >>> (x ** 2).backward(); x.grad
        tensor([4.])
        """
        from tracegrad.eager.autograd import backward

        backward(
            [self],
            None if gradient is None else [gradient],
            retain_graph,
            create_graph,
            inputs=inputs,
        )

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]):
        """Call `hook(grad)` when this tensor's gradient is computed; a returned
        tensor replaces the gradient. Returns a handle with `.remove()`."""
        from tracegrad.eager.hooks import add_hook

        if self._base is not None:
            refresh_view(self)
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is None:
            if self._hooks is None:
                self._hooks = {}
            return add_hook(self._hooks, hook)
        node = self._grad_fn
        if node.tensor_hooks is None:
            node.tensor_hooks = {}
        return add_hook(node.tensor_hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]):
        """Call `hook(tensor)` after the gradient is accumulated into this leaf's `.grad`."""
        from tracegrad.eager.hooks import add_hook

        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return add_hook(self._post_acc_hooks, hook)

    def retain_grad(self) -> None:
        """Keep `.grad` for this non-leaf tensor after backward."""
        if self._base is not None:
            refresh_view(self)
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None:
            return
        self._retains_grad = True
        self._grad_fn.retain_ref = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad and self._grad_fn is not None

    def detach(self) -> Tensor:
        """Same memory and version counter, no history, requires_grad=False."""
        t = Tensor._wrap(self._data)
        t._counter = self._counter
        t._inference = self._inference
        return t

    def detach_(self) -> Tensor:
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self._grad_fn = None
        self._requires_grad = False
        return self

    # ----------------------------------------------------------- conversion
    def numpy(self, force: bool = False) -> np.ndarray:
        """The underlying array (shared memory); a tensor that requires grad only inside
        no_grad (or with force=True), as in PyTorch."""
        if self._requires_grad and not force and STATE.grad_enabled:
            raise RuntimeError(NUMPY_GRAD_MESSAGE)
        if type(self._data) in _VALUE_KINDS:
            _needs_values("Tensor.numpy()")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad and STATE.grad_enabled:
            raise RuntimeError(NUMPY_GRAD_MESSAGE)
        if type(self._data) in _VALUE_KINDS:
            _needs_values("np.asarray(tensor)")
        if dtype is not None:
            return self._data.astype(dtype)
        return self._data

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.reshape(()).item()

    def tolist(self):
        if type(self._data) in _VALUE_KINDS:
            _needs_values("Tensor.tolist()")
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()).item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __repr__(self) -> str:
        if type(self._data) in _VALUE_KINDS:
            _needs_values("printing a tensor")
        from tracegrad.eager.formatting import tensor_repr

        return tensor_repr(self)

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data, self._requires_grad))

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) "
                "support the deepcopy protocol at the moment."
            )
        t = type(self)._wrap(self._data.copy())
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = Tensor._wrap(self._grad._data.copy())
        memo[id(self)] = t
        return t

    def clone(self) -> Tensor:
        return apply_op(T.astype, (self,), {"dtype": self._data.dtype.name}, name="CloneBackward0")

    def to(self, *args, **kwargs) -> Tensor:
        """PyTorch's forms: to(dtype), to(device), to(device, dtype), to(other),
        to(dtype=..., device=..., copy=...). The device must be the CPU."""
        dtype = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", False)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, str):
                device = a
            elif isinstance(a, bool):
                continue  # non_blocking / copy flags
            elif a is not None:
                dtype = a
        if device is not None and not str(device).startswith("cpu"):
            raise RuntimeError(
                f"tracegrad.eager runs on the CPU only; cannot move a tensor to "
                f"device {str(device)!r}"
            )
        if dtype is None:
            return self.clone() if copy else self
        npd = _dt.to_numpy_dtype(dtype)
        if npd == self._data.dtype and not copy:
            return self
        return apply_op(T.astype, (self,), {"dtype": npd.name}, name="ToCopyBackward0")

    def type(self, dtype=None):
        if dtype is None:
            return f"torch.{self.dtype._tensor_type}"
        if isinstance(dtype, str):
            for d in _dt._BY_NUMPY.values():
                if dtype == f"torch.{d._tensor_type}":
                    return self.to(d)
            raise ValueError(f"invalid type: '{dtype}'")
        return self.to(dtype)

    def float(self) -> Tensor:
        return self.to(_dt.float32)

    def double(self) -> Tensor:
        return self.to(_dt.float64)

    def long(self) -> Tensor:
        return self.to(_dt.int64)

    def int(self) -> Tensor:
        return self.to(_dt.int32)

    def bool(self) -> Tensor:
        return self.to(_dt.bool_)

    def cpu(self) -> Tensor:
        return self

    def contiguous(self, memory_format=None) -> Tensor:
        """`self` when its memory is in C order, else a C-ordered copy (differentiable; the
        node is PyTorch's CloneBackward0). `.view` after a transpose needs this copy.

        >>> import tracegrad.eager as torch
        >>> x = torch.ones(2, 3, requires_grad=True)
        >>> x.contiguous() is x, x.t().is_contiguous(), x.t().contiguous().is_contiguous()
        (True, False, True)
        >>> x.t().contiguous().grad_fn.name()
        'CloneBackward0'
        """
        perm = getattr(memory_format, "_perm", None)
        if self.is_contiguous(memory_format):
            return self
        out = apply_op(T.astype, (self,), {"dtype": self._data.dtype.name}, name="CloneBackward0")
        if perm:  # channels_last: NHWC memory, NCHW shape
            if self._data.ndim != len(perm):
                raise RuntimeError(
                    f"required rank {len(perm)} tensor to use {memory_format} format"
                )
            inverse = tuple(int(i) for i in np.argsort(perm))
            out._data = np.ascontiguousarray(out._data.transpose(perm)).transpose(inverse)
        elif not out._data.flags.c_contiguous:  # astype keeps the input's layout, as clone()
            out._data = np.ascontiguousarray(out._data)
        return out

    # ------------------------------------------------------------ operators
    # Same primitives as ArrayOperators, applied directly (skips bind's dispatch).
    def __add__(self, other):
        return apply_op(T.add, (self, other), {})

    def __sub__(self, other):
        return apply_op(T.sub, (self, other), {})

    def __mul__(self, other):
        return apply_op(T.mul, (self, other), {})

    def __truediv__(self, other):
        return apply_op(T.div, (self, other), {})

    def __pow__(self, other):
        return apply_op(T.pow_, (self, other), {})

    def __matmul__(self, other):
        if isinstance(other, Tensor) and other._data.dtype != self._data.dtype:
            from tracegrad.eager.torch_ops import check_matmul_dtypes

            check_matmul_dtypes(self, other)
        return apply_op(T.matmul, (self, other), {})

    def __neg__(self):
        return apply_op(T.neg, (self,), {})

    # PyTorch keeps the tensor first for commutative ops (2 * x -> mul(x, 2)).
    def __radd__(self, other):
        return apply_op(T.add, (self, other), {})

    def __rmul__(self, other):
        return apply_op(T.mul, (self, other), {})

    def __rtruediv__(self, other):
        # PyTorch: other / x = reciprocal(x) * other
        recip = apply_op(T.div, (1.0, self), {}, name="ReciprocalBackward0", visible=(1,))
        return apply_op(T.mul, (recip, other), {})

    def __rsub__(self, other):
        return apply_op(T.sub, (other, self), {})

    def __rpow__(self, other):
        return apply_op(T.pow_, (other, self), {})

    def __getitem__(self, index):
        from tracegrad.eager.indexing import getitem

        return getitem(self, index)

    def __setitem__(self, index, value) -> None:
        from tracegrad.eager.indexing import setitem

        setitem(self, index, value)

    # ----------------------------------------------------------- in-place
    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def add_(self, other, alpha=1) -> Tensor:
        if alpha != 1:
            other = scaled_by_alpha(other, alpha)
        return inplace(self, T.add, (self, other), {})

    def sub_(self, other, alpha=1) -> Tensor:
        if alpha != 1:
            other = scaled_by_alpha(other, alpha)
        return inplace(self, T.sub, (self, other), {})

    def mul_(self, other) -> Tensor:
        return inplace(self, T.mul, (self, other), {})

    def div_(self, other) -> Tensor:
        return inplace(self, T.div, (self, other), {})

    def pow_(self, exponent) -> Tensor:
        return inplace(self, T.pow_, (self, exponent), {})

    def clamp_(self, min=None, max=None) -> Tensor:
        from tracegrad.eager import torch_ops as F

        if isinstance(min, Tensor) or isinstance(max, Tensor):
            if min is None or max is None or (isinstance(min, Tensor) and isinstance(max, Tensor)):
                return inplace(
                    self,
                    F.clamp_tensor_primitive,
                    (self, 0 if min is None else min, 0 if max is None else max),
                    {"has_lo": min is not None, "has_hi": max is not None},
                )
            F.clamp(self, min, max)  # PyTorch's error for a mixed (tensor, number) call
        return inplace(self, T.clip, (self,), F._clip_args(min, max), name="ClampBackward1")

    clip_ = clamp_

    def clamp_min_(self, min) -> Tensor:
        return self.clamp_(min=min)

    def clamp_max_(self, max) -> Tensor:
        return self.clamp_(max=max)

    def clamp_min(self, min) -> Tensor:
        from tracegrad.eager.torch_ops import clamp

        return clamp(self, min=min)

    def clamp_max(self, max) -> Tensor:
        from tracegrad.eager.torch_ops import clamp

        return clamp(self, max=max)

    def masked_fill_(self, mask, value) -> Tensor:
        from tracegrad.eager.torch_ops import _masked_fill_args

        args, name, visible = _masked_fill_args(self, mask, value)
        return inplace(self, T.where, args, {}, name=name, visible=visible)

    def scatter_add_(self, dim, index, src) -> Tensor:
        from tracegrad.eager.torch_ops import scatter_add

        return inplace_composite(self, lambda t: scatter_add(t, dim, index, src))

    def index_add_(self, dim, index, source, *, alpha=1) -> Tensor:
        from tracegrad.eager.torch_ops import index_add

        return inplace_composite(self, lambda t: index_add(t, dim, index, source, alpha=alpha))

    def addcmul_(self, tensor1, tensor2, *, value=1) -> Tensor:
        from tracegrad.eager.torch_ops import addcmul

        return inplace_composite(self, lambda t: addcmul(t, tensor1, tensor2, value=value))

    def addcdiv_(self, tensor1, tensor2, *, value=1) -> Tensor:
        from tracegrad.eager.torch_ops import addcdiv

        return inplace_composite(self, lambda t: addcdiv(t, tensor1, tensor2, value=value))

    def lerp_(self, end, weight) -> Tensor:
        from tracegrad.eager.torch_ops import lerp

        return inplace_composite(self, lambda t: lerp(t, end, weight))

    # The in-place forms of the elementwise ops: same primitive and node name as the
    # out-of-place op; the pre-update value is what the node saves (see `inplace`).
    def cos_(self) -> Tensor:
        return inplace(self, T.cos, (self,), {})

    def sin_(self) -> Tensor:
        return inplace(self, T.sin, (self,), {})

    def log_(self) -> Tensor:
        return inplace(self, T.log, (self,), {})

    def sqrt_(self) -> Tensor:
        return inplace(self, T.sqrt, (self,), {})

    def abs_(self) -> Tensor:
        return inplace(self, T.abs_, (self,), {})

    absolute_ = abs_

    def sign_(self) -> Tensor:
        return inplace(self, T.sign, (self,), {})

    def square_(self) -> Tensor:
        return inplace(self, T.pow_, (self, 2), {})

    def reciprocal_(self) -> Tensor:
        return inplace(self, T.div, (1.0, self), {}, name="ReciprocalBackward0", visible=(1,))

    def log1p_(self) -> Tensor:
        return inplace(self, T.log1p, (self,), {})

    def expm1_(self) -> Tensor:
        return inplace(self, T.expm1, (self,), {})

    def floor_(self) -> Tensor:
        return inplace(self, T.floor, (self,), {})

    def exp_(self) -> Tensor:
        return inplace(self, T.exp, (self,), {})

    def neg_(self) -> Tensor:
        return inplace(self, T.neg, (self,), {})

    def relu_(self) -> Tensor:
        return inplace(self, T.relu, (self,), {})

    def sigmoid_(self) -> Tensor:
        return inplace(self, T.sigmoid, (self,), {})

    def tanh_(self) -> Tensor:
        return inplace(self, T.tanh, (self,), {})

    def zero_(self) -> Tensor:
        return self.fill_(0, _name="ZeroBackward0")

    def fill_(self, value, _name="FillBackward2") -> Tensor:
        if isinstance(value, Tensor):
            value = value.item()
        return inplace(self, T.where, (True, value, self), {}, name=_name, visible=(2,))

    def copy_(self, src, non_blocking: bool = False) -> Tensor:
        if not isinstance(src, Tensor):
            src = tensor(src)
        return inplace(self, T.where, (True, src, self), {}, name="CopyBackwards", visible=(2, 1))

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> Tensor:
        from tracegrad.eager.creation import generator

        return self._fill_values(generator().uniform(a, b, self._data.shape))

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Tensor:
        from tracegrad.eager.creation import generator

        return self._fill_values(generator().normal(mean, std, self._data.shape))

    def _fill_values(self, values: np.ndarray) -> Tensor:
        check_inplace(self)
        write_into(self, values)
        return self


def _tensors_in(args, kwargs) -> list:
    found = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(t for t in a if isinstance(t, Tensor))
    return found


def _tracers_of(value):
    """`value` with each captured tensor replaced by its tracer (in lists, tuples, dicts)."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, dict):
        return {k: _tracers_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_tracers_of(v) for v in value)
    return value


def _needs_values(what: str) -> None:
    """A captured tensor asked for its values: a graph break (or, outside a capture, a
    tracer that escaped its trace)."""
    capture_hooks.graph_break(f"{what} needs the tensor's values")
    from tracegrad.ops.core import TracegradError

    raise TracegradError(
        f"{what}: this tensor holds a traced value from a compiled function's "
        "trace that has finished; it has no values"
    )


def scaled_by_alpha(other, alpha):
    """`other * alpha` for add/sub's alpha. PyTorch's AddBackward0/SubBackward0 keep
    alpha as a number and save nothing, so this product's node does not count as
    saving the scalar (a second backward through it does not raise)."""
    out = other * alpha
    node = out._grad_fn if isinstance(out, Tensor) else None
    if (
        node is not None
        and node.out_saved is None
        and not any(type(o) is tuple for o in node.operands)
    ):
        node.saved = False
    return out


def _rebuild(data, requires_grad):
    t = Tensor._wrap(data)
    t._requires_grad = requires_grad
    return t


def _dim(dim: int, ndim: int, op: str) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


register_value_kind(Tensor, 10, apply_op)  # = eager_apply, one call frame fewer per op


# ==================================================================== in-place

_TORCH_TYPE = {"f": "Float", "i": "Long", "u": "Byte", "b": "Bool"}


def _type_word(dt: np.dtype) -> str:
    return {
        np.dtype(np.float32): "Float",
        np.dtype(np.float64): "Double",
        np.dtype(np.int64): "Long",
        np.dtype(np.int32): "Int",
        np.dtype(np.bool_): "Bool",
    }.get(np.dtype(dt), str(dt))


def check_inplace(t: Tensor) -> None:
    """PyTorch's checks before an in-place update of `t`."""
    if t._inference and not STATE.inference:
        raise RuntimeError(INFERENCE_INPLACE_MESSAGE)
    if STATE.grad_enabled:
        if t._requires_grad and t._grad_fn is None and t._base is None:
            raise RuntimeError(LEAF_INPLACE_MESSAGE)
        base = t._base
        if base is not None and base._requires_grad and base._grad_fn is None:
            raise RuntimeError(LEAF_VIEW_INPLACE_MESSAGE)
        made = t.__dict__.get("_creation") if base is not None else None
        if made is not None and not STATE.inference and (t._requires_grad or base._requires_grad):
            raise RuntimeError(_creation_message(t, made))
        multi = t.__dict__.get("_multi_view")
        if multi is not None and base is not None and base._requires_grad:
            raise RuntimeError(
                f"Output {multi[1]} of {multi[0]} is a view and is being modified "
                "inplace. This view is the output of a function that returns multiple views. "
                "Such functions do not allow the output views to be modified inplace. You should "
                "replace the inplace operation by an out-of-place one."
            )


def _creation_message(t: Tensor, made: str) -> str:
    """PyTorch's errors for an in-place change, in grad mode, of a view made in no_grad or
    inference mode (or of a view of such a view)."""
    if made.startswith("inference"):
        what, how, block = "inference mode", "in normal mode", "inference_mode"
    else:
        what, how, block = "no_grad mode", "with grad mode enabled", "no_grad"
    if made.endswith("_vv"):
        fn = t._grad_fn
        op = fn.name().removesuffix("Backward0") if fn is not None else "View"
        head = f"Output 0 of {op} is a view of a view which was created in {what}"
    else:
        head = f"A view was created in {what}"
    return (
        f"{head} and is being modified inplace {how}. Given that this use case is ambiguous "
        "and error-prone, it is forbidden. You can clarify your code by moving both the view "
        f"and the inplace either both inside the {block} block (if you don't want the inplace "
        "to be tracked) or both outside (if you want the inplace to be tracked)."
    )


def inplace(
    self: Tensor,
    prim,
    args: tuple,
    attrs: dict,
    name: str | None = None,
    visible: tuple | None = None,
) -> Tensor:
    """Compute `prim(*args)`, write it into self's memory, bump the version and,
    when recorded, make the new node self's grad_fn (PyTorch's history rebase)."""
    check_inplace(self)
    target = self
    if self._base is not None:
        refresh_view(self)
        target = inplace_operand(self)
        if target is not self:
            args = tuple(target if a is self else a for a in args)
    result = apply_op(prim, args, attrs, name=name, visible=visible, inplace_of=target)
    commit_inplace(self, result)
    return self


def inplace_composite(self: Tensor, fn) -> Tensor:
    """In-place form of a composite op `fn(self)` whose nodes keep nothing of `self`
    itself (it only enters sums and differences), so no pre-update snapshot is needed."""
    check_inplace(self)
    target = self
    if self._base is not None:
        refresh_view(self)
        target = inplace_operand(self)
    commit_inplace(self, fn(target))
    return self


def commit_inplace(self: Tensor, result: Tensor) -> None:
    """Write `result` into self's memory and rebase the history of self and,
    for a view, of its base (whose new node is PyTorch's CopySlices)."""
    node = result._grad_fn
    base_result = None
    if (
        self._base is not None
        and (node is not None or self._base._requires_grad)
        and STATE.grad_enabled
    ):
        base_result = _through_inverse_views(self, result)
    write_into(self, result._data)
    old = self._grad_fn
    if node is not None:
        if type(node.out_saved) is tuple:  # the output now lives in self's buffer
            counter = self._counter
            node.out_saved = (self._data, counter, counter[0], None, True)
            if node.ckpt is not None:
                node.ckpt.strip(node)
        self._grad_fn = node
        self._requires_grad = True
        if self._retains_grad and self._base is None:
            _move_retain_grad(self, old, node)
    if base_result is not None:
        base = self._base
        base_old = base._grad_fn
        base._grad_fn = base_result._grad_fn
        base._requires_grad = base_result._requires_grad
        if base._retains_grad:
            _move_retain_grad(base, base_old, base._grad_fn)
        # The view's history is remade from the base's new one when next used (PyTorch
        # regenerates it too): the op's own node lives inside the base's CopySlices and
        # is not the view's grad_fn, so a retain_grad() of the view moves there then.
        if (
            self._retains_grad
            and old is not None
            and old.retain_ref is not None
            and old.retain_ref() is self
        ):
            old.retain_ref = None
        self.__dict__["_view"][1] = -1


def _through_inverse_views(view: Tensor, result: Tensor) -> Tensor:
    """The root base's new value: the view's new value put back through the inverse
    of each view op, outermost last (that node is PyTorch's CopySlices)."""
    ops = view.__dict__["_view"][0]
    chain = [view._base]  # the values each view op was applied to, as they are now
    for prim, attrs, _, vname in ops[:-1]:
        chain.append(apply_op(prim, (chain[-1],), attrs, name=vname))
    value = result
    for k in reversed(range(len(ops))):
        prim, attrs, in_shape, _ = ops[k]
        name = "torch::autograd::CopySlices" if k == 0 else None
        if prim in VIEW_SCATTERS:
            mask, scatter, scatter_attrs = VIEW_SCATTERS[prim](attrs, in_shape)
            scattered = apply_op(scatter, (value,), scatter_attrs)
            value = apply_op(T.where, (mask, scattered, chain[k]), {}, name=name, visible=(2, 1))
        elif prim is T.getitem:  # a part of the parent: scatter into the parent's old value
            from tracegrad.ops.rulekit import spec_to_index

            spec = attrs["spec"]
            mask = np.zeros(in_shape, dtype=np.bool_)
            mask[spec_to_index(spec, ())] = True
            scattered = apply_op(T.index_add_zeros, (value,), {"spec": spec, "shape": in_shape})
            value = apply_op(T.where, (mask, scattered, chain[k]), {}, name=name, visible=(2, 1))
        else:
            inv_prim, inv_attrs = _inverse_view(prim, attrs, in_shape)
            value = apply_op(inv_prim, (value,), inv_attrs, name=name)
    return value


def _inverse_view(prim, attrs, in_shape):
    if prim is T.reshape:
        return T.reshape, {"shape": tuple(in_shape)}
    if prim is T.transpose:
        return T.transpose, {"axes": tuple(int(i) for i in np.argsort(attrs["axes"]))}
    raise NotImplementedError(
        f"tracegrad.eager: in-place update of a {prim.name} view in a recorded graph; "
        "clone() the view first"
    )


def write_into(self: Tensor, values: np.ndarray) -> None:
    dst = self._data
    if type(values) is not np.ndarray and isinstance(values, (np.generic, int, float, bool)):
        values = np.asarray(values)
    if type(dst) in _VALUE_KINDS or type(values) in _VALUE_KINDS:
        _rebind_traced(self, values)
        return
    if values.shape != dst.shape:
        try:
            ok = np.broadcast_shapes(values.shape, dst.shape) == dst.shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(
                f"output with shape [{', '.join(map(str, dst.shape))}] doesn't match the "
                f"broadcast shape [{', '.join(map(str, np.broadcast_shapes(values.shape, dst.shape) if _bcastable(values.shape, dst.shape) else values.shape))}]"
            )
    if values.dtype.kind == "f" and dst.dtype.kind != "f":
        raise RuntimeError(
            f"result type {_type_word(values.dtype) if values.dtype != np.float64 else 'Float'} "
            f"can't be cast to the desired output type {_type_word(dst.dtype)}"
        )
    if not dst.flags.writeable:
        alias = writable_alias(dst, expanded_view(self))
        if alias is None:
            raise RuntimeError(OVERLAP_WRITE_MESSAGE)
        dst = alias  # e.g. one element selected from an expanded tensor: PyTorch writes it
    np.copyto(dst, values, casting="unsafe")
    self._counter[0] += 1


OVERLAP_WRITE_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def _self_overlapping(a: np.ndarray) -> bool:
    """Whether two elements of `a` share memory (a stride-0 or overlapping layout)."""
    dims = sorted((abs(st), n) for n, st in zip(a.shape, a.strides, strict=True) if n > 1)
    reach = a.itemsize  # bytes spanned by the dims taken so far
    for stride, n in dims:
        if stride < reach:
            return True
        reach = stride * n
    return False


def expanded_view(t: Tensor) -> bool:
    """Whether `t` is (a view of) an expanded tensor: read-only in NumPy for that reason."""
    if any(st == 0 and n > 1 for n, st in zip(t._data.shape, t._data.strides, strict=True)):
        return True
    info = t.__dict__.get("_view") if t._base is not None else None
    return info is not None and any(
        getattr(op[0], "name", None) == "broadcast_to" for op in info[0]
    )


def writable_alias(dst: np.ndarray, expanded: bool) -> np.ndarray | None:
    """A writable array on the same memory as the read-only view `dst` (NumPy makes the
    views of broadcast_to read-only; PyTorch writes into an expanded tensor's memory as
    long as no two written elements share it), or None where writing is not allowed."""
    if dst.size == 0 or _self_overlapping(dst):
        return None
    if not expanded:  # read-only for another reason (memory the user made read-only)
        return None
    root = dst
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.writeable or not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    offset = dst.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    try:
        flat = root.reshape(-1, order="A")
        return np.ndarray(dst.shape, dst.dtype, buffer=flat, offset=offset, strides=dst.strides)
    except (ValueError, TypeError):
        return None


def _rebind_traced(self: Tensor, values) -> None:
    """write_into inside a capture (functionalization): the tensor's value becomes the
    new traced value, broadcast and cast to its shape and dtype; a view's new value is
    also put back into its base, as shared memory would."""
    from tracegrad.ops import api

    if self._base is not None and type(self._base._data) is np.ndarray:
        capture_hooks.lift(self._base)
        refresh_view(self)
    dst = self._data
    if tuple(np.shape(values)) != tuple(dst.shape):
        values = api.broadcast_to(values, dst.shape)
    if values.dtype != dst.dtype:
        values = values.astype(dst.dtype)
    self._data = values
    base = self._base
    if base is not None:
        from tracegrad.eager.grad_mode import no_grad

        with no_grad():
            new_base = _through_inverse_views(self, Tensor._wrap(values))
        base._data = new_base._data
        self.__dict__["_view"][1] = self._counter[0] + 1
    self._counter[0] += 1


def _bcastable(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


# ================================================================ constructors


_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)
_PY_SCALAR_DTYPES = {float: _F32, int: _I64, bool: _BOOL}


def _promote_inferred(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's promoteTypes for two inferred element types: a float beats any integer
    or bool (int64 with float32 is float32, where NumPy says float64), else NumPy's."""
    if a == b:
        return a
    return _dt.promote_types(a, b)


def _inferred_dtype(data) -> np.dtype | None:
    """The dtype torch.tensor(data) infers (PyTorch's infer_scalar_type): Python float ->
    float32 (the default dtype), int -> int64, bool -> bool; a NumPy scalar, array or
    tensor keeps its dtype; a sequence promotes its elements' types (an empty one is
    float32). None where this cannot tell (the caller's checks then explain)."""
    t = type(data)
    if t is complex:  # the default complex dtype: complex64 (complex128 under float64)
        return _dt.default_complex()
    known = _PY_SCALAR_DTYPES.get(t)
    if known is not None:
        return known if t is not float else _dt.default_float()
    if isinstance(data, (np.ndarray, np.generic)):
        return data.dtype
    if isinstance(data, Tensor):
        return data._data.dtype
    if isinstance(data, (list, tuple)):
        if not data:
            return _dt.default_float()
        kinds = set(map(type, data))
        result = None
        if kinds <= _PY_SCALAR_DTYPES.keys():  # a flat list of Python numbers
            items = [_PY_SCALAR_DTYPES[k] if k is not float else _dt.default_float() for k in kinds]
        else:
            items = map(_inferred_dtype, data)
        for d in items:
            if d is None:
                return None
            result = d if result is None else _promote_inferred(result, d)
        return result
    return None


def tensor(data: Any, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data`.

    Python floats become float32, ints int64; a NumPy array or scalar keeps its dtype;
    a list promotes its elements' types as PyTorch does (a float beats an integer).

    >>> import numpy as np
    >>> import tracegrad.eager as torch
    >>> torch.tensor([[1.0, 2.0]]).dtype, torch.tensor([1, 2]).dtype
    (torch.float32, torch.int64)
    >>> torch.tensor(np.float64(2.5)).dtype, torch.tensor([np.int32(1), True]).dtype
    (torch.float64, torch.int32)
    """
    arr = _to_array(data, dtype)
    t = Tensor._wrap(arr)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(requires_grad_message(REQUIRES_GRAD_DTYPE_MESSAGE, arr))
        t._requires_grad = True
    if STATE.inference:
        t._inference = True
    return t


def _to_array(data: Any, dtype) -> np.ndarray:
    npd = None if dtype is None else _dt.to_numpy_dtype(dtype)
    if isinstance(data, Tensor):
        arr = data._data
        return np.array(arr, dtype=npd or arr.dtype, copy=True, order="C")
    if isinstance(data, np.ndarray):
        return np.array(data, dtype=npd or data.dtype, copy=True, order="C")
    if data is None or isinstance(data, (dict, set)):
        from tracegrad.eager.errors import EagerDTypeError, context

        raise EagerDTypeError(
            f"Could not infer dtype of {type(data).__name__}"
            + context("tensor(): expected a number, a (nested) list of numbers or an array")
        )
    if isinstance(data, (str, bytes)):
        from tracegrad.eager.errors import context

        raise TypeError(
            f"new(): invalid data type '{type(data).__name__}'"
            + context("tensor(): strings are not numbers")
        )
    if isinstance(data, (list, tuple)):
        data = (
            [x._data if isinstance(x, Tensor) else x for x in data]
            if any(isinstance(x, Tensor) for x in data)
            else data
        )
    try:
        arr = np.array(data)
    except ValueError as exc:
        from tracegrad.ops.core import ShapeError, user_location_suffix

        raise ShapeError(
            f"tensor(): ragged nested sequence: every row must have the same "
            f"length ({exc})" + user_location_suffix()
        ) from None
    if arr.dtype == object:
        from tracegrad.ops.core import user_location_suffix

        raise TypeError(
            "tensor(): could not infer dtype: the data holds values that are not "
            "numbers" + user_location_suffix()
        )
    if npd is None:
        npd = _inferred_dtype(data)
    if npd is None:
        if arr.dtype.kind == "f":
            npd = _dt.default_float()
        elif arr.dtype.kind in "iu":
            npd = np.dtype(np.int64)
        elif arr.dtype.kind == "b":
            npd = np.dtype(np.bool_)
        elif arr.dtype.kind in "US":
            raise TypeError("tensor(): strings are not numbers")
    return np.asarray(arr, dtype=npd, order="C")  # (ascontiguousarray would make 0-d 1-d)
