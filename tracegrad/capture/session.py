"""One capture in progress: the user's state lifted into graph inputs, and back.

While a PyTorch-style function is traced, every piece of state it reads becomes a
graph input, read again on every call (never a constant frozen at trace time):

- a tensor argument, or a tensor met by an eager op (a parameter, a buffer, a
  tensor closed over): its `_data` is swapped for the input's tracer, so every
  alias of the object (the module's `_parameters`, the optimizer's groups) sees it;
- a parameter's `.grad`, read through the parameter (backward inside accumulates);
- an optimizer's state arrays, read through the state dict;
- each random draw, drawn from the eager generator on every call, in order.

Each such slot knows how to read its value at call time and, when the function
changed it (an in-place op, an optimizer step, a new `.grad`), how to write the
new value back after the kernel ran. `restore()` puts every swapped value back,
so tracing leaves the user's objects exactly as they were.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager.capture_hooks import GraphBreak
from tracegrad.ops.core import Aval
from tracegrad.tracing import TraceContext, Tracer, output_node


def _tensor_class():
    from tracegrad.eager._tensor import Tensor

    return Tensor


class Slot:
    """One graph input read from the user's state on every call."""

    label = "state"

    def read(self, leaves: list) -> Any:
        raise NotImplementedError

    def guard(self, leaves: list) -> str | None:
        """Why this slot no longer fits the graph (a retrace), or None."""
        value = self.read(leaves)
        if (
            type(value) is not np.ndarray
            or value.shape != self.aval.shape
            or value.dtype != self.aval.dtype
        ):
            return f"{self.label} is now {_describe(value)}, traced as {self.aval}"
        return None


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return str(Aval(value.shape, value.dtype))
    return type(value).__name__


class TensorSlot(Slot):
    """A tensor object's value (a parameter, a buffer, a tensor closed over)."""

    def __init__(self, tensor, aval: Aval, label: str):
        self.tensor, self.aval, self.label = tensor, aval, label
        self.requires_grad = bool(tensor._requires_grad)

    def read(self, leaves: list):
        return self.tensor._data

    def guard(self, leaves: list) -> str | None:
        if bool(self.tensor._requires_grad) != self.requires_grad:
            return f"{self.label}.requires_grad changed to {self.tensor._requires_grad}"
        return super().guard(leaves)

    def write(self, value: np.ndarray, leaves: list) -> None:
        write_array(self.tensor, value)


class LeafSlot(TensorSlot):
    """A tensor passed as an argument: read from (and written back to) this call's."""

    def __init__(self, index: int, tensor, aval: Aval, label: str):
        super().__init__(tensor, aval, label)
        self.index = index
        self.tensor = None  # the call's own tensor, never the one traced with

    def read(self, leaves: list):
        return leaves[self.index]._data

    def guard(self, leaves: list) -> str | None:
        return None  # (the argument's shape, dtype and requires_grad are the entry's key)

    def write(self, value: np.ndarray, leaves: list) -> None:
        write_array(leaves[self.index], value)


class GradSlot(Slot):
    """A parameter's `.grad`, read through the parameter (the object may be replaced)."""

    def __init__(self, param, aval: Aval, label: str):
        self.param, self.aval, self.label = param, aval, label + ".grad"

    def read(self, leaves: list):
        grad = self.param._grad
        if grad is None:  # (only when the graph never reads it: the guard says so otherwise)
            return np.zeros(self.aval.shape, self.aval.dtype)
        return grad._data

    def guard(self, leaves: list) -> str | None:
        if self.param._grad is None:
            return f"{self.label} is None now, a tensor when traced"
        return super().guard(leaves)

    def write(self, value: np.ndarray, leaves: list) -> None:
        write_array(self.param._grad, value)


class ItemSlot(Slot):
    """An array kept in a dict (an optimizer's state)."""

    def __init__(self, container: dict, key: Any, aval: Aval, label: str):
        self.container, self.key, self.aval, self.label = container, key, aval, label

    def read(self, leaves: list):
        return self.container.get(self.key)

    def write(self, value: np.ndarray, leaves: list) -> None:
        self.container[self.key] = value


