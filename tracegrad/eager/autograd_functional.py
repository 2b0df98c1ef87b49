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

from collections.abc import Callable
from typing import Any

import tracegrad.eager as E
from tracegrad.eager._tensor import Tensor
from tracegrad.eager.grad_mode import enable_grad


def _as_tuple(value: Any, name: str, fn_name: str) -> tuple[bool, tuple]:
    if isinstance(value, Tensor):
        return False, (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, Tensor) for v in value):
        return True, tuple(value)
    raise TypeError(
        f"The {name} given to {fn_name} must be either a Tensor or a tuple of "
        f"Tensors but the given {name} has type {type(value).__name__}."
    )


def _prepare_inputs(inputs: tuple, create_graph: bool) -> tuple:
    # PyTorch differentiates w.r.t. fresh leaves that alias the inputs' values
    return tuple(
        x.detach().requires_grad_(x.dtype.is_floating_point)
        if not create_graph or not x.requires_grad
        else x.view_as(x)
        for x in inputs
    )


def _grads_or_zeros(out, inputs, grad_output, create_graph: bool, strict: bool) -> tuple:
    from tracegrad.eager.autograd import grad

    if not out.requires_grad:
        if strict:
            raise RuntimeError(
                "The output of the user-provided function is independent of "
                "input 0. This is not allowed in strict mode."
            )
        return tuple(E.zeros_like(x) for x in inputs)
    gs = grad(
        out, inputs, grad_output, retain_graph=True, create_graph=create_graph, allow_unused=True
    )
    if strict and any(g is None for g in gs):
        i = next(k for k, g in enumerate(gs) if g is None)
        raise RuntimeError(
            f"The output of the user-provided function is independent of input "
            f"{i}. This is not allowed in strict mode."
        )
    return tuple(E.zeros_like(x) if g is None else g for x, g in zip(inputs, gs, strict=True))


def jacobian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """d func(inputs) / d inputs, shaped `output.shape + input.shape` per (output, input)."""
    if strategy != "reverse-mode":
        raise NotImplementedError("tracegrad.eager: jacobian supports strategy='reverse-mode'")
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        outputs = func(*inputs)
        is_tuple_out, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian"
        )
        blocks = []
        for out in outputs:
            flat = out.reshape(-1)
            rows = [
                _grads_or_zeros(flat[i], inputs, None, create_graph, strict)
                for i in range(flat.shape[0])
            ]
            per_input = []
            for k, x in enumerate(inputs):
                stacked = (
                    E.stack([r[k] for r in rows]) if rows else E.zeros(0, *x.shape, dtype=x.dtype)
                )
                per_input.append(stacked.reshape(tuple(out.shape) + tuple(x.shape)))
            blocks.append(tuple(per_input))
    if not create_graph:
        blocks = [tuple(b.detach() for b in block) for block in blocks]
    if is_tuple_out:
        return tuple(block if is_tuple_in else block[0] for block in blocks)
    return blocks[0] if is_tuple_in else blocks[0][0]


def hessian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Jacobian of the gradient of a scalar function."""
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(
                "The function given to hessian should return a single element Tensor"
            )
        gs = _grads_or_zeros(out.reshape(()), xs, None, True, strict)
        return gs if is_tuple_in else gs[0]

    return jacobian(
        gradient, inputs if is_tuple_in else inputs[0], create_graph=create_graph, strict=strict
    )


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    """PyTorch's checks of v against the outputs (vjp) or inputs (jvp, vhp, hvp)."""
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other, strict=True)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {el_other.shape} but got {el_v.shape}."
            )


def _grad_sum(
    outputs: tuple, inputs: tuple, vs: tuple, create_graph: bool, strict: bool, what: str = "output"
) -> tuple:
    """sum_k vs[k]^T d outputs[k] / d inputs (zeros for inputs no output depends on)."""
    from tracegrad.eager.autograd import grad

    pairs = [(o, v) for o, v in zip(outputs, vs, strict=True) if o.requires_grad]
    if not pairs:
        if strict:
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of "
                "input 0. This is not allowed in strict mode."
            )
        return tuple(E.zeros_like(x) for x in inputs)
    gs = grad(
        [o for o, _ in pairs],
        inputs,
        [v for _, v in pairs],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )
    if strict and any(g is None for g in gs):
        i = next(k for k, g in enumerate(gs) if g is None)
        raise RuntimeError(
            f"The {what} of the user-provided function is independent of input "
            f"{i}. This is not allowed in strict mode."
        )
    return tuple(E.zeros_like(x) if g is None else g for x, g in zip(inputs, gs, strict=True))


