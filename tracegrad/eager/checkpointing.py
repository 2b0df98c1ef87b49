"""Gradient checkpointing: run the forward without saving, recompute it in backward.

`checkpoint(fn, *args)` runs `fn` under no_grad and returns its output with a
single `CheckpointFunctionBackward` node. When backward reaches that node it
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

from typing import Any, Callable, Sequence

import numpy as np

from tracegrad.eager.engine import run_backward
from tracegrad.eager.grad_mode import STATE, enable_grad, no_grad
from tracegrad.eager.graph import Node, grad_accumulator
from tracegrad.eager.tensor import Tensor


class CheckpointFunctionBackward(Node):
    """Recomputes `fn(*args)` and backpropagates through it."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn, args, kwargs, out: np.ndarray):
        inputs, in_meta = [], []
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                inputs.append(a._grad_fn or grad_accumulator(a))
                in_meta.append((a._data.shape, a._data.dtype))
            else:
                inputs.append(None)
                in_meta.append(None)
        super().__init__(None, {}, "CheckpointFunctionBackward", tuple(inputs), tuple(in_meta),
                         (), None, (out.shape, out.dtype))
        self.saved = True
        self.fn = fn
        # Inputs are kept with their versions so an in-place change is caught.
        self.args = [(a, a._counter[0]) if isinstance(a, Tensor) else (a, None) for a in args]
        self.kwargs = kwargs

    @property
    def saved_tensors_info(self) -> list:
        if self.freed:
            return []
        return [(f"input{i}", tuple(a._data.shape), str(a._data.dtype))
                for i, (a, _) in enumerate(self.args) if isinstance(a, Tensor)]

    def release(self) -> None:
        self.args = None
        self.fn = None
        self.freed = True

    def apply(self, g, as_tensors: bool):
        from tracegrad.eager.graph import FREED_MESSAGE
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        detached = []
        for a, version in self.args:
            if isinstance(a, Tensor):
                if a._counter[0] != version:
                    raise RuntimeError(
                        "checkpoint: an input was modified in place between the forward pass and "
                        f"backward (version {a._counter[0]}, expected {version})")
                d = a.detach()
                d._requires_grad = a._requires_grad
                detached.append(d)
            else:
                detached.append(a)
        with enable_grad():
            out = self.fn(*detached, **self.kwargs)
        if not isinstance(out, Tensor) or not out._requires_grad:
            return [None] * len(self.inputs)
        root = out._grad_fn if out._grad_fn is not None else grad_accumulator(out)
        run_backward([root], [g], retain_graph=False, create_graph=as_tensors)
        STATE.grad_enabled = as_tensors  # run_backward restored the outer backward's mode
        results = []
        for d, nxt in zip(detached, self.inputs):
            if nxt is None or not isinstance(d, Tensor) or d._grad is None:
                results.append(None)
            else:
                results.append(d._grad if as_tensors else d._grad._data)
        return results


def checkpoint(function: Callable[..., Tensor], *args: Any, use_reentrant: bool | None = None,
               **kwargs: Any) -> Tensor:
    """`function(*args)` whose intermediate activations are recomputed in backward."""
    with no_grad():
        out = function(*args, **kwargs)
    if not isinstance(out, Tensor):
        raise TypeError("tracegrad.eager.checkpoint: the function must return a single Tensor, "
                        f"got {type(out).__name__}")
    result = Tensor._wrap(out._data)
    needs_grad = any(isinstance(a, Tensor) and a._requires_grad for a in args) or \
        _uses_parameters(function)
    if STATE.grad_enabled and needs_grad:
        result._grad_fn = CheckpointFunctionBackward(function, args, kwargs, out._data)
        result._requires_grad = True
    return result


def _uses_parameters(function) -> bool:
    """A Module (or bound method of one) with parameters that require grad."""
    owner = getattr(function, "__self__", function)
    params = getattr(owner, "parameters", None)
    if params is None:
        return False
    return any(p.requires_grad for p in params())


def checkpoint_sequential(functions: Sequence[Callable] | Any, segments: int, input: Tensor,
                          use_reentrant: bool | None = None) -> Tensor:
    """Run `functions` in `segments` chunks, checkpointing every chunk but the last."""
    funcs = list(functions.children()) if hasattr(functions, "children") and \
        not isinstance(functions, (list, tuple)) else list(functions)
    if hasattr(functions, "__len__") and hasattr(functions, "__getitem__") and \
            not isinstance(functions, (list, tuple)):
        funcs = [functions[i] for i in range(len(functions))]
    if segments < 1:
        raise ValueError("checkpoint_sequential: segments must be >= 1")
    n = len(funcs)
    size = max(1, n // segments)
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        chunk = funcs[start:end + 1]
        input = checkpoint(_Chunk(chunk), input)
    for f in funcs[end + 1:]:
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
