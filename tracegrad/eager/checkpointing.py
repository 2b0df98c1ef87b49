"""Gradient checkpointing: run the forward without saving, recompute it in backward.

`checkpoint(fn, *args, use_reentrant=False)` (PyTorch's recommended variant) records
`fn`'s graph as usual but drops the values its nodes save, and recomputes them (same
RNG state) when backward first needs them; backward runs through the original graph,
so hooks and `retain_grad` behave exactly as without checkpointing (see below).

`checkpoint(fn, *args)` (use_reentrant True or None, PyTorch's current default) runs
`fn` under no_grad and returns its output with a single `CheckpointFunctionBackward` node. When backward reaches that node it
re-runs `fn` with grad enabled on detached copies of the inputs and
backpropagates through the recomputed graph (PyTorch's reentrant variant):
parameters used inside `fn` get their `.grad` as usual, and the inputs' gradients
flow on. Like PyTorch's reentrant checkpoint it is meant for `.backward()`:
`autograd.grad(...)` w.r.t. parameters inside `fn`, and differentiating a
gradient that went through a checkpoint (double backward), are not supported
(the recomputation starts from detached inputs).

`checkpoint_sequential(functions, segments, input)` splits a chain into
`segments` pieces and checkpoints all but the last, so only segment boundaries
stay alive: with segments ~ sqrt(N) the saved activations grow like sqrt(N).

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager import nn
    >>> torch.manual_seed(0) and None
    >>> layers = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(9)])
    >>> x = torch.randn(2, 4, requires_grad=True)
    >>> torch.checkpoint_sequential(layers, 3, x).sum().backward()
    >>> x.grad.shape
    torch.Size([2, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.engine import run_backward
from tracegrad.eager.grad_mode import STATE, enable_grad, no_grad
from tracegrad.eager.graph import Node, grad_accumulator

REENTRANT_GRAD_MESSAGE = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
    "an `inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument."
)


class CheckpointFunctionBackward(Node):
    """Recomputes `fn(*args)` and backpropagates through it."""

    __slots__ = ("fn", "args", "kwargs", "rng_state")

    def __init__(self, fn, args, kwargs, out: np.ndarray):
        inputs, in_meta = [], []
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                inputs.append(a._grad_fn or grad_accumulator(a))
                in_meta.append((a._data.shape, a._data.dtype))
            else:
                inputs.append(None)
                in_meta.append(None)
        super().__init__(
            None,
            {},
            "CheckpointFunctionBackward",
            tuple(inputs),
            tuple(in_meta),
            (),
            None,
            (out.shape, out.dtype),
        )
        self.saved = True
        self.fn = fn
        # Inputs are kept with their versions so an in-place change is caught.
        self.args = [(a, a._counter[0]) if isinstance(a, Tensor) else (a, None) for a in args]
        self.kwargs = kwargs

    @property
    def saved_tensors_info(self) -> list:
        if self.freed:
            return []
        return [
            (f"input{i}", tuple(a._data.shape), str(a._data.dtype))
            for i, (a, _) in enumerate(self.args)
            if isinstance(a, Tensor)
        ]

    def release(self) -> None:
        self.args = None
        self.fn = None
        self.freed = True

    def apply(self, g, as_tensors: bool):
        from tracegrad.eager.graph import FREED_MESSAGE

        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        if STATE.partial_backward:
            # the recomputation's own backward would fill .grad of everything inside
            # instead of returning the asked-for gradients: PyTorch refuses too
            raise RuntimeError(REENTRANT_GRAD_MESSAGE)
        detached = []
        for a, version in self.args:
            if isinstance(a, Tensor):
                if a._counter[0] != version:
                    raise RuntimeError(
                        "checkpoint: an input was modified in place between the forward pass and "
                        f"backward (version {a._counter[0]}, expected {version})"
                    )
                d = a.detach()
                d._requires_grad = a._requires_grad
                detached.append(d)
            else:
                detached.append(a)
        with enable_grad(), _replayed_rng(self.rng_state):
            out = self.fn(*detached, **self.kwargs)
        if not isinstance(out, Tensor) or not out._requires_grad:
            return [None] * len(self.inputs)
        root = out._grad_fn if out._grad_fn is not None else grad_accumulator(out)
        run_backward([root], [g], retain_graph=False, create_graph=as_tensors)
        STATE.grad_enabled = as_tensors  # run_backward restored the outer backward's mode
        results = []
        for d, nxt in zip(detached, self.inputs, strict=True):
            if nxt is None or not isinstance(d, Tensor) or d._grad is None:
                results.append(None)
            else:
                results.append(d._grad if as_tensors else d._grad._data)
        return results


# ------------------------------------------------------------ non-reentrant
# PyTorch's use_reentrant=False: `fn` runs once with grad enabled and records its graph
# as usual, but every node it makes hands its saved values to a _Frame, which drops
# them at once. When backward first needs one of them, the frame re-runs `fn` on the
# same inputs (same RNG state) while a _Recompute collects the nodes it makes, in
# order, and copies their saved values into the original nodes. Backward then runs
# through the ORIGINAL graph only: hooks, retain_grad and leaf accumulation happen
# once, exactly as without checkpointing; the recomputed graph is never run (hooks
# registered while recomputing never fire), as in PyTorch.

USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
    "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
    "exception. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on "
    "the differences between the two variants."
)

METADATA_MESSAGE = (
    "torch.utils.checkpoint: Recomputed values for the following tensors have different "
    "metadata than during the forward pass.\n{}"
)

MISMATCH_MESSAGE = (
    "torch.utils.checkpoint: A different number of tensors was saved during the original "
    "forward and recomputation.\nNumber of tensors saved during forward: {}\nNumber of "
    "tensors saved during recomputation: {}"
)


class _Frame:
    """One non-reentrant checkpoint call: its nodes (weakly) and how to recompute them."""

    __slots__ = ("fn", "args", "kwargs", "versions", "rng_state", "nodes", "filled", "__weakref__")

    def __init__(self, fn, args, kwargs, preserve_rng_state: bool = True):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.versions = [a._counter[0] if isinstance(a, Tensor) else None for a in args]
        self.rng_state = _rng_state() if preserve_rng_state else None
        self.nodes: list = []
        self.filled = False

    def record(self, node: Node) -> None:
        import weakref

        self.nodes.append(weakref.ref(node))
        node.ckpt = self
        self.strip(node)

    @staticmethod
    def strip(node: Node) -> None:
        """Drop the node's saved arrays (and saved input tensors); keep versions."""
        node.operands = tuple(
            [(None, o[1], o[2], None, o[4]) if type(o) is tuple else o for o in node.operands]
        )
        out = node.out_saved
        if out is not None:
            node.out_saved = (None, out[1], out[2], None, out[4])

    def fill(self, node: Node) -> None:
        if self.filled:
            return
        for a, version in zip(self.args, self.versions, strict=True):
            if isinstance(a, Tensor) and a._counter[0] != version:
                # recomputing from a changed input would give different values: PyTorch
                # saves the inputs and raises its usual version error
                from tracegrad.eager.graph import version_message

                raise RuntimeError(version_message((a._data, a._counter, version, a, False), node))
        rec = _Recompute()
        prev = (STATE.grad_enabled, STATE.inference, STATE.ckpt)
        STATE.grad_enabled, STATE.inference, STATE.ckpt = True, False, rec
        try:
            with _replayed_rng(self.rng_state):
                self.fn(*self.args, **self.kwargs)
        finally:
            STATE.grad_enabled, STATE.inference, STATE.ckpt = prev
        if len(rec.nodes) != len(self.nodes):
            raise RuntimeError(MISMATCH_MESSAGE.format(len(self.nodes), len(rec.nodes)))
        differ = [
            f"node {k}: {ref()._name} of {ref().in_meta} during forward, {new._name} of "
            f"{new.in_meta} during recomputation"
            for k, (ref, new) in enumerate(zip(self.nodes, rec.nodes, strict=True))
            if ref() is not None and (ref()._name != new._name or ref().in_meta != new.in_meta)
        ]
        if differ:  # copying these saved values over would give wrong gradients
            raise RuntimeError(METADATA_MESSAGE.format("\n".join(differ)))
        for ref, new in zip(self.nodes, rec.nodes, strict=True):
            node = ref()
            if node is None:
                continue
            node.ckpt = None
            if node.freed:
                continue
            node.operands = tuple(
                [
                    n if type(o) is tuple else o
                    for o, n in zip(node.operands, new.operands, strict=True)
                ]
            )
            if node.out_saved is not None:
                node.out_saved = new.out_saved
        self.filled = True
        self.fn = self.args = self.kwargs = None  # the recomputed values now live in the nodes