def _finish(values: tuple, is_tuple: bool, create_graph: bool):
    if not create_graph:
        values = tuple(t.detach() for t in values)
    return values if is_tuple else values[0]


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J); func may return a tuple of tensors (then v is a tuple too)."""
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        outputs = func(*inputs)
        is_tuple_out, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the user-provided function "
                    "returns a single Tensor with a single element."
                )
            vs = (E.ones_like(outputs[0]),)
        else:
            _, vs = _as_tuple(v, "v", "vjp")
            _validate_v(vs, outputs, is_tuple_out)
        gs = _grad_sum(outputs, inputs, vs, create_graph, strict)
    return _finish(outputs, is_tuple_out, create_graph), _finish(gs, is_tuple_in, create_graph)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v), by the double-vjp trick (PyTorch does the same); func may
    return a tuple of tensors (then J v is a tuple too)."""
    from tracegrad.eager.autograd import grad

    is_tuple_in, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the "
                "user-provided function is a single Tensor with a single element."
            )
        vs = (E.ones_like(inputs[0]),)
    else:
        _, vs = _as_tuple(v, "v", "jvp")
        _validate_v(vs, inputs, is_tuple_in)
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        outputs = func(*inputs)
        is_tuple_out, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        us = tuple(E.zeros_like(o).requires_grad_(o.dtype.is_floating_point) for o in outputs)
        g_u = _grad_sum(outputs, inputs, us, True, strict)
        total = None
        for gi, vi in zip(g_u, vs, strict=True):
            if gi.requires_grad:
                term = (gi * vi).sum()
                total = term if total is None else total + term
        if total is None:
            jv = tuple(E.zeros_like(o) for o in outputs)
        else:
            found = grad(
                total,
                [u for u in us if u.requires_grad],
                create_graph=create_graph,
                allow_unused=True,
            )
            it = iter(found)
            jv = tuple(
                E.zeros_like(o)
                if not u.requires_grad
                else (lambda g, o: E.zeros_like(o) if g is None else g)(next(it), o)
                for u, o in zip(us, outputs, strict=True)
            )
        if strict and any(not o.requires_grad for o in outputs):
            i = next(k for k, o in enumerate(outputs) if not o.requires_grad)
            raise RuntimeError(
                f"The output of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode."
            )
    return _finish(outputs, is_tuple_out, create_graph), _finish(jv, is_tuple_out, create_graph)


def _second_order(name: str, func: Callable, inputs, v, create_graph: bool, strict: bool):
    is_tuple_in, inputs = _as_tuple(inputs, "inputs", name)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to the "
                "user-provided function is a single Tensor with a single element."
            )
        vs = (E.ones_like(inputs[0]),)
    else:
        _, vs = _as_tuple(v, "v", name)
        _validate_v(vs, inputs, is_tuple_in)
    with enable_grad():
        inputs = _prepare_inputs(inputs, create_graph)
        out = func(*inputs)
        is_tuple_out, outs = _as_tuple(out, "outputs of the user-provided function", name)
        if is_tuple_out or len(outs) != 1:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outs[0].numel() != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {name} should "
                "contain a single element"
            )
        out = outs[0]
        jac = _grad_sum((out.reshape(()),), inputs, (E.ones_like(out.reshape(())),), True, strict)
        result = _grad_sum(jac, inputs, vs, create_graph, strict, what="jacobian")
    return _finish((out,), False, create_graph), _finish(result, is_tuple_in, create_graph)


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a function returning one element."""
    return _second_order("vhp", func, inputs, v, create_graph, strict)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a function returning one element (H is symmetric, so this
    is v^T H; PyTorch computes the same numbers by double backward)."""
    return _second_order("hvp", func, inputs, v, create_graph, strict)
