"""Backward nodes of the eager graph (PyTorch's `grad_fn` objects).

A `Node` is made by one eager op. It keeps the primitive, its attrs, the
next nodes per operand (None where no gradient flows), the shape/dtype of every
operand (to undo broadcasting) and the values the primitive's `saves` names,
each with the version it had when saved. Its backward runs the primitive's
vjp rules from the rule table; nothing here knows any derivative.

A node never references the tensor it produced (saved outputs are kept as
array + version counter), so graphs have no reference cycles and are freed by
reference counting as soon as the last tensor using them goes away.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, NamedTuple

import numpy as np

from tracegrad.eager.fast_vjps import FAST_VJPS
from tracegrad.eager.grad_mode import STATE
from tracegrad.ops.rulekit import PerOperand
from tracegrad.ops.table import sum_to_shape

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)

HINT_DEFAULT = (
    "Hint: enable anomaly detection to find the operation that failed to compute "
    "its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
)
HINT_ANOMALY = (
    "Hint: the backtrace further above shows the operation that failed to compute "
    "its gradient. The variable in question was changed in there or anywhere later. "
    "Good luck!"
)


class OperandMeta:
    """Stands in for an operand the node did not save: rules may read its
    shape/dtype (np.shape, np.ndim) but not its values."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: np.dtype):
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<unsaved operand {self.dtype}{list(self.shape)}>"


# A saved value is a plain tuple, cheap to make on every recorded op (PyTorch's
# SavedVariable): (array, shared version counter or None, version when saved,
# the input Tensor or None, is_output).
DATA, COUNTER, VERSION, TENSOR, IS_OUTPUT = range(5)


def SavedValue(data, counter, tensor, is_output) -> tuple:
    return (data, counter, counter[0] if counter is not None else 0, tensor, is_output)


def version_message(saved: tuple, node: Node) -> str:
    from tracegrad.eager.dtypes import from_numpy_dtype

    data = saved[DATA]
    kind = from_numpy_dtype(data.dtype)._tensor_type
    desc = f"[torch.{kind} [{', '.join(map(str, data.shape))}]]"
    owner = None
    tensor = saved[TENSOR]
    if saved[IS_OUTPUT]:
        owner = node.name()
    elif tensor is not None and tensor._grad_fn is not None:
        owner = tensor._grad_fn.name()
    if owner is not None:
        desc += f", which is output 0 of {_short_name(owner)},"
    hint = HINT_ANOMALY if STATE.anomaly else HINT_DEFAULT
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: {desc} is at version {saved[COUNTER][0]}; expected version "
        f"{saved[VERSION]} instead. {hint}"
    )


# ------------------------------------------------------- saved-tensor hooks
# torch.autograd.graph.saved_tensors_hooks(pack, unpack): while active (per thread, the
# innermost pair wins), every tensor a node saves goes through pack() at once and the
# node keeps only what pack returned; backward (and `_saved_*`) calls unpack() on it.
# As in PyTorch, values saved through hooks are not version-checked.

_HOOKS_LOCAL = threading.local()
HOOKS_ACTIVE = [0]  # contexts entered in any thread (a cheap test before the thread-local one)


def saved_hooks_stack() -> list:
    stack = getattr(_HOOKS_LOCAL, "stack", None)
    if stack is None:
        stack = _HOOKS_LOCAL.stack = []
    return stack


class Packed:
    """A saved value that went through a pack hook: what pack returned, the unpack hook,
    and what the unpacked tensor needs to stand in for the original."""

    __slots__ = ("packed", "unpack_hook", "shape", "dtype", "is_output")

    def __init__(self, packed, unpack_hook, shape, dtype, is_output):
        self.packed = packed
        self.unpack_hook = unpack_hook
        self.shape = shape
        self.dtype = dtype
        self.is_output = is_output

    def unpack(self):
        from tracegrad.eager._tensor import Tensor

        t = self.unpack_hook(self.packed)
        if not isinstance(t, Tensor):
            raise TypeError(
                f"Output of saved tensor unpack_hook expected to be a Tensor but got "
                f"result of type {type(t).__name__}"
            )
        return t


