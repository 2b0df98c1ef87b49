"""Custom autograd functions: PyTorch's `torch.autograd.Function`.

Subclass `Function` with static `forward` and `backward` and call `apply`; the
output's `grad_fn` is a `<ClassName>Backward` node that is also the `ctx` the two
methods received (as in PyTorch), and the engine calls `backward` like any other
node: on plain gradients, or, under `create_graph=True`, with grad mode on, so a
backward written in tensor ops can be differentiated again.

    >>> import tracegrad.eager as torch
    >>> class Exp(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         result = x.exp()
    ...         ctx.save_for_backward(result)
    ...         return result
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (result,) = ctx.saved_tensors
    ...         return grad_output * result
    >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
    >>> y = Exp.apply(x)
    >>> y.grad_fn.name()
    'ExpBackward'
    >>> y.sum().backward(); x.grad
    tensor([1.0000, 2.7183])

The newer style (`forward(*args)` plus `setup_context(ctx, inputs, output)`),
`ctx.save_for_backward` / `saved_tensors` with version checks, `needs_input_grad`,
`mark_dirty`, `mark_non_differentiable`, `set_materialize_grads`, several outputs,
non-tensor arguments and outputs, `once_differentiable` and PyTorch's error texts
for wrong gradients all follow PyTorch 2.x.

One difference: when a function has several differentiable outputs, PyTorch gives
them one shared node (`a.grad_fn is b.grad_fn`, told apart by `output_nr`); this
engine has no output numbers, so each such output gets its own node of the same
`<ClassName>Backward` class that stands for the shared one (same name, saved
tensors, ctx attributes and `next_functions`; hooks registered on any of them are
the shared node's hooks). An input returned as it is becomes a view of that input,
and changing either in place and then using the view raises PyTorch's error (for a
leaf input, the in-place change already raises PyTorch's leaf-view error). Forward-mode AD is not implemented (`jvp` is never called; the default raises
PyTorch's NotImplementedError).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
import traceback
import warnings
import weakref
from typing import Any

import numpy as np

from tracegrad.eager._tensor import Tensor, _make_view, check_inplace, commit_inplace
from tracegrad.eager.grad_mode import STATE, no_grad
from tracegrad.eager.graph import (
    FREED_MESSAGE,
    HOOKS_ACTIVE,
    Node,
    _pack_one,
    fit_to,
    grad_accumulator,
    saved_hooks_stack,
    version_message,
)
from tracegrad.ops.core import TracegradError

__all__ = [
    "FunctionCtx",
    "BackwardCFunction",
    "FunctionMeta",
    "Function",
    "once_differentiable",
    "InplaceFunction",
]

AUTOGRAD_FUNCTION_COUNTER = itertools.count()

LEGACY_MESSAGE = (
    "Legacy autograd function with non-static forward method is deprecated. Please use "
    "new-style autograd function with static forward method. (Example: "
    "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
)
DIRTY_NOT_RETURNED_MESSAGE = (
    "Some elements marked as dirty during the forward method were not returned as output. "
    "The inputs that are modified inplace must all be outputs of the Function."
)
DIRTY_LEAF_MESSAGE = "a leaf Variable that requires grad has been used in an in-place operation."
DIRTY_NOT_INPUT_MESSAGE = (
    "ctx.mark_dirty() received a tensor that was not an input. Only "
    "input Tensors that have been mutated should be passed to "
    "ctx.mark_dirty()."
)
DIRTY_VIEW_MULTI_OUTPUT_MESSAGE = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do "
    "this change."
)
CLEARED_MESSAGE = (
    "saved_tensors can only be accessed once when "
    "clear_saved_tensors_on_access=True is set on the autograd.Function. Either "
    "access saved_tensors only once, or set clear_saved_tensors_on_access=False."
)
AS_IS_VIEW_TAIL = (
    " This view was created inside a custom Function (or because an input was returned as-is) "
    "and the autograd logic to handle view+inplace would override the custom backward "
    "associated with the custom Function, leading to incorrect gradients. This behavior is "
    "forbidden. You can fix this by cloning the output of the custom Function."
)
ONCE_DIFFERENTIABLE_MESSAGE = (
    "trying to differentiate twice a function that was marked with @once_differentiable"
)


# ================================================================== the context


class FunctionCtx:
    """What `forward`/`setup_context` use to hand things to `backward` (PyTorch's
    FunctionCtx); the `ctx` of `Function.apply` is the output's grad_fn node, which
    adds `saved_tensors` and `needs_input_grad`.

    >>> import tracegrad.eager as torch
    >>> ctx = torch.autograd.function.FunctionCtx()
    >>> ctx.save_for_backward(torch.ones(2)); ctx.to_save
    (tensor([1., 1.]),)
    """

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep tensors (or None) for backward; read them back as `ctx.saved_tensors`."""
        self.to_save = tensors

    def save_for_forward(self, *tensors: Tensor | None) -> None:
        """Keep tensors for `jvp` (stored; forward-mode AD is not implemented)."""
        for t in tensors:
            if not (isinstance(t, Tensor) or t is None):
                raise AssertionError(
                    "save_for_forward expects all arguments to be tensors; "
                    "you should save non-tensors as attributes on ctx."
                )
        self.saved_for_forward = tensors

    def mark_dirty(self, *args: Tensor) -> None:
        """Declare inputs that forward modified in place (they must be returned)."""
        self.dirty_tensors = args

    def mark_shared_storage(self, *pairs) -> None:
        warnings.warn(
            "`mark_shared_storage` is deprecated. Tensors with shared storages are "
            "automatically tracked. Note that calls to `set_()` are not tracked",
            FutureWarning,
            stacklevel=2,
        )

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """Declare outputs that get no gradient (backward still receives zeros for them)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """False: backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = value


