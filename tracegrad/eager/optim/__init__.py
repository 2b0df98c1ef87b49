"""`tracegrad.eager.optim`: SGD (momentum, nesterov, weight decay), Adam, AdamW and RMSprop,
with PyTorch's update formulas (its single-tensor CPU code path), and `lr_scheduler`.

Updates are written as new values assigned to the parameter (`_write`) and to the
state dict, never as in-place NumPy operators on state arrays: inside
`tracegrad.compile` the arrays are tracers, and an in-place operator on a tracer
would only rebind a local name. `state["step"]` is a 0-d float64 array (PyTorch
keeps a tensor too), so the bias corrections are part of a captured graph instead of
constants baked into it; so is `lr`, which a capture reads from the group on every call
(a scheduler changing it retraces nothing). Every scalar meets the parameters in their
dtype (`_scalar`), as PyTorch's kernels convert it.

    >>> import tracegrad.eager as torch
    >>> w = torch.tensor([1.0], requires_grad=True)
    >>> opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w ** 2).sum().backward(); opt.step(); w
    tensor([0.8000], requires_grad=True)
    >>> opt.zero_grad(); w.grad is None
    True
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager._tensor import Tensor, write_into
from tracegrad.eager.nn.modules import zero_grads


def _scalar(value, dtype):
    """A hyperparameter (or bias correction) in the parameter's dtype, as PyTorch's kernels
    convert a Python scalar: NumPy would promote float32 math by a float64 0-d array."""
    if isinstance(value, (float, int, np.generic)):
        return np.asarray(value, dtype)
    return value.astype(dtype) if value.dtype != dtype else value


def _exported(key: str, value):
    """A state_dict() value: arrays as tensor copies; `step` as a float32 tensor (PyTorch's)."""
    if key == "step" and isinstance(value, np.ndarray):
        return Tensor._wrap(value.astype(np.float32))
    return Tensor._wrap(value.copy()) if isinstance(value, np.ndarray) else value


def _imported(key: str, value, dtype):
    """The state array a load_state_dict() value stands for (`step` stays float64)."""
    if key == "step":
        return np.array(value._data if isinstance(value, Tensor) else value, np.float64)
    if isinstance(value, (Tensor, np.ndarray)):
        return np.array(value._data if isinstance(value, Tensor) else value, dtype=dtype)
    return value


def _next_step(state: dict):
    """state["step"] + 1, kept as a 0-d float64 array (or its tracer)."""
    step = state["step"] + 1.0
    state["step"] = np.asarray(step) if isinstance(step, np.generic) else step
    return state["step"]


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
                    raise TypeError(
                        f"optimizer can only optimize Tensors, but one of the params "
                        f"is {type(p).__name__}"
                    )
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
                    state[index[id(p)]] = {k: _exported(k, v) for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = []
        for mine, saved in zip(self.param_groups, groups, strict=True):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't "
                    "match the size of optimizer's group"
                )
            params.extend(zip(saved["params"], mine["params"], strict=True))
            mine.update({k: v for k, v in saved.items() if k != "params"})
        saved_state = state_dict["state"]
        self.state = {}
        for key, p in params:
            if key in saved_state:
                self.state[p] = {
                    k: _imported(k, v, p._data.dtype) for k, v in saved_state[key].items()
                }

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    # Optimizers whose step() a capture may record (functional updates, see the module doc).
    _capturable = True

    def _params_with_grad(self):
        capture_hooks.optimizer_step(self)
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
        write_into(p, new_values)

    def _init_state(self, group: dict, p: Tensor) -> None:
        """Create the state of `p` before its first step (zeros; the capture calls it
        ahead of the trace, so the first captured step already reads state as inputs)."""

    def step(self, closure=None):
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
            ),
        )

    def _init_state(self, group: dict, p: Tensor) -> None:
        # zeros * momentum + 1 * g is g exactly: the same first step as PyTorch's clone(g)
        if group["momentum"] and group["dampening"] == 0 and p not in self.state:
            self.state[p] = {"momentum_buffer": np.zeros(p.shape, p._data.dtype)}

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
                    buf = g + np.zeros((), g.dtype)  # a copy (a tracer too)
                else:
                    buf = buf * momentum + (1 - group["dampening"]) * g
                state["momentum_buffer"] = buf
                g = g + momentum * buf if group["nesterov"] else buf
            self._write(p, p._data - _scalar(group["lr"], p._data.dtype) * g)
        return loss