def _pack_one(pack_hook, unpack_hook, tensor, is_output) -> Packed:
    with _hooks_disabled():  # ops inside pack are not themselves packed (PyTorch)
        packed = pack_hook(tensor)
    return Packed(packed, unpack_hook, tuple(tensor._data.shape), tensor._data.dtype, is_output)


class _hooks_disabled:
    def __enter__(self):
        stack = saved_hooks_stack()
        stack.append(None)
        HOOKS_ACTIVE[0] += 1

    def __exit__(self, *exc):
        saved_hooks_stack().pop()
        HOOKS_ACTIVE[0] -= 1


def pack_saved(node: Node, args, result) -> None:
    """Send the node's saved values through the innermost active pack hook."""
    stack = saved_hooks_stack()
    if not stack or stack[-1] is None:
        return
    pack_hook, unpack_hook = stack[-1]
    from tracegrad.eager._tensor import Tensor

    ops = list(node.operands)
    for i, op in enumerate(ops):
        if type(op) is tuple:
            t = op[TENSOR]
            if t is None:
                t = Tensor._wrap(op[DATA])
            ops[i] = _pack_one(pack_hook, unpack_hook, t, False)
    node.operands = tuple(ops)
    if node.out_saved is not None and type(node.out_saved) is tuple:
        node.out_saved = _pack_one(pack_hook, unpack_hook, result, True)


def _unpacked_operand(node: Node, i: int, p: Packed, as_tensors: bool):
    t = p.unpack()
    if not as_tensors:
        return t._data
    # stand in for the original operand: same history, so double backward reaches it
    from tracegrad.eager._tensor import Tensor

    edge = node.inputs[i]
    w = Tensor._wrap(t._data)
    if edge is not None:
        w._requires_grad = True
        if type(edge) is AccumulateGrad:
            w._acc_ref = weakref.ref(edge)
        else:
            w._grad_fn = edge
    return w


def _short_name(name: str) -> str:
    # torch 2.x names the op, not the node: "ExpBackward0" -> "Exp"
    name = name.rsplit("::", 1)[-1]
    i = name.rfind("Backward")
    return name[:i] if i > 0 else name