class _Recompute:
    """Collects the nodes a recomputation makes, in order (their saved values are kept)."""

    __slots__ = ("nodes",)

    def __init__(self):
        self.nodes: list = []

    def record(self, node: Node) -> None:
        self.nodes.append(node)

    @staticmethod
    def strip(node: Node) -> None:
        pass


def _rng_state():
    from tracegrad.eager.creation import generator

    return generator().bit_generator.state


class _replayed_rng:
    """Run a recomputation from the RNG state of the forward (PyTorch's
    preserve_rng_state), then give the caller its own state back."""

    def __init__(self, state):
        self.state = state

    def __enter__(self):
        if self.state is not None:
            from tracegrad.eager.creation import generator

            self.saved = generator().bit_generator.state
            generator().bit_generator.state = self.state

    def __exit__(self, *exc):
        if self.state is not None:
            from tracegrad.eager.creation import generator

            generator().bit_generator.state = self.saved
        return False


def _checkpoint_without_reentrant(function, args, kwargs, preserve_rng_state: bool = True):
    if not STATE.grad_enabled:
        return function(*args, **kwargs)
    frame = _Frame(function, args, kwargs, preserve_rng_state)
    prev = STATE.ckpt
    STATE.ckpt = frame
    try:
        return function(*args, **kwargs)
    finally:
        STATE.ckpt = prev


