"""Module.register_full_backward_hook / register_full_backward_pre_hook (issue 26).

As PyTorch's BackwardHook: the module's tensor inputs and outputs pass through identity
autograd Functions. The outputs' backward sees grad_output (the pre-hooks may replace
it); the inputs' backward sees grad_input and calls hook(module, grad_input,
grad_output), whose result may replace grad_input. grad_input has one entry per
positional tensor argument (None where it needs no gradient).

    >>> import tracegrad.eager as torch
    >>> lin = torch.nn.Linear(2, 1)
    >>> seen = []
    >>> _ = lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0].shape, go[0].shape)))
    >>> lin(torch.ones(3, 2, requires_grad=True)).sum().backward()
    >>> seen
    [(torch.Size([3, 2]), torch.Size([3, 1]))]
"""

from __future__ import annotations

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.function import Function


class _State:
    __slots__ = ("grad_output", "n_args", "positions", "inputs_seen")

    def __init__(self):
        self.grad_output = None
        self.n_args = 0
        self.positions: list = []
        self.inputs_seen = False


def _identity(xs):
    return tuple(x.view_as(x) for x in xs)


def wrap_inputs(module, hooks: dict, args: tuple, state: _State) -> tuple:
    tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    state.n_args = len(tensors)
    positions = [i for i in tensors if args[i].requires_grad]
    state.positions = positions
    if not positions:
        return args

    class BackwardHookFunction(Function):
        @staticmethod
        def forward(ctx, *xs):
            out = _identity(xs)
            return out if len(out) > 1 else out[0]

        @staticmethod
        def backward(ctx, *grads):
            state.inputs_seen = True
            by_pos = dict(zip(positions, grads, strict=True))
            grad_input = tuple(by_pos.get(i) for i in tensors)
            for hook in list(hooks["backward"].values()):
                result = hook(module, grad_input, state.grad_output)
                if result is not None:
                    grad_input = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            by_tensor = dict(zip(tensors, grad_input, strict=True))
            out = tuple(by_tensor[i] for i in positions)
            return out if len(out) > 1 else out[0]

    wrapped = BackwardHookFunction.apply(*(args[i] for i in positions))
    wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
    args = list(args)
    for i, w in zip(positions, wrapped, strict=True):
        args[i] = w
    return tuple(args)


def wrap_outputs(module, hooks: dict, out, state: _State):
    single = isinstance(out, Tensor)
    items = (out,) if single else (tuple(out) if isinstance(out, (tuple, list)) else None)
    if items is None:
        return out
    idx = [i for i, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
    if not idx:
        return out

    class BackwardHookFunction(Function):
        @staticmethod
        def forward(ctx, *xs):
            res = _identity(xs)
            return res if len(res) > 1 else res[0]

        @staticmethod
        def backward(ctx, *grads):
            grad_output = tuple(grads)
            for hook in list(hooks["backward_pre"].values()):
                result = hook(module, grad_output)
                if result is not None:
                    grad_output = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            state.grad_output = grad_output
            if not state.positions:  # no input needs a gradient: the hooks run here
                for hook in list(hooks["backward"].values()):
                    hook(module, (None,) * state.n_args, grad_output)
            return grad_output if len(grad_output) > 1 else grad_output[0]

    wrapped = BackwardHookFunction.apply(*(items[i] for i in idx))
    wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
    if single:
        return wrapped[0]
    items = list(items)
    for i, w in zip(idx, wrapped, strict=True):
        items[i] = w
    return (
        type(out)(items)
        if isinstance(out, tuple) and not hasattr(out, "_fields")
        else (type(out)(*items) if hasattr(out, "_fields") else items)
    )