class Node:
    """A backward node: `name()`, `next_functions`, `saved_tensors_info`, `metadata`.

    >>> import tracegrad.eager as torch
    >>> x = torch.tensor([1.0], requires_grad=True)
    >>> z = x * 2 + 3
    >>> z.grad_fn.name(), [type(n).__name__ if n else None for n, _ in z.grad_fn.next_functions]
    ('AddBackward0', ['Node', None])
    """

    __slots__ = (
        "prim",
        "attrs",
        "_name",
        "inputs",
        "visible",
        "in_meta",
        "saved",
        "operands",
        "out_saved",
        "out_meta",
        "freed",
        "tensor_hooks",
        "pre_hooks",
        "post_hooks",
        "retain_ref",
        "_metadata",
        "trace",
        "ckpt",
        "extra",
        "__weakref__",
    )

    def __init__(
        self,
        prim,
        attrs,
        name,
        inputs,
        in_meta,
        operands,
        out_saved,
        out_meta,
        visible=None,
        saved=None,
    ):
        self.prim = prim
        self.attrs = attrs
        self._name = name
        self.inputs = inputs  # next node per operand, None where no grad flows
        self.visible = visible  # operand indices PyTorch shows in next_functions
        self.in_meta = in_meta  # (shape, dtype) per operand, None for Python scalars
        self.operands = operands  # per operand: scalar, array, saved tuple, or None (unsaved)
        self.out_saved = out_saved  # saved tuple of the output, or None
        self.out_meta = out_meta  # (shape, dtype) of the output (rules may read its shape)
        if saved is None:
            saved = out_saved is not None or any(type(o) is tuple for o in operands)
        self.saved = saved
        self.freed = False
        self.tensor_hooks = None  # Tensor.register_hook on the tensor this node made
        self.pre_hooks = None  # register_prehook: fn(grad_outputs)
        self.post_hooks = None  # register_hook: fn(grad_inputs, grad_outputs)
        self.retain_ref = None
        self._metadata = None
        self.trace = None
        self.ckpt = None  # non-reentrant checkpoint frame holding its saved values
        self.extra = None  # PyTorch's non-tensor saved attributes: {"dim": 1, ...}

    # ---------------------------------------------------------- PyTorch API
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<{self.display_name()} object at {hex(id(self))}>"

    def display_name(self) -> str:
        """The class name PyTorch shows ("CopySlices" for "torch::autograd::CopySlices")."""
        return self._name.rsplit("::", 1)[-1]

    @property
    def next_functions(self) -> tuple:
        inputs = self.inputs
        idx = range(len(inputs)) if self.visible is None else self.visible
        return tuple((inputs[i], 0) for i in idx)

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def saved_tensors_info(self) -> list:
        """(label, shape, dtype) of each saved value, for the visualizer."""
        if self.freed:
            return []
        info = []
        for i, op in enumerate(self.operands):
            if type(op) is tuple:
                shape, dtype = (
                    self.in_meta[i] if op[DATA] is None else (op[DATA].shape, op[DATA].dtype)
                )
                info.append((_operand_label(self._name, i), tuple(shape), str(dtype)))
            elif type(op) is Packed:
                info.append((_operand_label(self._name, i), op.shape, str(op.dtype)))
        out = self.out_saved
        if type(out) is Packed:
            info.append(("result", out.shape, str(out.dtype)))
        elif out is not None:
            shape, dtype = (
                self.out_meta if out[DATA] is None else (out[DATA].shape, out[DATA].dtype)
            )
            info.append(("result", tuple(shape), str(dtype)))
        return info

    def __getattr__(self, attr: str):
        # PyTorch's saved-value attributes: `_saved_self`, `_saved_mat2`, `_saved_result`...
        # and `_raw_saved_*`, the SavedTensor objects behind them.
        if attr.startswith("_saved_"):
            return self._saved_value(attr[len("_saved_") :])
        if attr.startswith("_raw_saved_"):
            slot = self._saved_slot(attr[len("_raw_saved_") :])
            if slot is None:
                raise AttributeError(f"'{self.display_name()}' object has no attribute '{attr}'")
            return SavedTensor(self, slot)
        raise AttributeError(f"'{self.display_name()}' object has no attribute '{attr}'")

    def _saved_slot(self, label: str):
        """ "out", an operand index, or None: where the saved value `label` lives."""
        if label == "result" and (
            self.out_saved is not None or (self.freed and "out" in _saves_of(self))
        ):
            return "out"
        for i, op in enumerate(self.operands):
            if (
                type(op) is tuple
                or type(op) is Packed
                or (op is None and self.freed and i in _saves_of(self))
            ) and _operand_label(self._name, i) == label:
                return i
        return None

    def _saved_value(self, label: str):
        slot = self._saved_slot(label)
        if slot is None and self.extra is not None and label in self.extra:
            return self.extra[label]  # a number or sizes: kept after backward, as in PyTorch
        if slot is None:
            raise AttributeError(
                f"'{self.display_name()}' object has no attribute '_saved_{label}'"
            )
        return self.saved_tensor(slot)

    def saved_tensor(self, slot):
        """The saved value at `slot` as a tensor (PyTorch's `_saved_*`): the input tensor
        itself, or the output with this node as its grad_fn (so, as in PyTorch, both may
        require grad); through the unpack hook when one packed it."""
        from tracegrad.eager._tensor import Tensor

        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        if self.ckpt is not None:
            self.ckpt.fill(self)
        if slot == "out":
            out = self.out_saved
            if type(out) is Packed:
                t = out.unpack()
                return _output_value((t._data, out_counter_stub(), 0, None, True), self, True)
            return _output_value(out, self, True)
        op = self.operands[slot]
        if type(op) is Packed:
            return _unpacked_operand(self, slot, op, True)
        return op[TENSOR] if op[TENSOR] is not None else Tensor._wrap(op[DATA])

    def register_hook(self, fn):
        """Post-hook fn(grad_inputs, grad_outputs), called after this node runs."""
        from tracegrad.eager.hooks import add_hook

        if self.post_hooks is None:
            self.post_hooks = {}
        return add_hook(self.post_hooks, fn)

    def register_prehook(self, fn):
        """Pre-hook fn(grad_outputs) -> new grad_outputs or None (runs after the tensor's
        own hooks and retain_grad, as in PyTorch)."""
        from tracegrad.eager.hooks import add_hook

        if self.pre_hooks is None:
            self.pre_hooks = {}
        return add_hook(self.pre_hooks, _NodePrehook(fn), node_level=True)

    def __call__(self, *grads):
        """`grad_fn(grad_output)`: this node's backward by hand (no hooks), one result per
        entry of `next_functions` (a tensor when there is one, else a tuple), recorded
        in the graph when grad mode is on, as PyTorch's Node call."""
        from tracegrad.eager._tensor import Tensor

        if len(grads) != 1:
            raise TypeError(f"expected 1 arguments, got {len(grads)} instead")
        g = grads[0]
        if not isinstance(g, Tensor):
            raise TypeError(
                f"{self.display_name()}: expected a Tensor gradient, got {type(g).__name__}"
            )
        meta = self.out_meta
        if type(meta) is tuple and tuple(g.shape) != tuple(meta[0]):
            raise RuntimeError(
                f"{self.display_name()}: the gradient has shape {tuple(g.shape)} but the "
                f"output it stands for has shape {tuple(meta[0])}"
            )
        results = self.apply(g, True)
        idx = range(len(self.inputs)) if self.visible is None else self.visible
        out = tuple(None if results[i] is None else _as_result_tensor(results[i]) for i in idx)
        return out[0] if len(out) == 1 else out

    # ------------------------------------------------------------ backward
    def release(self) -> None:
        if self.saved:
            self.operands = tuple(
                [None if type(o) is tuple or type(o) is Packed else o for o in self.operands]
            )
            self.out_saved = None
            self.freed = True

    def unpack(self, as_tensors: bool):
        """Operands and output for the vjp rules, after the version checks.

        Unsaved operands (and an unsaved output) become OperandMeta stand-ins
        that carry only shape and dtype."""
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        if self.ckpt is not None:
            self.ckpt.fill(self)  # recompute the checkpointed forward (checkpointing.py)
        operands = []
        in_meta = self.in_meta
        for i, op in enumerate(self.operands):
            if op is None:
                shape, dtype = in_meta[i]
                operands.append(OperandMeta(shape, dtype))
            elif type(op) is tuple:
                counter = op[COUNTER]
                if counter is not None and counter[0] != op[VERSION]:
                    raise RuntimeError(version_message(op, self))
                operands.append(op[TENSOR] if as_tensors and op[TENSOR] is not None else op[DATA])
            elif type(op) is Packed:
                operands.append(_unpacked_operand(self, i, op, as_tensors))
            else:
                operands.append(op)
        out = self.out_saved
        if out is None:
            meta = self.out_meta
            return operands, (OperandMeta(*meta) if type(meta) is tuple else meta)
        if type(out) is Packed:
            t = out.unpack()
            return operands, (
                _output_value((t._data, out_counter_stub(), 0, None, True), self, True)
                if as_tensors
                else t._data
            )
        if out[COUNTER][0] != out[VERSION]:
            raise RuntimeError(version_message(out, self))
        return operands, _output_value(out, self, as_tensors)

    def apply(self, g, as_tensors: bool):
        """Gradients for each operand (None where not needed).

        The table's vjp rules follow JAX's convention for complex values (the transpose
        of the jvp); PyTorch's gradient is its conjugate: conj(vjp(conj(g))), so complex
        gradients are conjugated on the way in and on the way out (one set of rules)."""
        if _is_complex_grad(g):
            return [_conj_grad(gi) for gi in self._apply(_conj_grad(g), as_tensors)]
        results = self._apply(g, as_tensors)
        for i, gi in enumerate(results):  # a real gradient may meet a complex operand
            if gi is not None and _is_complex_grad(gi):
                results[i] = _conj_grad(gi)
        return results

    def _apply(self, g, as_tensors: bool):
        operands, out = self.unpack(as_tensors)
        vjps = self.prim.vjps
        attrs = self.attrs
        in_meta = self.in_meta
        inputs = self.inputs
        results = [None] * len(inputs)
        batch = vjps.batch if type(vjps) is PerOperand else None
        if batch is not None:  # one pass over all operands (cat/stack of thousands)
            batched = batch([n is not None for n in inputs], g, out, *operands, **attrs)
        fast = None if as_tensors else FAST_VJPS.get(self.prim)
        for i in range(len(inputs)):
            if inputs[i] is None:
                continue
            gi = NotImplemented
            if fast is not None and fast[i] is not None:
                gi = fast[i](g, out, *operands, **attrs)
            if gi is NotImplemented:
                gi = vjps[i](g, out, *operands, **attrs) if batch is None else batched[i]
            if gi is None:
                continue
            meta = in_meta[i]
            # the common case needs no fitting: same shape and dtype already
            if (
                as_tensors
                or type(gi) is not np.ndarray
                or gi.shape != meta[0]
                or gi.dtype is not meta[1]
            ):
                gi = fit_to(gi, meta, as_tensors)
            results[i] = gi
        return results