def _check(value, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


class Adam(Optimizer):
    """m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), as PyTorch's
    _single_tensor_adam. weight_decay adds wd * p to g (L2); AdamW decays p instead."""

    _decoupled = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
        decoupled_weight_decay: bool = False,
    ):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(betas[0], 0.0 <= betas[0] < 1.0, "beta parameter at index 0")
        _check(betas[1], 0.0 <= betas[1] < 1.0, "beta parameter at index 1")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                decoupled_weight_decay=decoupled_weight_decay or self._decoupled,
            ),
        )

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            if group["maximize"]:
                g = -g
            dt = p._data.dtype
            if wd:
                if group["decoupled_weight_decay"]:
                    self._write(p, p._data * _scalar(1 - lr * wd, dt))
                else:
                    g = g + wd * p._data
            if p not in self.state:
                self._init_state(group, p)
            state = self.state[p]
            t = _next_step(state)
            m = state["exp_avg"]
            state["exp_avg"] = m = m + (g - m) * np.asarray(1 - beta1, dt)  # lerp, as torch
            state["exp_avg_sq"] = v = state["exp_avg_sq"] * beta2 + (1 - beta2) * g * g
            bias1 = 1 - beta1**t
            bias2_sqrt = _scalar(np.sqrt(1 - beta2**t), dt)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = vmax = np.maximum(state["max_exp_avg_sq"], v)
                denom = np.sqrt(vmax) / bias2_sqrt + group["eps"]
            else:
                denom = np.sqrt(v) / bias2_sqrt + group["eps"]
            self._write(p, p._data - _scalar(lr / bias1, dt) * (m / denom))
        return loss

    def _init_state(self, group: dict, p: Tensor) -> None:
        if p in self.state:
            return
        zeros = np.zeros(p.shape, p._data.dtype)
        state = {"step": np.zeros((), np.float64), "exp_avg": zeros, "exp_avg_sq": zeros.copy()}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros.copy()
        self.state[p] = state


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step
    (default weight_decay 1e-2, as PyTorch)."""

    _decoupled = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; avg = sqrt(v [- gbar^2 if centered]) + eps;
    p -= lr * g / avg, or through a momentum buffer b = momentum b + g / avg."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(momentum, 0.0 <= momentum, "momentum value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        _check(alpha, 0.0 <= alpha, "alpha value")
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
                maximize=maximize,
            ),
        )

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            alpha, lr = group["alpha"], group["lr"]
            g = self._coupled_grad(group, p, g)
            if p not in self.state:
                self._init_state(group, p)
            state = self.state[p]
            _next_step(state)
            state["square_avg"] = v = state["square_avg"] * alpha + (1 - alpha) * g * g
            if group["centered"]:
                gbar = state["grad_avg"]
                state["grad_avg"] = gbar = gbar + (g - gbar) * np.asarray(1 - alpha, gbar.dtype)
                avg = np.sqrt(v - gbar * gbar)
            else:
                avg = np.sqrt(v)
            avg = avg + group["eps"]
            if group["momentum"] > 0:
                state["momentum_buffer"] = buf = (
                    state["momentum_buffer"] * group["momentum"] + g / avg
                )
                self._write(p, p._data - _scalar(lr, buf.dtype) * buf)
            else:
                self._write(p, p._data - _scalar(lr, avg.dtype) * (g / avg))
        return loss

    def _init_state(self, group: dict, p: Tensor) -> None:
        if p in self.state:
            return
        zeros = np.zeros(p.shape, p._data.dtype)
        state = {"step": np.zeros((), np.float64), "square_avg": zeros}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros.copy()
        if group["centered"]:
            state["grad_avg"] = zeros.copy()
        self.state[p] = state


class Adadelta(Optimizer):
    """v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1 - rho) d^2; p -= lr * d (PyTorch's _single_tensor_adadelta)."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach=None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(rho, 0.0 <= rho <= 1.0, "rho value")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        super().__init__(
            params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        )

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            rho, eps = group["rho"], group["eps"]
            g = self._coupled_grad(group, p, g)
            if p not in self.state:
                self._init_state(group, p)
            state = self.state[p]
            _next_step(state)
            u = state["acc_delta"]
            state["square_avg"] = v = state["square_avg"] * rho + (1 - rho) * g * g
            delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
            state["acc_delta"] = u * rho + (1 - rho) * delta * delta
            self._write(p, p._data - _scalar(group["lr"], delta.dtype) * delta)
        return loss

    def _init_state(self, group: dict, p: Tensor) -> None:
        if p not in self.state:
            zeros = np.zeros(p.shape, p._data.dtype)
            self.state[p] = {
                "step": np.zeros((), np.float64),
                "square_avg": zeros,
                "acc_delta": zeros.copy(),
            }


