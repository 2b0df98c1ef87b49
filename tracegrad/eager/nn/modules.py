"""Module, Parameter and the layers/losses of torch.nn that tracegrad provides."""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterator

import numpy as np

from tracegrad.eager import dtypes as _dt
from tracegrad.eager.nn import functional as F
from tracegrad.eager.nn import init
from tracegrad.eager.tensor import Tensor, eager_apply
from tracegrad.ops.core import register_value_kind


class Parameter(Tensor):
    """A leaf tensor that a Module registers; requires grad by default."""

    _is_parameter = True

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor._wrap(np.zeros(0, np.float32))
        arr = data._data if isinstance(data, Tensor) else np.asarray(data)
        p = cls._wrap(arr)
        if requires_grad:
            p.requires_grad = True
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass


register_value_kind(Parameter, 10, eager_apply)


def zero_grads(params, set_to_none: bool = True) -> None:
    """Clear `.grad` of each parameter: drop it (PyTorch's default) or fill it with zeros."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad._data[...] = 0


class Module:
    """Base class: registers Parameters and sub-Modules assigned as attributes."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        if isinstance(value, Parameter):
            self._modules.pop(name, None)
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._parameters.pop(name, None)
            self._modules[name] = value
        elif name in self._parameters and value is None:
            self._parameters[name] = None
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module") -> None:
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  "\"forward\" function")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ traversal
    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator:
        seen = set()
        for mod_prefix, module in (self.named_modules(prefix) if recurse else [(prefix, self)]):
            for name, p in module._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_modules(self, prefix: str = "") -> Iterator:
        stack = [(prefix, self)]
        seen = set()
        while stack:
            name, m = stack.pop(0)
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            stack[0:0] = [((f"{name}.{k}" if name else k), c) for k, c in m._modules.items()
                          if c is not None]

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator:
        yield from self._modules.items()

    def children(self) -> Iterator["Module"]:
        for _, m in self._modules.items():
            yield m

    # ------------------------------------------------------------ state
    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.parameters(), set_to_none)

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def to(self, dtype=None, *args, **kwargs) -> "Module":
        """Cast every floating parameter (and its grad) in place, keeping the Parameter objects.

        >>> import tracegrad.eager as torch
        >>> torch.nn.Linear(2, 1).to(torch.float64).weight.dtype
        torch.float64
        """
        dtype = kwargs.get("dtype", dtype)
        if dtype is None or isinstance(dtype, str) and dtype == "cpu":
            return self
        target = _dt.to_numpy_dtype(dtype)
        for p in self.parameters():
            if p._data.dtype.kind == "f" and p._data.dtype != target:
                p._data = p._data.astype(target)
                p._counter[0] += 1
                if p.grad is not None:
                    p.grad = p.grad.to(dtype)
        return self

    def double(self) -> "Module":
        return self.to(dtype=_dt.float64)

    def float(self) -> "Module":
        return self.to(dtype=_dt.float32)

    def state_dict(self) -> "OrderedDict[str, Tensor]":
        return OrderedDict((n, p.detach()) for n, p in self.named_parameters())

    def load_state_dict(self, state: dict) -> None:
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        for k, p in own.items():
            src = state[k]
            p._data[...] = src._data if isinstance(src, Tensor) else np.asarray(src)
            p._counter[0] += 1

    def apply(self, fn) -> "Module":
        for m in list(self.modules())[::-1]:
            fn(m)
        return self

    # ------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (extra + "\n" if extra else "\n")
        return head + "\n".join(lines) + "\n)"


class Linear(Module):
    """y = x @ weight.T + bias, initialized like PyTorch (uniform in +-1/sqrt(in_features))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        npd = _dt.to_numpy_dtype(dtype) if dtype is not None else np.float32
        self.weight = Parameter(Tensor._wrap(np.empty((out_features, in_features), npd)))
        if bias:
            self.bias = Parameter(Tensor._wrap(np.empty(out_features, npd)))
        else:
            self.register_parameter("bias", None)
            object.__setattr__(self, "bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # bound 1/sqrt(fan_in)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input)


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Identity(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input


class Sequential(Module):
    """Modules applied in order; supports indexing, slicing, len and iteration."""

    def __init__(self, *modules: Module):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return Sequential(*items[idx])
        return items[idx]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __getitem__(self, idx):
        return list(self._modules.values())[idx]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self._modules)), module)
        return self


class MSELoss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.reduction)