def _as_result_tensor(g):
    from tracegrad.eager._tensor import Tensor

    return g if isinstance(g, Tensor) else Tensor._wrap(np.asarray(g))


def _is_complex_grad(g) -> bool:
    if type(g) is np.ndarray:
        return g.dtype.kind == "c"
    if isinstance(g, (np.complexfloating, complex)):  # (a 0-d result as a NumPy scalar)
        return True
    data = getattr(g, "_data", None)  # a Tensor (create_graph)
    return data is not None and getattr(data, "dtype", None) is not None and data.dtype.kind == "c"


def _conj_grad(g):
    """conj(g) for a complex gradient (a recorded op on Tensors); others unchanged."""
    if g is None or not _is_complex_grad(g):
        return g
    if type(g) is np.ndarray or isinstance(g, (np.complexfloating, complex)):
        return np.conjugate(g)
    from tracegrad.eager._tensor import apply_op
    from tracegrad.ops.core import REGISTRY

    return apply_op(REGISTRY["conj"], (g,), {})


def out_counter_stub() -> list:
    return [0]


def _saves_of(node) -> tuple:
    saves = getattr(node.prim, "saves", None)
    return saves if isinstance(saves, tuple) else ()


class SavedTensor:
    """`grad_fn._raw_saved_<name>` (PyTorch's torch._C._autograd.SavedTensor):
    `register_hooks(pack, unpack)` packs this one saved value now and unpacks it
    whenever backward or `_saved_<name>` needs it."""

    __slots__ = ("node", "slot")

    def __init__(self, node, slot):
        self.node = node
        self.slot = slot

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks expects pack_hook and unpack_hook to be callable")
        node = self.node
        value = node.out_saved if self.slot == "out" else node.operands[self.slot]
        if node.freed or value is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. "
                "Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you "
                "need to backward through the graph a second time or if you need "
                "to access saved variables after calling backward."
            )
        if type(value) is Packed:
            raise RuntimeError(
                "SavedTensor hooks have already been set on this SavedTensor. "
                "Please make sure to call register_hooks only once."
            )
        tensor = node.saved_tensor(self.slot)
        packed = _pack_one(pack_hook, unpack_hook, tensor, self.slot == "out")
        if self.slot == "out":
            node.out_saved = packed
        else:
            ops = list(node.operands)
            ops[self.slot] = packed
            node.operands = tuple(ops)

    def _value(self):
        node = self.node
        value = node.out_saved if self.slot == "out" else node.operands[self.slot]
        if node.freed or value is None:
            raise RuntimeError(FREED_MESSAGE)
        return value

    @property
    def data(self):
        """What is stored (PyTorch's SavedTensor.data): a pack hook's result as it is, the
        saved input tensor itself, or a saved output's values (detached)."""
        from tracegrad.eager._tensor import Tensor

        value = self._value()
        if type(value) is Packed:
            return value.packed
        if self.slot == "out":
            return Tensor._wrap(value[DATA]) if value[DATA] is not None else None
        return value[TENSOR] if value[TENSOR] is not None else Tensor._wrap(value[DATA])

    @property
    def unpack_hook(self):
        """The unpack hook of a value saved through saved_tensors_hooks, else None."""
        value = self._value()
        return value.unpack_hook if type(value) is Packed else None

    def __repr__(self) -> str:
        return f"<torch._C._autograd.SavedTensor object at {hex(id(self))}>"