class Adagrad(Optimizer):
    """s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(lr_decay, 0.0 <= lr_decay, "lr_decay value")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        _check(
            initial_accumulator_value,
            0.0 <= initial_accumulator_value,
            "initial_accumulator_value value",
        )
        _check(eps, 0.0 <= eps, "epsilon value")
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                eps=eps,
                maximize=maximize,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {
                    "step": np.zeros((), np.float64),
                    "sum": np.full_like(p._data, group["initial_accumulator_value"]),
                }

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            if group["maximize"]:
                g = -g
            state = self.state[p]
            t = _next_step(state)
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p._data
            clr = _scalar(group["lr"] / (1 + (t - 1) * group["lr_decay"]), p._data.dtype)
            state["sum"] = total = state["sum"] + g * g
            std = np.sqrt(total) + group["eps"]
            self._write(p, p._data - clr * (g / std))
        return loss


class _AdamFamily(Optimizer):
    """Shared constructor checks of Adamax, NAdam and RAdam (issue 26)."""

    def __init__(self, params, lr, betas, eps, weight_decay, **extra):
        _check(lr, 0.0 <= lr, "learning rate")
        _check(eps, 0.0 <= eps, "epsilon value")
        _check(betas[0], 0.0 <= betas[0] < 1.0, "beta parameter at index 0")
        _check(betas[1], 0.0 <= betas[1] < 1.0, "beta parameter at index 1")
        _check(weight_decay, 0.0 <= weight_decay, "weight_decay value")
        super().__init__(
            params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, **extra)
        )

    def _grad(self, group, p, g):
        if group.get("maximize"):
            g = -g
        wd = group["weight_decay"]
        if wd:
            if group.get("decoupled_weight_decay"):
                self._write(p, p._data * _scalar(1 - group["lr"] * wd, p._data.dtype))
            else:
                g = g + wd * p._data
        if p not in self.state:
            self._init_state(group, p)
        return g


class Adamax(_AdamFamily):
    """Adam with the infinity norm: u = max(beta2 u, |g| + eps);
    p -= lr / (1 - beta1^t) * m / u (PyTorch's _single_tensor_adamax)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):  # fmt: skip
        super().__init__(params, lr, betas, eps, weight_decay, maximize=maximize)

    def _init_state(self, group, p):
        z = np.zeros(p.shape, p._data.dtype)
        self.state[p] = {"step": np.zeros((), np.float64), "exp_avg": z, "exp_inf": z.copy()}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            g = self._grad(group, p, g)
            beta1, beta2 = group["betas"]
            dt = p._data.dtype
            state = self.state[p]
            t = _next_step(state)
            m = state["exp_avg"]
            state["exp_avg"] = m = m + (g - m) * np.asarray(1 - beta1, dt)
            state["exp_inf"] = u = np.maximum(
                state["exp_inf"] * _scalar(beta2, dt), np.abs(g) + _scalar(group["eps"], dt)
            )
            clr = _scalar(group["lr"] / (1 - beta1**t), dt)
            self._write(p, p._data - clr * (m / u))
        return loss


class NAdam(_AdamFamily):
    """Adam with Nesterov momentum and PyTorch's momentum-decay schedule
    mu_t = beta1 (1 - 0.5 * 0.96^(t psi)) (PyTorch's _single_tensor_nadam; the running
    product of mu is a float32 0-d tensor there, and here)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):  # fmt: skip
        _check(momentum_decay, 0.0 <= momentum_decay, "momentum_decay value")
        super().__init__(
            params, lr, betas, eps, weight_decay, momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
        )  # fmt: skip

    def _init_state(self, group, p):
        z = np.zeros(p.shape, p._data.dtype)
        self.state[p] = {
            "step": np.zeros((), np.float64),
            "mu_product": np.ones((), np.float32),
            "exp_avg": z,
            "exp_avg_sq": z.copy(),
        }

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            g = self._grad(group, p, g)
            beta1, beta2 = group["betas"]
            lr, psi = group["lr"], group["momentum_decay"]
            dt = p._data.dtype
            state = self.state[p]
            t = float(_next_step(state))
            bias2 = 1 - beta2**t
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (t * psi)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * psi)))
            state["mu_product"] = mu_product = np.float32(state["mu_product"] * mu)
            mu_product_next = float(mu_product) * mu_next
            m = state["exp_avg"]
            state["exp_avg"] = m = m + (g - m) * np.asarray(1 - beta1, dt)
            state["exp_avg_sq"] = v = (
                state["exp_avg_sq"] * _scalar(beta2, dt) + _scalar(1 - beta2, dt) * g * g
            )
            denom = np.sqrt(v / _scalar(bias2, dt)) + _scalar(group["eps"], dt)
            new = p._data + _scalar(-lr * (1.0 - mu) / (1.0 - float(mu_product)), dt) * (g / denom)
            new = new + _scalar(-lr * mu_next / (1.0 - mu_product_next), dt) * (m / denom)
            self._write(p, new)
        return loss


class RAdam(_AdamFamily):
    """Rectified Adam: the adaptive step only once the variance estimate is tractable
    (rho_t > 5), with PyTorch's rectification term (_single_tensor_radam)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):  # fmt: skip
        super().__init__(
            params, lr, betas, eps, weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
        )  # fmt: skip

    def _init_state(self, group, p):
        z = np.zeros(p.shape, p._data.dtype)
        self.state[p] = {"step": np.zeros((), np.float64), "exp_avg": z, "exp_avg_sq": z.copy()}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, g in self._params_with_grad():
            g = self._grad(group, p, g)
            beta1, beta2 = group["betas"]
            lr = group["lr"]
            dt = p._data.dtype
            state = self.state[p]
            t = float(_next_step(state))
            m = state["exp_avg"]
            state["exp_avg"] = m = m + (g - m) * np.asarray(1 - beta1, dt)
            state["exp_avg_sq"] = v = (
                state["exp_avg_sq"] * _scalar(beta2, dt) + _scalar(1 - beta2, dt) * g * g
            )
            bias1, bias2 = 1 - beta1**t, 1 - beta2**t
            corrected = m / _scalar(bias1, dt)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * t * (beta2**t) / bias2
            if rho_t > 5.0:
                rect = (
                    (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
                ) ** 0.5
                adaptive = _scalar(bias2**0.5, dt) / (np.sqrt(v) + _scalar(group["eps"], dt))
                update = corrected * _scalar(lr, dt) * adaptive * _scalar(rect, dt)
            else:
                update = corrected * _scalar(lr, dt)
            self._write(p, p._data - update)
        return loss


from tracegrad.eager.optim import lr_scheduler  # noqa: E402