# ================================================================== the node


_NODE_SLOTS = frozenset(Node.__slots__) - {"__weakref__"}


class BackwardCFunction(FunctionCtx, Node):
    """The node (and ctx) of one `Function.apply` call; one subclass per Function,
    named `<ClassName>Backward`, made by FunctionMeta."""

    _forward_cls: type = None
    materialize_grads = True
    _materialize_non_diff_grads = True
    _primary = None  # set on the per-output nodes of a multi-output call
    _user_phase_cls: type = None  # this class with _UserPhase mixed in (see there)

    def __init__(self):
        Node.__init__(self, None, {}, type(self).__name__, (), (), (), None, None, None, True)
        self._saved = None  # entries made by _save_tensors, None once freed
        self._outputs = ()  # per output: (shape, dtype, differentiable) or None
        self._slot = None  # the output index this node stands for (one output)
        self._aliases = None  # output index -> weakref of its node (several outputs)
        self._arg_is_tensor = ()
        self._fn_pre_hooks = None  # hooks of a multi-output call, run inside apply
        self._fn_post_hooks = None

    def __getattr__(self, name: str):
        primary = self.__dict__.get("_primary")
        if primary is not None and not name.startswith("__"):
            return getattr(primary, name)
        return Node.__getattr__(self, name)

    def __repr__(self) -> str:
        return f"<torch.autograd.function.{self._name} object at {hex(id(self))}>"

    # ---------------------------------------------------------- PyTorch API
    def _get_user_fn(self):
        fwd = self._forward_cls
        backward_fn, vjp_fn = fwd.backward, fwd.vjp
        if backward_fn is not Function.backward and vjp_fn is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function "
                "is not allowed. You should only implement one of them."
            )
        return vjp_fn if vjp_fn is not Function.vjp else backward_fn

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to save_for_backward, after PyTorch's version checks."""
        primary = self._primary
        if primary is not None:
            return primary.saved_tensors
        if self._saved is None:
            if self.__dict__.get("_cleared"):
                raise RuntimeError(CLEARED_MESSAGE)
            if self.freed:
                raise RuntimeError(FREED_MESSAGE)
            return tuple(self.__dict__.get("to_save", ()))  # still inside forward
        tensors = tuple(self._unpack(entry) for entry in self._saved)
        if self._forward_cls.clear_saved_tensors_on_access:
            self._saved = None  # the caller now holds the only references
            self._cleared = True
        return tensors

    @property
    def saved_tensors_info(self) -> list:
        """(label, shape, dtype) of each saved tensor, for the graph drawer (no checks)."""
        primary = self._primary
        if primary is not None:
            return primary.saved_tensors_info
        info = []
        for i, entry in enumerate(self._saved or ()):
            if entry is None:
                continue
            if entry[0] == "packed":
                shape, dtype = entry[1].shape, entry[1].dtype
            else:
                data = entry[1] if entry[0] == "out" else entry[1]._data
                shape, dtype = data.shape, data.dtype
            info.append((f"saved_tensors[{i}]", tuple(shape), str(dtype)))
        return info

    @property
    def saved_variables(self) -> tuple:
        warnings.warn(
            "'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2
        )
        return self.saved_tensors

    @property
    def next_functions(self) -> tuple:
        primary = self._primary
        return primary.next_functions if primary is not None else Node.next_functions.fget(self)

    @property
    def metadata(self) -> dict:
        primary = self._primary
        return primary.metadata if primary is not None else Node.metadata.fget(self)

    def register_hook(self, fn):
        """Post-hook fn(grad_inputs, grad_outputs), after backward ran."""
        owner = self._hook_owner()
        if owner is None:
            return Node.register_hook(self, fn)
        from tracegrad.eager.hooks import add_hook

        if owner._fn_post_hooks is None:
            owner._fn_post_hooks = {}
        return add_hook(owner._fn_post_hooks, fn)

    def register_prehook(self, fn):
        """Pre-hook fn(grad_outputs) -> new grad_outputs or None, before backward runs."""
        owner = self._hook_owner()
        if owner is None:
            return Node.register_prehook(self, fn)
        from tracegrad.eager.hooks import add_hook

        if owner._fn_pre_hooks is None:
            owner._fn_pre_hooks = {}
        return add_hook(owner._fn_pre_hooks, fn)

    def _hook_owner(self):
        """The shared node of a multi-output call (its hooks see every output), else None."""
        if self._primary is not None:
            return self._primary
        return self if self._aliases is not None else None

    # ------------------------------------------------------------ saving
    def _save_tensors(self, to_save, outputs: list) -> None:
        """Record the saved tensors with their versions (after outputs are wrapped, so a
        saved output or dirty input is recognised and kept without a reference cycle)."""
        entries = []
        pack = None
        if HOOKS_ACTIVE[0]:
            stack = saved_hooks_stack()
            if stack and stack[-1] is not None:
                pack = stack[-1]
        for i, t in enumerate(to_save):
            if t is None:
                entries.append(None)
                continue
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} "
                    f"is of type {type(t).__name__}"
                )
            slot = None
            if any(o is t for o in outputs) and t._grad_fn is not None and self._owns(t._grad_fn):
                slot = t._grad_fn._slot  # the output this tensor is (its last place)
            if pack is not None:
                entries.append(("packed", _pack_one(pack[0], pack[1], t, slot is not None), slot))
            elif slot is not None:  # keep the array, not the tensor that points back here
                entries.append(("out", t._data, t._counter, t._counter[0], slot))
            else:
                entries.append(("in", t, t._counter, t._counter[0], None))
        self._saved = entries

    def _owns(self, node) -> bool:
        return node is self or getattr(node, "_primary", None) is self

    def _unpack(self, entry):
        if entry is None:
            return None
        kind = entry[0]
        if kind == "packed":
            t = entry[1].unpack()
            return self._as_output(t._data, None, entry[2]) if entry[2] is not None else t
        _, value, counter, version, slot = entry
        if counter[0] != version:
            data = value if slot is not None else value._data
            tensor = None if slot is not None else value
            message = version_message((data, counter, version, tensor, slot is not None), self)
            if slot:
                message = message.replace("output 0 of", f"output {slot} of", 1)
            raise RuntimeError(message)
        if slot is None:
            return value
        return self._as_output(value, counter, slot)

    def _as_output(self, data, counter, slot: int) -> Tensor:
        """A saved output as a tensor whose grad_fn is this call (double backward flows
        through it again, as in PyTorch)."""
        t = Tensor._wrap(data)
        if counter is not None:
            t._counter = counter
        t._requires_grad = True
        t._grad_fn = self._node_for(slot)
        return t

    def _node_for(self, slot: int):
        if self._aliases is None:
            return self
        ref = self._aliases.get(slot)
        node = ref() if ref is not None else None
        if node is None:
            node = _make_alias(self, slot)
        return node

    def release(self) -> None:
        if self._primary is None:
            self._saved = None
            self.freed = True

    # ------------------------------------------------------------ backward
    def apply(self, *args):
        """The engine's call `apply(g, as_tensors)`: the user's backward on this call's
        gradients, one result per tensor input. Called by hand with gradients, as
        `grad_fn.apply(*grads)` in PyTorch: the user's backward, unchecked."""
        if len(args) == 2 and type(args[1]) is bool:
            return self._apply_from_engine(*args)
        primary = self._primary if self._primary is not None else self
        user_fn = primary._get_user_fn()
        plain = _enter_user_phase(primary)
        try:
            return user_fn(primary, *args)
        finally:
            object.__setattr__(primary, "__class__", plain)

    def _apply_from_engine(self, g, as_tensors: bool):
        if self._primary is not None:  # one output of several: hand the gradient on
            return [_OutputGrads({self._slot: g})]
        if type(g) is _OutputGrads:
            by_slot = g.by_slot
        else:
            by_slot = {self._slot: g}
        grads = self._grad_outputs(by_slot, as_tensors)
        if self._fn_pre_hooks:
            grads = _run_pre_hooks(self._fn_pre_hooks, grads)
        user_fn = self._get_user_fn()
        plain = _enter_user_phase(self)
        try:
            if self._forward_cls.boxed_grads_call:  # one mutable list, to free grads early
                result = user_fn(self, list(grads))
            else:
                result = user_fn(self, *grads)
        finally:
            object.__setattr__(self, "__class__", plain)
        results = self._check_results(result, as_tensors)
        if self._fn_post_hooks:
            results = self._run_post_hooks(results, grads, as_tensors)
        return results

    def _grad_outputs(self, by_slot: dict, as_tensors: bool) -> list:
        grads = []
        for k, meta in enumerate(self._outputs):
            g = by_slot.get(k)
            if g is not None:
                grads.append(g if isinstance(g, Tensor) else Tensor._wrap(g))
            elif meta is None:
                grads.append(None)  # a non-tensor output
            elif self.materialize_grads and (meta[2] or self._materialize_non_diff_grads):
                grads.append(Tensor._wrap(np.zeros(meta[0], meta[1])))
            else:
                grads.append(None)
        return grads

    def _check_results(self, result, as_tensors: bool) -> list:
        """PyTorch's checks of what backward returned (python_function.cpp and
        validate_outputs), then each gradient fitted to its input's shape and dtype."""
        name = self._name
        if not isinstance(result, tuple):
            result = (result,)
        n_in = len(self._arg_is_tensor)
        if len(result) > n_in and all(r is None for r in result[n_in:]):
            result = result[:n_in]
        if len(result) != n_in:
            raise RuntimeError(
                f"function {name} returned an incorrect number of gradients "
                f"(expected {n_in}, got {len(result)})"
            )
        results = [None] * len(self.inputs)
        edge = -1
        for i, (r, is_tensor) in enumerate(zip(result, self._arg_is_tensor, strict=True)):
            if not is_tensor:
                if r is not None:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None "
                        f"at position {i + 1}, but the corresponding forward "
                        "input was not a Variable"
                    )
                continue
            edge += 1
            if r is None:
                continue
            if not isinstance(r, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
            if self.inputs[edge] is None:
                continue  # that input needs no gradient
            shape, dtype = self.in_meta[edge]
            got = r._data.shape
            if got != shape and not _expandable(shape, got):
                raise RuntimeError(
                    f"Function {name} returned an invalid gradient at index {edge} - got "
                    f"[{', '.join(map(str, got))}] but expected shape compatible with "
                    f"[{', '.join(map(str, shape))}]"
                )
            results[edge] = fit_to(r if as_tensors else r._data, (shape, dtype), as_tensors)
        return results

    def _run_post_hooks(self, results: list, grads: list, as_tensors: bool) -> list:
        grad_outputs = tuple(grads)
        for fn in list(self._fn_post_hooks.values()):
            grad_inputs = tuple(
                r if r is None or isinstance(r, Tensor) else Tensor._wrap(r) for r in results
            )
            out = fn(grad_inputs, grad_outputs)
            if out is None:
                continue
            if not isinstance(out, tuple) or len(out) != len(results):
                raise RuntimeError(
                    f"hook '{getattr(fn, '__name__', '<unknown>')}' has returned "
                    f"an incorrect number of values (got "
                    f"{len(out) if isinstance(out, tuple) else 1}, but expected "
                    f"{len(results)})"
                )
            results = [None if v is None else (v if as_tensors else v._data) for v in out]
        return results


class _UserPhase:
    """Mixed into a node's class while the user's forward/setup_context/backward run:
    a ctx attribute named like one of the engine's own node fields (`ctx.inputs = ...`)
    then lives in the instance dict, so neither side overwrites the other. (Swapping
    the class keeps these Python-level hooks off the engine's path.)"""

    def __setattr__(self, name: str, value) -> None:
        if name in _NODE_SLOTS:
            self.__dict__[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattribute__(self, name: str):
        if name in _NODE_SLOTS:
            d = object.__getattribute__(self, "__dict__")
            if name in d:
                return d[name]
        return object.__getattribute__(self, name)


def _enter_user_phase(node: BackwardCFunction) -> type:
    plain = type(node)
    object.__setattr__(node, "__class__", plain._user_phase_cls)
    return plain


def _run_pre_hooks(hooks: dict, grads: list) -> list:
    for fn in list(hooks.values()):
        out = fn(tuple(grads))
        if out is None:
            continue
        if not isinstance(out, tuple):
            raise TypeError(f"expected tuple, but hook returned '{type(out).__name__}'")
        if len(out) != len(grads):
            raise RuntimeError(
                f"hook '{getattr(fn, '__name__', '<unknown>')}' has returned an "
                f"incorrect number of values (got {len(out)}, but expected "
                f"{len(grads)})"
            )
        grads = list(out)
    return grads


def _expandable(shape: tuple, target: tuple) -> bool:
    """PyTorch's is_expandable_to: `shape` broadcasts to `target` (the gradient is summed)."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


class _OutputGrads:
    """The gradients of several outputs of one call, keyed by output index; the engine
    adds these as it adds arrays, so the shared node receives them all at once."""

    __slots__ = ("by_slot",)
    __array_ufunc__ = None

    def __init__(self, by_slot: dict):
        self.by_slot = by_slot

    def __add__(self, other: _OutputGrads) -> _OutputGrads:
        merged = dict(self.by_slot)
        for k, g in other.by_slot.items():
            merged[k] = g if merged.get(k) is None else merged[k] + g
        return _OutputGrads(merged)

    __radd__ = __add__


def _make_alias(primary: BackwardCFunction, slot: int) -> BackwardCFunction:
    """The node of output `slot` of a multi-output call: same class and name as the
    shared node, its only edge leads there."""
    node = primary._forward_cls._backward_cls()  # (not type(primary): in backward that
    # is the user-phase class, see _UserPhase)
    node._primary = primary
    node._slot = slot
    node.inputs = (primary,)
    node.in_meta = (None,)
    node.saved = False
    primary._aliases[slot] = weakref.ref(node)
    return node


# ================================================================== the Function


class FunctionMeta(type):
    """Gives each Function subclass its node class `<ClassName>Backward`."""

    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        backward_cls._autograd_function_id = next(AUTOGRAD_FUNCTION_COUNTER)
        backward_cls._user_phase_cls = type(
            backward_cls.__name__,
            (_UserPhase, backward_cls),
            {"__module__": backward_cls.__module__},
        )
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base class of custom autograd functions (PyTorch's torch.autograd.Function):
    override the static `forward` and `backward` and call `apply` (see the module
    docstring for an example)."""

    generate_vmap_rule = False
    clear_saved_tensors_on_access = False  # True: saved_tensors can be read once
    boxed_grads_call = False  # True: backward(ctx, grads) gets one list of gradients

    def __init__(self, *args, **kwargs):
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd "
            "functions are all static, so you should invoke them on the class itself. "
            "Instantiating an autograd function will raise an error in a future "
            "version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(LEGACY_MESSAGE)

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        """forward(ctx, *args) -> outputs, or forward(*args) with setup_context."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> Any:
        """Override (with a ctx-less forward) to fill ctx from the inputs and output."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """One gradient per forward input (None for non-tensors) from one per output."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for "
            "your custom autograd.Function to use it with backward "
            "mode AD."
        )

    vjp = backward  # PyTorch: define either one

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the jvp function for custom "
            "autograd.Function to use it with forward mode AD."
        )

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override "
            "the vmap staticmethod or set generate_vmap_rule=True."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward without recording its ops, and link the outputs to one
        `<ClassName>Backward` node whose backward is `cls.backward`."""
        has_setup = cls.setup_context is not Function.setup_context
        if has_setup:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        elif kwargs:  # PyTorch counts keyword arguments as inputs, in signature order
            bound = inspect.signature(cls.forward).bind(None, *args, **kwargs)
            args, kwargs = bound.args[1:], bound.kwargs
        _refuse_traced(cls, args)
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        executable = STATE.grad_enabled and any(ctx.needs_input_grad)
        if executable:
            _link_inputs(ctx, args)
        plain = _enter_user_phase(ctx)
        try:
            with no_grad():
                if has_setup:
                    output = cls.forward(*args, **kwargs)
                    cls.setup_context(ctx, args, output)
                else:
                    output = cls.forward(ctx, *args, **kwargs)
        finally:
            object.__setattr__(ctx, "__class__", plain)
        return _wrap_outputs(ctx, args, output, executable)


def _refuse_traced(cls, args: tuple) -> None:
    """Under tracegrad.compile/grad the arguments are tracers: their gradient comes from
    tracing forward, so the custom backward would be silently ignored."""
    tracing = sys.modules.get("tracegrad.tracing")
    if tracing is None:
        return  # nothing was ever traced
    for i, a in enumerate(args):
        if isinstance(a, tracing.Tracer):
            raise TypeError(
                f"{cls.__name__}.apply: argument {i} is a traced value "
                f"({np.dtype(a.dtype).name}{list(a.shape)}, inside tracegrad.compile, grad or "
                "another transform); a custom autograd.Function's backward is eager-only and "
                "would be ignored there. Define the custom gradient with tracegrad.custom_vjp "
                "(f.defvjp(fwd, bwd)) instead, or call the function on eager tensors."
            )


def _link_inputs(ctx: BackwardCFunction, args: tuple) -> None:
    """The node's edges: one per tensor argument (None where it needs no gradient)."""
    inputs, in_meta, is_tensor = [], [], []
    for a in args:
        if not isinstance(a, Tensor):
            is_tensor.append(False)
            continue
        is_tensor.append(True)
        in_meta.append((a._data.shape, a._data.dtype))
        if a._requires_grad:
            fn = a.grad_fn if a._base is not None else a._grad_fn  # (refreshes a view)
            inputs.append(fn if fn is not None else grad_accumulator(a))
        else:
            inputs.append(None)
    ctx.inputs = tuple(inputs)
    ctx.in_meta = tuple(in_meta)
    ctx._arg_is_tensor = tuple(is_tensor)
    if STATE.anomaly:
        from tracegrad.eager.engine import anomaly_trace

        # up to the user's `Fn.apply(...)` line (this frame and apply's dropped)
        ctx.trace = anomaly_trace(traceback.format_stack()[:-2])