class _NodePrehook:
    """A node pre-hook fn(grad_outputs) -> new grad_outputs or None, called by the
    engine like a tensor hook (one gradient in, one out)."""

    __slots__ = ("fn", "hook_name")

    def __init__(self, fn):
        self.fn = fn
        self.hook_name = getattr(fn, "__name__", None) or "<unknown>"

    def __call__(self, g):
        r = self.fn((g,))
        if r is None:
            return None  # unchanged
        if not isinstance(r, tuple):
            raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
        if len(r) != 1:
            raise RuntimeError(
                f"hook '{self.hook_name}' has returned an incorrect number of "
                f"values (got {len(r)}, but expected 1)"
            )
        return DROP_GRAD if r[0] is None else r[0]


DROP_GRAD = object()  # a node pre-hook returned (None,): no gradient flows on from here


# PyTorch's argument names where they are not (self, other, ...): the `_saved_<name>`
# attributes of its nodes.
_ARG_NAMES = {
    "MmBackward0": ("self", "mat2"),
    "BmmBackward0": ("self", "mat2"),
    "AddmmBackward0": ("self", "mat1", "mat2"),
    "MvBackward0": ("self", "vec"),
    "DotBackward0": ("self", "tensor"),
    "PowBackward0": ("self", "exponent"),
    "PowBackward1": ("self", "exponent"),
    "PowBackward2": ("self", "exponent"),
    "WhereBackward0": ("condition", "self", "other"),
    "MaskedFillBackward0": ("mask", "value", "self"),
    "MaskedFillBackward1": ("mask", "value", "self"),
    "GatherBackward0": ("self", "index"),
    "IndexSelectBackward0": ("self", "index"),
    "ScatterAddBackward0": ("src", "index"),
    "ClampBackward0": ("self", "min", "max"),
}