def checkpoint(
    function: Callable[..., Tensor],
    *args: Any,
    use_reentrant: bool | None = None,
    preserve_rng_state: bool = True,
    context_fn=None,
    determinism_check=None,
    debug=None,
    **kwargs: Any,
) -> Tensor:
    """`function(*args)` whose intermediate activations are recomputed in backward.

    use_reentrant=False is PyTorch's recommended variant: the graph is recorded as
    usual (any output structure, hooks and retain_grad inside `function` behave as
    without checkpointing, autograd.grad works) and only the values it saves are
    dropped and recomputed. use_reentrant=True (or None, PyTorch's current default)
    is the single-node CheckpointFunctionBackward described above.
    """
    if use_reentrant is None:
        import warnings

        warnings.warn(USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
    if use_reentrant is False:
        return _checkpoint_without_reentrant(function, args, kwargs, preserve_rng_state)
    rng = _rng_state() if preserve_rng_state else None
    with no_grad():
        out = function(*args, **kwargs)
    if not isinstance(out, Tensor):
        raise TypeError(
            "tracegrad.eager.checkpoint: the function must return a single Tensor, "
            f"got {type(out).__name__}"
        )
    result = Tensor._wrap(out._data)
    needs_grad = any(isinstance(a, Tensor) and a._requires_grad for a in args) or _uses_parameters(
        function
    )
    if STATE.grad_enabled and needs_grad:
        result._grad_fn = CheckpointFunctionBackward(function, args, kwargs, out._data)
        result._grad_fn.rng_state = rng
        result._requires_grad = True
    return result


def _uses_parameters(function) -> bool:
    """A Module (or bound method of one) with parameters that require grad."""
    owner = getattr(function, "__self__", function)
    params = getattr(owner, "parameters", None)
    if params is None:
        return False
    return any(p.requires_grad for p in params())


def checkpoint_sequential(
    functions: Sequence[Callable] | Any,
    segments: int,
    input: Tensor,
    use_reentrant: bool | None = None,
) -> Tensor:
    """Run `functions` in `segments` chunks, checkpointing every chunk but the last."""
    funcs = (
        list(functions.children())
        if hasattr(functions, "children") and not isinstance(functions, (list, tuple))
        else list(functions)
    )
    if (
        hasattr(functions, "__len__")
        and hasattr(functions, "__getitem__")
        and not isinstance(functions, (list, tuple))
    ):
        funcs = [functions[i] for i in range(len(functions))]
    if segments < 1:
        raise ValueError("checkpoint_sequential: segments must be >= 1")
    if use_reentrant is None:
        import warnings

        warnings.warn(USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True  # PyTorch's current default (warned once, here)
    n = len(funcs)
    size = max(1, n // segments)
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        chunk = funcs[start : end + 1]
        input = checkpoint(_Chunk(chunk), input, use_reentrant=use_reentrant)
    for f in funcs[end + 1 :]:
        input = f(input)
    return input


class _Chunk:
    """A run of layers, callable, exposing their parameters (for checkpoint)."""

    def __init__(self, layers: list):
        self.layers = layers

    def __call__(self, x):
        for f in self.layers:
            x = f(x)
        return x

    def parameters(self):
        for f in self.layers:
            params = getattr(f, "parameters", None)
            if params is not None:
                yield from params()