def _wrap_outputs(ctx: BackwardCFunction, args: tuple, output, executable: bool):
    """PyTorch's _wrap_outputs: inputs returned as they are become new tensors sharing
    their memory, dirty inputs get their history rebased onto this call, and the
    differentiable outputs get this call's node as grad_fn."""
    is_tuple = isinstance(output, tuple)
    raw = list(output) if is_tuple else [output]
    dirty = ctx.__dict__.get("dirty_tensors") or ()
    non_diff = ctx.__dict__.get("non_differentiable") or ()
    for d in dirty:
        if not any(d is o for o in raw):
            raise RuntimeError(DIRTY_NOT_RETURNED_MESSAGE)
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    _check_dirty(dirty, input_ids, raw, executable)
    outputs, metas, last_slot = [], [], {}
    for k, o in enumerate(raw):
        if not isinstance(o, Tensor):
            outputs.append(o)
            metas.append(None)
            continue
        is_dirty = any(o is d for d in dirty)
        if id(o) in input_ids and not is_dirty:
            alias = Tensor._wrap(o._data)  # PyTorch returns a view of the input
            alias._counter = o._counter
            o = alias
        differentiable = (
            executable and o._data.dtype.kind in "fc" and not any(o is n for n in non_diff)
        )
        outputs.append(o)
        metas.append((o._data.shape, o._data.dtype, differentiable))
        if differentiable:
            last_slot[id(o)] = k
        elif is_dirty:
            o._counter[0] += 1  # mark_dirty bumps the version
    ctx._outputs = tuple(metas)
    if executable:
        _link_outputs(ctx, outputs, dirty, last_slot)
        ctx._save_tensors(ctx.__dict__.get("to_save", ()), outputs)
        _guard_views(ctx, outputs, raw, metas, dirty)
    for name in ("to_save", "dirty_tensors", "non_differentiable"):  # they may hold outputs:
        ctx.__dict__.pop(name, None)  # dropped, as PyTorch does, so no cycle outlives them
    return tuple(outputs) if is_tuple else outputs[0]