def _operand_label(node_name: str, i: int) -> str:
    names = _ARG_NAMES.get(node_name)
    if names is not None and i < len(names):
        return names[i]
    return "self" if i == 0 else ("other" if i == 1 else f"input{i}")


def _output_value(saved: tuple, node: Node, as_tensors: bool):
    if not as_tensors:
        return saved[DATA]
    from tracegrad.eager._tensor import Tensor

    t = Tensor._wrap(saved[DATA])
    t._requires_grad = True
    t._grad_fn = node
    t._counter = saved[COUNTER]
    return t


_SCALARS = (np.generic, int, float, bool)


def fit_to(g, meta, as_tensors: bool):
    """Undo broadcasting and cast to the operand's dtype (once, for every op)."""
    shape, dtype = meta
    if as_tensors:
        if tuple(g.shape) != shape:
            g = sum_to_shape(g, shape)
        if g.dtype.np != dtype:
            if g.dtype.np.kind == "c" and dtype.kind != "c":
                g = g.real  # a real operand gets the real part (PyTorch's handle_r_to_c)
            g = g.to(dtype)
        return g
    if isinstance(g, _SCALARS):  # (a tracer, inside tracegrad.compile, stays one)
        g = np.asarray(g)
    if g.shape != shape:
        g = sum_to_shape(g, shape)
        if isinstance(g, _SCALARS):
            g = np.asarray(g)
    if g.dtype != dtype:
        g = (g.real if g.dtype.kind == "c" and dtype.kind != "c" else g).astype(dtype)
    return g


class AccumulateGrad:
    """The node that adds a leaf's gradient into `variable.grad`."""

    __slots__ = ("variable", "pre_hooks", "post_hooks", "_metadata", "__weakref__")
    inputs = ()
    freed = False
    retain_ref = None
    trace = None
    tensor_hooks = None  # a leaf's own hooks live on the tensor (variable._hooks)
    saved_tensors_info: list = []

    def __init__(self, variable):
        self.variable = variable
        self.pre_hooks = None
        self.post_hooks = None
        self._metadata = None

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"

    def display_name(self) -> str:
        return "AccumulateGrad"

    @property
    def next_functions(self) -> tuple:
        return ()

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        """Post-hook fn(grad_inputs=(), grad_outputs=(grad,)), after accumulation."""
        from tracegrad.eager.hooks import add_hook

        if self.post_hooks is None:
            self.post_hooks = {}
        return add_hook(self.post_hooks, fn)

    def register_prehook(self, fn):
        """Pre-hook fn((grad,)) -> new (grad,) or None, after the tensor's own hooks."""
        from tracegrad.eager.hooks import add_hook

        if self.pre_hooks is None:
            self.pre_hooks = {}
        return add_hook(self.pre_hooks, _NodePrehook(fn), node_level=True)

    def release(self) -> None:
        pass


