"""`tracegrad.eager.optim`: SGD (momentum, nesterov, weight decay) and Adam, as PyTorch computes them.

    >>> import tracegrad.eager as torch
    >>> w = torch.tensor([1.0], requires_grad=True)
    >>> opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w ** 2).sum().backward(); opt.step(); w
    tensor([0.8000], requires_grad=True)
    >>> opt.zero_grad(); w.grad is None
    True
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from tracegrad.eager.tensor import Tensor
from tracegrad.eager.nn.modules import zero_grads


class Optimizer:
    """Holds param_groups and per-parameter state; updates `.data` in place."""

    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for g in groups:
            group = dict(defaults)
            group.update(g)
            group["params"] = list(group["params"])
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                    f"is {type(p).__name__}")
            self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def _params_with_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p, p.grad._data

    @staticmethod
    def _write(p: Tensor, new_values: np.ndarray) -> None:
        np.copyto(p._data, new_values, casting="unsafe")
        p._counter[0] += 1

    def step(self, closure=None):
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p._data
            momentum = group["momentum"]
            if momentum:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = np.array(g, copy=True)
                else:
                    buf *= momentum
                    buf += (1 - group["dampening"]) * g
                state["momentum_buffer"] = buf
                g = g + momentum * buf if group["nesterov"] else buf
            self._write(p, p._data - group["lr"] * g)
        return loss


class Adam(Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            beta1, beta2 = group["betas"]
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p._data
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["exp_avg"] = np.zeros_like(p._data)
                state["exp_avg_sq"] = np.zeros_like(p._data)
            state["step"] += 1
            m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            bias1 = 1 - beta1 ** t
            bias2 = 1 - beta2 ** t
            denom = np.sqrt(v) / math.sqrt(bias2) + group["eps"]
            self._write(p, p._data - (group["lr"] / bias1) * (m / denom))
        return loss
