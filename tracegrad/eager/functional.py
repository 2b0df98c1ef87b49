"""`torch.autograd.functional` for eager tensors: `jacobian`, `hessian`, `vjp`, `jvp`.

Reverse mode, one backward pass per output element (PyTorch's default
strategy without `vectorize`), built on `autograd.grad`, so every row is an
ordinary backward through the recorded graph.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager.autograd.functional import jacobian, hessian
    >>> x = torch.tensor([1.0, 2.0])
    >>> jacobian(lambda x: x ** 2, x)
    tensor([[2., 0.],
            [0., 4.]])
    >>> hessian(lambda x: (x ** 3).sum(), x)
    tensor([[ 6.,  0.],
            [ 0., 12.]])
"""
from __future__ import annotations

from typing import Any, Callable

import tracegrad.eager as E
from tracegrad.eager.grad_mode import enable_grad
from tracegrad.eager.tensor import Tensor


def _as_tuple(value: Any, name: str, fn_name: str) -> tuple[bool, tuple]:
    if isinstance(value, Tensor):
        return False, (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, Tensor) for v in value):
        return True, tuple(value)
    raise TypeError(f"The {name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the given {name} has type {type(value).__name__}.")


def _prepare_inputs(inputs: tuple, create_graph: bool) -> tuple:
    # PyTorch differentiates w.r.t. fresh leaves that alias the inputs' values
    return tuple(x.detach().requires_grad_(x.dtype.is_floating_point) if not create_graph
                 or not x.requires_grad else x.view_as(x) for x in inputs)


def _grads_or_zeros(out, inputs, grad_output, create_graph: bool, strict: bool) -> tuple:
    from tracegrad.eager.autograd import grad
    if not out.requires_grad:
        if strict:
            raise RuntimeError("The output of the user-provided function is independent of "
                               "input 0. This is not allowed in strict mode.")
        return tuple(E.zeros_like(x) for x in inputs)
    gs = grad(out, inputs, grad_output, retain_graph=True, create_graph=create_graph,
              allow_unused=True)
    if strict and any(g is None for g in gs):
        i = next(k for k, g in enumerate(gs) if g is None)
        raise RuntimeError(f"The output of the user-provided function is independent of input "
                           f"{i}. This is not allowed in strict mode.")
    return tuple(E.zeros_like(x) if g is None else g for x, g in zip(inputs, gs))


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """d func(inputs) / d inputs, shaped `output.shape + input.shape` per (output, input)."""
    if strategy != "reverse-mode":
        raise NotImplementedError("tracegrad.eager: jacobian supports strategy='reverse-mode'")
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        outputs = func(*inputs)
        is_tuple_out, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                          "jacobian")
        blocks = []
        for out in outputs:
            flat = out.reshape(-1)
            rows = [_grads_or_zeros(flat[i], inputs, None, create_graph, strict)
                    for i in range(flat.shape[0])]
            per_input = []
            for k, x in enumerate(inputs):
                stacked = E.stack([r[k] for r in rows]) if rows else \
                    E.zeros(0, *x.shape, dtype=x.dtype)
                per_input.append(stacked.reshape(tuple(out.shape) + tuple(x.shape)))
            blocks.append(tuple(per_input))
    if not create_graph:
        blocks = [tuple(b.detach() for b in block) for block in blocks]
    if is_tuple_out:
        return tuple(block if is_tuple_in else block[0] for block in blocks)
    return blocks[0] if is_tuple_in else blocks[0][0]


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Jacobian of the gradient of a scalar function."""
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single element "
                               "Tensor")
        gs = _grads_or_zeros(out.reshape(()), xs, None, True, strict)
        return gs if is_tuple_in else gs[0]

    return jacobian(gradient, inputs if is_tuple_in else inputs[0], create_graph=create_graph,
                    strict=strict)


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J)."""
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        out = func(*inputs)
        if v is None and out.numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        gs = _grads_or_zeros(out, inputs, v, create_graph, strict)
    if not create_graph:
        out, gs = out.detach(), tuple(g.detach() for g in gs)
    return out, (gs if is_tuple_in else gs[0])


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v), by the double-vjp trick (PyTorch does the same)."""
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if any(x.numel() != 1 for x in inputs):
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single element.")
        v = tuple(E.ones_like(x) for x in inputs)
    _, v = _as_tuple(v, "v", "jvp")
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        out = func(*inputs)
        u = E.zeros_like(out).requires_grad_(True)
        (g_u,) = (_grads_or_zeros(out, inputs, u, True, strict),)
        from tracegrad.eager.autograd import grad
        total = sum((gi * vi).sum() for gi, vi in zip(g_u, v))
        (jv,) = grad(total, [u], create_graph=create_graph, allow_unused=True)
        jv = E.zeros_like(out) if jv is None else jv
    if not create_graph:
        out, jv = out.detach(), jv.detach()
    return out, jv