def grad_accumulator(tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad, shared while any graph holds it (weakly held
    by the tensor, as PyTorch does, so there is no cycle)."""
    ref = tensor._acc_ref
    if ref is not None:
        acc = ref()
        if acc is not None:
            return acc
    acc = AccumulateGrad(tensor)
    tensor._acc_ref = weakref.ref(acc)
    return acc


class GradientEdge(NamedTuple):
    """torch.autograd.graph.GradientEdge: one output (`output_nr`) of a backward `node`.
    `autograd.grad` / `backward` take it in place of a tensor, as an output (its gradient
    flows in there) or as an input (the gradient reaching that node is returned), even
    after the tensor itself was changed in place or deleted.

    >>> import tracegrad.eager as torch
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x.clone()
    >>> edge = torch.autograd.graph.get_gradient_edge(y)
    >>> y *= 3
    >>> torch.autograd.grad(y.sum(), (edge, y))
    (tensor([3., 3.]), tensor([1., 1.]))
    """

    node: Any
    output_nr: int


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge the gradient of `tensor` flows in through: its grad_fn (a leaf's
    AccumulateGrad) and its output number."""
    if not tensor.requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require "
            "gradients"
        )
    node = tensor.grad_fn
    if node is None:
        node = grad_accumulator(tensor)
    return GradientEdge(node, tensor.output_nr)


def increment_version(tensor) -> None:
    """torch.autograd.graph.increment_version: mark `tensor` (or each tensor of an iterable)
    as changed in place, so saved copies of it fail their version check in backward."""
    from tracegrad.eager._tensor import Tensor

    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        t._counter[0] += 1


def edge_meta(node) -> tuple:
    """(shape, dtype) of the output a GradientEdge's node stands for."""
    if type(node) is AccumulateGrad:
        return node.variable._data.shape, node.variable._data.dtype
    outputs = getattr(node, "_outputs", None)
    primary = getattr(node, "_primary", None)
    if not outputs and primary is not None:
        outputs = primary._outputs
    if outputs:  # a custom Function's node: its output's (shape, dtype, differentiable)
        slot = getattr(node, "_slot", None) or 0
        return tuple(outputs[slot][0]), outputs[slot][1]
    meta = node.out_meta
    if type(meta) is tuple:
        return tuple(meta[0]), meta[1]
    return tuple(meta.shape), meta.dtype


class saved_tensors_hooks:
    """torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook): inside the
    `with`, every tensor a node saves for backward is replaced by pack_hook(tensor), and
    backward uses unpack_hook(packed) in its place.

    >>> import tracegrad.eager as torch
    >>> seen = []
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t) or t * 1,
    ...                                               lambda p: p):
    ...     y = x * x
    >>> len(seen), y.sum().backward(), x.grad
    (2, None, tensor([2., 4.]))
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _DISABLED_MESSAGE is not None:
            raise RuntimeError(_DISABLED_MESSAGE)
        saved_hooks_stack().append((self.pack_hook, self.unpack_hook))
        HOOKS_ACTIVE[0] += 1
        return self

    def __exit__(self, *exc):
        stack = saved_hooks_stack()
        if stack:  # an extra __exit__ (PyTorch's test does this) must not crash
            stack.pop()
            HOOKS_ACTIVE[0] -= 1
        return False


class save_on_cpu(saved_tensors_hooks):
    """PyTorch's save_on_cpu: saved tensors are kept as CPU copies (tracegrad is all CPU,
    so this keeps a copy of each saved tensor, detached from later in-place changes)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        super().__init__(lambda t: t.detach().clone(), lambda packed: packed)


class disable_saved_tensors_hooks:
    """Inside the `with`, entering saved_tensors_hooks raises `error_message`."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        global _DISABLED_MESSAGE
        self._prev = _DISABLED_MESSAGE
        _DISABLED_MESSAGE = self.error_message
        return self

    def __exit__(self, *exc):
        global _DISABLED_MESSAGE
        _DISABLED_MESSAGE = self._prev
        return False


_DISABLED_MESSAGE = None