def _guard_views(ctx, outputs: list, raw: list, metas: list, dirty) -> None:
    """Differentiable outputs that share memory with something else (an input returned
    as it is, or a view made in forward) get a last view op that refuses to be replayed,
    so in-place changes cannot silently replace this call's backward (see _AsIsOutput)."""
    done = set()
    for k, (o, r) in enumerate(zip(outputs, raw, strict=True)):
        if (
            not isinstance(o, Tensor)
            or not metas[k][2]
            or id(o) in done
            or any(r is d for d in dirty)
        ):
            continue
        done.add(id(o))
        base = r if o is not r else (o if o._base is not None else None)
        if base is not None:
            _make_view(
                o, base, _AsIsOutput(o, f"Output {k} of {ctx._name[: -len('Backward')]}"), {}
            )
            o.__dict__.pop("_creation", None)  # the custom Function's own view error applies


def _check_dirty(dirty, input_ids: set, raw: list, executable: bool) -> None:
    """PyTorch's checks of mark_dirty's arguments (custom_function.cpp)."""
    for d in dirty:
        if id(d) not in input_ids:
            if d._base is not None:
                raise RuntimeError(DIRTY_NOT_INPUT_MESSAGE)
            warnings.warn(DIRTY_NOT_INPUT_MESSAGE, UserWarning, stacklevel=4)
    if (
        executable
        and any(d._base is not None for d in dirty)
        and sum(isinstance(o, Tensor) for o in raw) > 1
    ):
        raise RuntimeError(DIRTY_VIEW_MULTI_OUTPUT_MESSAGE)