class ScalarSlot(ItemSlot):
    """A Python number kept in a dict (an optimizer group's `lr`): a float64 input read on
    every call, so a learning-rate schedule changes no graph."""

    def read(self, leaves: list):
        return np.asarray(self.container.get(self.key), np.float64)

    def guard(self, leaves: list) -> str | None:
        value = self.container.get(self.key)
        if type(value) not in (float, int) or isinstance(value, bool):
            return f"{self.label} is now {type(value).__name__}, traced as a number"
        return None

    def write(self, value, leaves: list) -> None:
        self.container[self.key] = float(value)


class DrawSlot(Slot):
    """A random draw: made from the eager generator on every call, in program order."""

    def __init__(self, source, method: str, args: tuple, kwargs: dict, aval: Aval, label: str):
        self.source, self.method, self.args, self.kwargs = source, method, args, kwargs
        self.aval, self.label = aval, label

    def read(self, leaves: list):
        from tracegrad.eager.creation import draw_now

        return draw_now(self.source, self.method, self.args, self.kwargs)


def write_array(tensor, value: np.ndarray) -> None:
    """Write a kernel's result into a tensor's own memory (in place, version bumped)."""
    data = tensor._data
    if data.shape == np.shape(value) and data.flags.writeable:
        np.copyto(data, value, casting="unsafe")
    else:
        tensor._data = np.array(value, dtype=data.dtype)
    tensor._counter[0] += 1


class StateWriter:
    """What the function left in a place that held no slot: a new `.grad`, a new
    optimizer state entry, a cleared grad. `write(value)` does it again each call."""

    def __init__(self, kind: str, owner: Any, key: Any, label: str):
        self.kind, self.owner, self.key, self.label = kind, owner, key, label

    def write(self, value, leaves: list) -> None:
        Tensor = _tensor_class()
        if self.kind == "set_grad":
            self.owner._grad = Tensor._wrap(np.asarray(value))
        elif self.kind == "clear_grad":
            self.owner._grad = None
        elif self.kind == "state_item":
            optimizer, param = self.owner
            optimizer.state.setdefault(param, {})[self.key] = np.asarray(value)
        elif self.kind == "buffer":
            self.owner._buffers[self.key] = Tensor._wrap(np.asarray(value))


class CaptureSession:
    """The state of one capture (see the module doc). Installed per thread in
    `tracegrad.eager.capture_hooks` while the function is traced."""

    def __init__(self, context: TraceContext, names: dict | None = None):
        self.context = context
        self.slots: list[Slot] = []  # graph inputs after the argument leaves
        self.leaf_slots: list[LeafSlot] = []
        self.names = names or {}  # id(tensor) -> "fc1.weight" (from a root module)
        self._slot_of: dict[int, Slot] = {}
        self._restore: list = []  # callables putting the user's state back
        self.modules: dict[int, Any] = {}
        self.optimizers: dict[int, Any] = {}
        self._grads: dict[int, tuple] = {}  # id(param) -> (param, grad object at the start)
        self._state_keys: dict[int, tuple] = {}  # id(optimizer) -> ({id(p): keys}, params)
        self.backward_ran = False
        self.cleared_first: set = set()  # id(param): zero_grad(set_to_none) before any read
        self.grad_was_none: list = []  # params whose .grad was None when first read
        self._used_names: set = set()

    # ---- inputs
    def _new_input(self, aval: Aval, label: str) -> Tracer:
        name = _identifier(label)
        candidate, n = name, 1
        while candidate in self._used_names:
            candidate, n = f"{name}_{n}", n + 1
        self._used_names.add(candidate)
        return self.context.new_input(aval, candidate)

    def bind_leaf(self, index: int, tensor, tracer: Tracer, label: str) -> None:
        """An argument tensor takes `tracer` as its value while the function runs."""
        slot = LeafSlot(index, tensor, tracer.aval, label)
        self.leaf_slots.append(slot)
        self._swap(tensor, tracer, slot)
        slot.grad_at_start = tensor._grad  # (the entry keeps no argument: see state_outputs)
        grad = tensor._grad

        def restore():
            tensor._grad = grad

        self._restore.append(restore)

    def lift(self, tensor) -> None:
        if id(tensor) in self._slot_of or type(tensor._data) is not np.ndarray:
            return
        base = tensor._base
        if base is not None:  # lift the root; the view is remade from its tracer
            self.lift(base)
            self._swap_view(tensor)
            self._slot_of[id(tensor)] = self._slot_of[id(base)]  # (written back through it)
            return
        data = tensor._data
        label = self.names.get(id(tensor)) or f"tensor{len(self.slots)}"
        aval = Aval(data.shape, data.dtype)
        tracer = self._new_input(aval, label)
        slot = TensorSlot(tensor, aval, label)
        self.slots.append(slot)
        self._swap(tensor, tracer, slot)
        self._note_grad(tensor, label)

    def _swap(self, tensor, tracer: Tracer, slot: Slot) -> None:
        data, counter = tensor._data, tensor._counter[0]
        slot.placeholder = tracer.node
        self._slot_of[id(tensor)] = slot
        tensor._data = tracer

        def restore():
            tensor._data = data
            tensor._counter[0] = counter

        self._restore.append(restore)

    def _swap_view(self, view) -> None:
        from tracegrad.eager._tensor import refresh_view

        data, info = view._data, view.__dict__["_view"]
        seen = info[1]
        info[1] = -1
        refresh_view(view)

        def restore():
            view._data = data
            info[1] = seen

        self._restore.append(restore)

    def grad_cleared(self, param, set_to_none: bool) -> None:
        """zero_grad() is about to clear `param.grad`: if the function had not read it
        yet, the graph never depends on the incoming grad (no input, no guard)."""
        if id(param) in self._grads or not param._requires_grad:
            return
        if not set_to_none:
            self._note_grad(param, self._label_of(param))
            return
        grad = param._grad
        self._grads[id(param)] = (param, grad)
        self.cleared_first.add(id(param))

        def restore():
            param._grad = grad

        self._restore.append(restore)

    def _note_grad(self, tensor, label: str) -> None:
        """A tensor that requires grad: its `.grad` is state the function may change."""
        if not tensor._requires_grad or id(tensor) in self._grads:
            return
        grad = tensor._grad
        self._grads[id(tensor)] = (tensor, grad)
        if grad is None:
            self.grad_was_none.append(tensor)
        if grad is None or type(grad._data) is not np.ndarray:
            return
        data, counter = grad._data, grad._counter[0]
        aval = Aval(data.shape, data.dtype)
        tracer = self._new_input(aval, label + "_grad")
        slot = GradSlot(tensor, aval, label)
        slot.placeholder = tracer.node
        self.slots.append(slot)
        grad._data = tracer

        def restore():
            tensor._grad = grad
            grad._data = data
            grad._counter[0] = counter

        self._restore.append(restore)

    def lift_item(self, container: dict, key: Any, label: str) -> None:
        value = container[key]
        number = type(value) in (float, int)
        aval = Aval((), np.dtype(np.float64)) if number else Aval(value.shape, value.dtype)
        tracer = self._new_input(aval, label)
        slot = (ScalarSlot if number else ItemSlot)(container, key, aval, label)
        slot.placeholder = tracer.node
        self.slots.append(slot)
        container[key] = tracer

        def restore():
            container[key] = value

        self._restore.append(restore)

    # ---- what eager code reports (tracegrad.eager.capture_hooks)
    def module_called(self, module) -> None:
        if id(module) in self.modules:
            return
        self.modules[id(module)] = module
        for p in module._parameters.values():
            if p is not None:
                self.lift(p)
        for b in module._buffers.values():
            if b is not None:
                self.lift(b)

    def optimizer_step(self, optimizer) -> None:
        if not getattr(type(optimizer), "_capturable", False):
            raise GraphBreak(f"{type(optimizer).__name__}.step() has no capturable form")
        if id(optimizer) in self.optimizers:
            raise GraphBreak(f"{type(optimizer).__name__}.step() called twice in one function")
        self.optimizers[id(optimizer)] = optimizer
        before = {}
        for k, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                if p._grad is not None:
                    optimizer._init_state(group, p)
                self.lift(p)
            if type(group.get("lr")) in (float, int):  # schedules change it: an input
                self.lift_item(group, "lr", f"group{k}_lr")
        for k, (p, state) in enumerate(list(optimizer.state.items())):
            before[id(p)] = set(state)
            label = self.names.get(id(p)) or f"param{k}"
            for key, value in list(state.items()):
                if isinstance(value, np.ndarray):
                    self.lift_item(state, key, f"{label}_{key}")
        had_state = set(id(p) for p in optimizer.state)

        def restore():  # drop what the trace added (the writers add it for real)
            for p in list(optimizer.state):
                if id(p) not in had_state:
                    del optimizer.state[p]
                else:
                    state = optimizer.state[p]
                    for key in [k for k in state if k not in before.get(id(p), ())]:
                        del state[key]

        self._restore.append(restore)

    def random_draw(self, method: str, args: tuple, kwargs: dict, source) -> Tracer:
        from tracegrad.eager.creation import draw_now

        sample = draw_now(np.random.default_rng(0), method, args, kwargs)  # shape and dtype
        aval = Aval(sample.shape, sample.dtype)
        label = f"random_{method}"
        tracer = self._new_input(aval, label)
        self.slots.append(DrawSlot(source, method, args, kwargs, aval, label))
        self.slots[-1].placeholder = tracer.node
        return tracer

    def backward_called(self) -> None:
        self.backward_ran = True

    # ---- after the function returned
    def state_outputs(self) -> list[tuple]:
        """(graph node or None, writer) for every piece of state the function changed."""
        out = []
        for slot in self.leaf_slots:
            if self._leaf_tensor(slot)._grad is not slot.grad_at_start:
                raise GraphBreak(
                    "backward() inside the function changed the .grad of an argument "
                    "(captured graphs update the .grad of parameters and tensors "
                    "the function reads, not of its arguments)"
                )
        for slot in self.leaf_slots + self.slots:
            if isinstance(slot, DrawSlot):
                continue
            final = self._final_value(slot)
            if final is _UNCHANGED:
                continue
            out.append((self._node_of(final), slot))
        for param, grad in self._grads.values():
            now = param._grad
            if now is grad:
                continue
            label = self._label_of(param)
            if now is None:
                out.append((None, StateWriter("clear_grad", param, None, label)))
            else:
                out.append((self._node_of(now._data), StateWriter("set_grad", param, None, label)))
        for optimizer in self.optimizers.values():
            for p, state in optimizer.state.items():
                for key, value in state.items():
                    if isinstance(value, Tracer) and not self._is_slot_value(state, key):
                        out.append(
                            (
                                self._node_of(value),
                                StateWriter(
                                    "state_item", (optimizer, p), key, f"{self._label_of(p)}_{key}"
                                ),
                            )
                        )
        for module in self.modules.values():
            for name, b in module._buffers.items():
                if b is not None and id(b) not in self._slot_of and type(b._data) is not np.ndarray:
                    out.append((self._node_of(b._data), StateWriter("buffer", module, name, name)))
        return out

    def _final_value(self, slot: Slot):
        if isinstance(slot, (TensorSlot, LeafSlot)):
            tensor = slot.tensor if not isinstance(slot, LeafSlot) else None
            value = tensor._data if tensor is not None else self._leaf_tensor(slot)._data
        elif isinstance(slot, GradSlot):
            grad = self._grads[id(slot.param)][1]
            if slot.param._grad is not grad:
                return _UNCHANGED  # replaced or cleared: a StateWriter says so
            value = grad._data
        else:
            value = slot.container.get(slot.key)
        if isinstance(value, Tracer) and value.node is slot.placeholder:
            return _UNCHANGED
        return value

    def _leaf_tensor(self, slot: LeafSlot):
        return self._leaf_objects[slot.index]

    def _is_slot_value(self, state: dict, key) -> bool:
        return any(
            isinstance(s, ItemSlot) and s.container is state and s.key == key for s in self.slots
        )

    def _node_of(self, value):
        return output_node(self.context, value)

    def _label_of(self, tensor) -> str:
        slot = self._slot_of.get(id(tensor))
        return slot.label if slot is not None else self.names.get(id(tensor), "tensor")

    def restore(self) -> None:
        for restore in reversed(self._restore):
            restore()
        self._restore.clear()

    def install(self):
        return capture_hooks.install(self)

    @staticmethod
    def install_previous(previous) -> None:
        capture_hooks.install(previous)


_UNCHANGED = object()


def _identifier(label: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in label)
    return out if out and not out[0].isdigit() else "t" + out
