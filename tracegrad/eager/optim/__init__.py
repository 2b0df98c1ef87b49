"""`tracegrad.eager.optim`: SGD (momentum, nesterov, weight decay), Adam, AdamW and RMSprop,
with PyTorch's update formulas (its single-tensor CPU code path), and `lr_scheduler`.

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

from tracegrad.eager._tensor import Tensor
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

    def add_param_group(self, param_group: dict) -> None:
        group = dict(self.defaults)
        group.update(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        self.param_groups.append(group)

    def state_dict(self) -> dict:
        """PyTorch's layout: {'state': {index: {...}}, 'param_groups': [{..., 'params':
        [index, ...]}]}, with state arrays as tensors (copies)."""
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (Tensor._wrap(v.copy()) if isinstance(v, np.ndarray)
                                               else v) for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = []
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
            params.extend(zip(saved["params"], mine["params"]))
            mine.update({k: v for k, v in saved.items() if k != "params"})
        saved_state = state_dict["state"]
        self.state = {}
        for key, p in params:
            if key in saved_state:
                self.state[p] = {k: (np.array(v._data if isinstance(v, Tensor) else v,
                                              dtype=p._data.dtype)
                                     if isinstance(v, (Tensor, np.ndarray)) else v)
                                 for k, v in saved_state[key].items()}

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def _params_with_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p, p.grad._data

    @staticmethod
    def _coupled_grad(group: dict, p: Tensor, g: np.ndarray) -> np.ndarray:
        """The gradient with `maximize` and L2 `weight_decay` applied, as PyTorch's
        single-tensor optimizers do before their update."""
        if group["maximize"]:
            g = -g
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        return g

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


def _check(value, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


class Adam(Optimizer):
    """m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), as PyTorch's
    _single_tensor_adam. weight_decay adds wd * p to g (L2); AdamW decays p instead."""

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None, decoupled_weight_decay: bool = False):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(betas[0], 0.0 <= betas[0] < 1.0, "beta parameter at index 0")
        _check(betas[1], 0.0 <= betas[1] < 1.0, "beta parameter at index 1")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay
                                      or self._decoupled))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            if group["maximize"]:
                g = -g
            if wd:
                if group["decoupled_weight_decay"]:
                    p._data *= np.asarray(1 - lr * wd, p._data.dtype)
                else:
                    g = g + wd * p._data
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["exp_avg"] = np.zeros_like(p._data)
                state["exp_avg_sq"] = np.zeros_like(p._data)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = np.zeros_like(p._data)
            state["step"] += 1
            m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            m += (g - m) * np.asarray(1 - beta1, m.dtype)  # lerp, as torch
            v *= beta2
            v += (1 - beta2) * g * g
            bias1 = 1 - beta1 ** t
            bias2_sqrt = math.sqrt(1 - beta2 ** t)
            if group["amsgrad"]:
                vmax = state["max_exp_avg_sq"]
                np.maximum(vmax, v, out=vmax)
                denom = np.sqrt(vmax) / bias2_sqrt + group["eps"]
            else:
                denom = np.sqrt(v) / bias2_sqrt + group["eps"]
            self._write(p, p._data - (lr / bias1) * (m / denom))
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step
    (default weight_decay 1e-2, as PyTorch)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; avg = sqrt(v [- gbar^2 if centered]) + eps;
    p -= lr * g / avg, or through a momentum buffer b = momentum b + g / avg."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(momentum, 0.0 <= momentum, "momentum value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        _check(alpha, 0.0 <= alpha, "alpha value")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            alpha, lr = group["alpha"], group["lr"]
            g = self._coupled_grad(group, p, g)
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["square_avg"] = np.zeros_like(p._data)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = np.zeros_like(p._data)
                if group["centered"]:
                    state["grad_avg"] = np.zeros_like(p._data)
            state["step"] += 1
            v = state["square_avg"]
            v *= alpha
            v += (1 - alpha) * g * g
            if group["centered"]:
                gbar = state["grad_avg"]
                gbar += (g - gbar) * np.asarray(1 - alpha, gbar.dtype)
                avg = np.sqrt(v - gbar * gbar)
            else:
                avg = np.sqrt(v)
            avg += group["eps"]
            if group["momentum"] > 0:
                buf = state["momentum_buffer"]
                buf *= group["momentum"]
                buf += g / avg
                self._write(p, p._data - lr * buf)
            else:
                self._write(p, p._data - lr * (g / avg))
        return loss


class Adadelta(Optimizer):
    """v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1 - rho) d^2; p -= lr * d (PyTorch's _single_tensor_adadelta)."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(rho, 0.0 <= rho <= 1.0, "rho value")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            rho, eps = group["rho"], group["eps"]
            g = self._coupled_grad(group, p, g)
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["square_avg"] = np.zeros_like(p._data)
                state["acc_delta"] = np.zeros_like(p._data)
            state["step"] += 1
            v, u = state["square_avg"], state["acc_delta"]
            v *= rho
            v += (1 - rho) * g * g
            delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
            u *= rho
            u += (1 - rho) * delta * delta
            self._write(p, p._data - group["lr"] * delta)
        return loss


class Adagrad(Optimizer):
    """s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)."""

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(lr_decay, 0.0 <= lr_decay, "lr_decay value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        _check(initial_accumulator_value, 0.0 <= initial_accumulator_value,
               "initial_accumulator_value value")
        _check(eps, 0.0 <= eps, "epsilon value")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": 0, "sum": np.full_like(
                    p._data, group["initial_accumulator_value"])}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            if group["maximize"]:
                g = -g
            state = self.state[p]
            state["step"] += 1
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p._data
            clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            state["sum"] += g * g
            std = np.sqrt(state["sum"]) + group["eps"]
            self._write(p, p._data - clr * (g / std))
        return loss


from tracegrad.eager.optim import lr_scheduler  # noqa: E402,F401