def _link_outputs(ctx: BackwardCFunction, outputs: list, dirty, last_slot: dict) -> None:
    if len(last_slot) > 1:
        ctx._aliases = {}
    done = set()
    for k, o in enumerate(outputs):
        if not isinstance(o, Tensor) or last_slot.get(id(o)) != k or id(o) in done:
            continue
        done.add(id(o))
        if ctx._aliases is None:
            ctx._slot = k
            node = ctx
        else:
            node = _make_alias(ctx, k)
        if any(o is d for d in dirty):
            if o._requires_grad and o._grad_fn is None and o._base is None:  # a leaf
                o._counter[0] += 1  # PyTorch bumps the version before it checks
                raise RuntimeError(DIRTY_LEAF_MESSAGE)
            check_inplace(o)
            result = Tensor._wrap(o._data)
            result._grad_fn = node
            result._requires_grad = True
            commit_inplace(o, result)  # bumps the version, rebases a view's base
        else:
            o._grad_fn = node
            o._requires_grad = True


class _CustomFunctionViewError(TracegradError, RuntimeError):
    """An input a Function returned as it is was changed in place (PyTorch forbids it)."""


class _AsIsOutput:
    """The view op of an input that a Function returned as it is. The output shares the
    input's memory, so the engine's view logic would remake its history from the input
    (dropping the custom backward) when either is changed in place; it does that by
    replaying this op, which raises PyTorch's error instead."""

    kind = "custom_function_view"
    nondiff = True
    name = "custom_function_output"

    def __init__(self, output: Tensor, label: str):
        self.output = weakref.ref(output)
        self.label = label  # "Output 0 of Id"
        self.version = output._counter[0]
        self.counter = output._counter

    def impl(self, *arrays, **attrs):
        changed = self.counter[0] != self.version
        output = self.output()
        if output is not None:
            output.__dict__["_view"][1] = -1  # raise again at the next use, too
        what = (
            "its base or another view of its base has been modified inplace."
            if changed
            else "is being modified inplace."
        )
        raise _CustomFunctionViewError(f"{self.label} is a view and {what}{AS_IS_VIEW_TAIL}")


# ================================================================== once_differentiable


class DelayedError(Node):
    """A node that raises when backward reaches it (PyTorch's torch::autograd::Error):
    what `once_differentiable` puts behind the gradients it returns."""

    __slots__ = ("message",)

    def __init__(self, message: str, source: Tensor):
        meta = (source._data.shape, source._data.dtype)
        Node.__init__(
            self,
            None,
            {},
            "torch::autograd::Error",
            (grad_accumulator(source),),
            (meta,),
            (),
            None,
            meta,
            None,
            False,
        )
        self.message = message

    def apply(self, g, as_tensors: bool):
        raise RuntimeError(self.message)


def once_differentiable(fn):
    """Decorate a backward that is not itself differentiable: it runs under no_grad,
    and differentiating its results (double backward) raises PyTorch's error."""

    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        with no_grad():
            outputs = fn(ctx, *args, **kwargs)
        if not STATE.grad_enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        wrapped = tuple(
            _delayed_error(o) for o in (outputs if isinstance(outputs, tuple) else (outputs,))
        )
        return wrapped if isinstance(outputs, tuple) else wrapped[0]

    return wrapper


def _delayed_error(value):
    if not isinstance(value, Tensor):
        return value
    source = value.detach()
    source._requires_grad = True
    out = Tensor._wrap(value._data)
    out._grad_fn = DelayedError(ONCE_DIFFERENTIABLE_MESSAGE, source)
    out._requires_grad = True
    return out


class InplaceFunction(Function):
    """Kept for backward compatibility, as in PyTorch (use Function)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace
