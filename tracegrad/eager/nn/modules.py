"""Module, Parameter and the layers/losses of torch.nn that tracegrad provides."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager import dtypes as _dt
from tracegrad.eager._tensor import Tensor, eager_apply, write_into
from tracegrad.eager.capture_hooks import ACTIVE as CAPTURING
from tracegrad.eager.grad_mode import STATE as STATE_GRAD
from tracegrad.eager.nn import functional as F
from tracegrad.eager.nn import init
from tracegrad.ops.core import register_value_kind


def _shape_repr(shape) -> str:
    return f"torch.Size([{', '.join(map(str, shape))}])"


class Parameter(Tensor):
    """A leaf tensor that a Module registers; requires grad by default."""

    _is_parameter = True

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor._wrap(np.zeros(0, _dt.default_float()))
        arr = data._data if isinstance(data, Tensor) else np.asarray(data)
        p = cls._wrap(arr)
        if requires_grad:
            p.requires_grad = True
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass


register_value_kind(Parameter, 10, eager_apply)


class RemovableHandle:
    """What register_*_hook returns; remove() unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self.hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def zero_grads(params, set_to_none: bool = True) -> None:
    """Clear `.grad` of each parameter: drop it (PyTorch's default) or fill it with zeros."""
    for p in params:
        if CAPTURING[0]:
            capture_hooks.grad_cleared(p, set_to_none)
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            write_into(p.grad, np.zeros((), p.grad._data.dtype))


class Module:
    """Base class: registers Parameters and sub-Modules assigned as attributes."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
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
        elif (
            "_buffers" in self.__dict__
            and name in self._buffers
            and (value is None or isinstance(value, Tensor))
        ):
            self._buffers[name] = value
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
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._parameters[name] = param

    def add_module(self, name: str, module: Module) -> None:
        self._modules[name] = module

    def register_module(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not a parameter (BatchNorm's running statistics):
        in state_dict (if persistent), cast by .to(), never given to an optimizer."""
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if name in self.__dict__ or name in self._parameters or name in self._modules:
            if name not in self._buffers:
                raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator:
        seen = set()
        for mod_prefix, module in self.named_modules(prefix) if recurse else [(prefix, self)]:
            for name, b in module.__dict__.get("_buffers", {}).items():
                if b is None or id(b) in seen:
                    continue
                seen.add(id(b))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        if CAPTURING[0]:  # inside tracegrad.compile: its parameters and buffers are inputs
            capture_hooks.module_called(self)
        hooks = self.__dict__.get("_forward_hooks")
        if not hooks:
            return self.forward(*args, **kwargs)
        for hook in list(hooks["pre"].values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        backward = (hooks["backward"] or hooks["backward_pre"]) and STATE_GRAD.grad_enabled
        if backward:
            from tracegrad.eager.nn import backward_hooks as _bh

            state = _bh._State()
            args = _bh.wrap_inputs(self, hooks, args, state)
        out = self.forward(*args, **kwargs)
        for hook in list(hooks["post"].values()):
            result = hook(self, args, out)
            if result is not None:
                out = result
        if backward:
            out = _bh.wrap_outputs(self, hooks, out, state)
        return out

    def _add_hook(self, kind: str, hook) -> RemovableHandle:
        hooks = self.__dict__.get("_forward_hooks")
        if hooks is None:
            hooks = {
                "pre": OrderedDict(),
                "post": OrderedDict(),
                "backward": OrderedDict(),
                "backward_pre": OrderedDict(),
            }
            object.__setattr__(self, "_forward_hooks", hooks)
        handle = RemovableHandle(hooks[kind])
        hooks[kind][handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        """hook(module, args) -> None or new args, before forward."""
        return self._add_hook("pre", hook)

    def register_forward_hook(self, hook) -> RemovableHandle:
        """hook(module, args, output) -> None or a new output, after forward."""
        return self._add_hook("post", hook)

    def register_full_backward_hook(self, hook) -> RemovableHandle:
        """hook(module, grad_input, grad_output) -> None or a new grad_input, when the
        gradients of the module's inputs are computed (nn/backward_hooks.py)."""
        return self._add_hook("backward", hook)

    def register_full_backward_pre_hook(self, hook) -> RemovableHandle:
        """hook(module, grad_output) -> None or a new grad_output, before them."""
        return self._add_hook("backward_pre", hook)

    # ------------------------------------------------------------ traversal
    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator:
        seen = set()
        for mod_prefix, module in self.named_modules(prefix) if recurse else [(prefix, self)]:
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
            stack[0:0] = [
                ((f"{name}.{k}" if name else k), c) for k, c in m._modules.items() if c is not None
            ]

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, m in self._modules.items():
            yield m

    # ------------------------------------------------------------ state
    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.parameters(), set_to_none)

    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def to(self, dtype=None, *args, **kwargs) -> Module:
        """Cast every floating parameter (and its grad) in place, keeping the Parameter objects.

        >>> import tracegrad.eager as torch
        >>> torch.nn.Linear(2, 1).to(torch.float64).weight.dtype
        torch.float64
        """
        dtype = kwargs.get("dtype", dtype)
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif not isinstance(a, (str, bool)) and a is not None:
                dtype = a
            elif isinstance(a, str):
                device = a
        if isinstance(dtype, Tensor):
            dtype = dtype.dtype
        if isinstance(dtype, str):
            device, dtype = dtype, None
        if device is not None and not str(device).startswith("cpu"):
            raise RuntimeError(
                f"tracegrad.eager runs on the CPU only; cannot move a module to "
                f"device {str(device)!r}"
            )
        if dtype is None:
            return self
        target = _dt.to_numpy_dtype(dtype)
        for p in self.parameters():
            if p._data.dtype.kind == "f" and p._data.dtype != target:
                p._data = p._data.astype(target)
                p._counter[0] += 1
                if p.grad is not None:
                    p.grad = p.grad.to(dtype)
        for b in self.buffers():
            if b._data.dtype.kind == "f" and b._data.dtype != target:
                b._data = b._data.astype(target)
                b._counter[0] += 1
        return self

    def cpu(self) -> Module:
        return self

    def cuda(self, device=None) -> Module:
        raise AssertionError("Torch not compiled with CUDA enabled")

    def double(self) -> Module:
        return self.to(dtype=_dt.float64)

    def half(self) -> Module:
        return self.to(dtype=_dt.float16)

    def get_parameter(self, target: str):
        """The parameter at a dotted path ("encoder.layers.0.linear1.weight")."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path) if module_path else self
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str):
        """The buffer at a dotted path."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path) if module_path else self
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    def float(self) -> Module:
        return self.to(dtype=_dt.float32)

    def _state_items(self):
        """(name, tensor) of parameters and persistent buffers, in PyTorch's order (per
        module: its parameters, then its buffers)."""
        for mod_prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                if p is not None:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), p
            skip = module.__dict__.get("_non_persistent_buffers_set", ())
            for name, b in module.__dict__.get("_buffers", {}).items():
                if b is not None and name not in skip:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        out = OrderedDict() if destination is None else destination
        for n, t in self._state_items():
            out[prefix + n] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state: dict, strict: bool = True, assign: bool = False):
        """Copy values in place (the Parameter objects stay); returns (missing_keys,
        unexpected_keys) as PyTorch's _IncompatibleKeys, and raises on them when strict."""
        from collections import namedtuple

        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        errors = []
        for k, p in own.items():
            if k not in state:
                continue
            src = state[k]
            arr = src._data if isinstance(src, Tensor) else np.asarray(src)
            if tuple(arr.shape) != tuple(p._data.shape):
                errors.append(
                    f"size mismatch for {k}: copying a param with shape "
                    f"{_shape_repr(arr.shape)} from checkpoint, the shape in current "
                    f"model is {_shape_repr(p._data.shape)}."
                )
        if strict:
            if unexpected:
                errors.insert(
                    0,
                    "Unexpected key(s) in state_dict: "
                    + ", ".join(f'"{k}"' for k in unexpected)
                    + ". ",
                )
            if missing:
                errors.insert(
                    0,
                    "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ",
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        for k, p in own.items():
            if k in state:
                src = state[k]
                p._data[...] = src._data if isinstance(src, Tensor) else np.asarray(src)
                p._counter[0] += 1
        keys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
        return keys(missing, unexpected)

    def apply(self, fn) -> Module:
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
        npd = _dt.to_numpy_dtype(dtype) if dtype is not None else _dt.default_float()
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
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


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

    def append(self, module: Module) -> Sequential:
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

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value) -> ParameterList:
        if not isinstance(value, Parameter):
            value = Parameter(value)
        self.register_parameter(str(len(self._parameters)), value)
        return self

    def extend(self, values) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, idx):
        return list(self._parameters.values())[idx]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Module):
    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            items = parameters.items() if hasattr(parameters, "items") else parameters
            for k, v in items:
                self[k] = v

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(value, Parameter):
            value = Parameter(value)
        self.register_parameter(key, value)

    def __getitem__(self, key: str):
        return self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()


class MSELoss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(Module):
    def __init__(
        self,
        weight: Tensor | None = None,
        size_average=None,
        ignore_index: int = -100,
        reduce=None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(Module):
    def __init__(
        self,
        weight: Tensor | None = None,
        size_average=None,
        ignore_index: int = -100,
        reduce=None,
        reduction: str = "mean",
    ):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
        )


# ================================================================ issue 13: more layers


def _factory_dtype(dtype) -> np.dtype:
    return _dt.to_numpy_dtype(dtype) if dtype is not None else _dt.default_float()


def _empty_param(shape, dtype) -> Parameter:
    return Parameter(Tensor._wrap(np.zeros(shape, _factory_dtype(dtype))))


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        d = self.dim % input.ndim
        shape = tuple(input.shape[:d]) + self.unflattened_size + tuple(input.shape[d + 1 :])
        return input.reshape(shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zeroes elements with probability p in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Softmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class LayerNorm(Module):
    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty_param(self.normalized_shape, dtype)
            if bias:
                self.bias = _empty_param(self.normalized_shape, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class _BatchNorm(Module):
    _dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = _empty_param((num_features,), dtype)
            if bias:
                self.bias = _empty_param((num_features,), dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            npd = _factory_dtype(dtype)
            self.register_buffer("running_mean", Tensor._wrap(np.zeros(num_features, npd)))
            self.register_buffer("running_var", Tensor._wrap(np.ones(num_features, npd)))
            self.register_buffer("num_batches_tracked", Tensor._wrap(np.array(0, np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            write_into(self.num_batches_tracked, self.num_batches_tracked._data + 1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked._data)
        use_batch = self.training or not self.track_running_stats
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class Embedding(Module):
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm=None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight=None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = _empty_param((num_embeddings, embedding_dim), dtype)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx=None, **kw):
        assert embeddings.dim() == 2, "Embeddings parameter is expected to be 2-dimensional"
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze, **kw)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input,
            self.weight,
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


class _ConvNd(Module):
    _n = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(
                f"padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                f"'circular'], but got padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = F._tuple(kernel_size, n, "kernel_size")
        self.stride = F._tuple(stride, n, "stride")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = F._tuple(padding, n, "padding")
        self.dilation = F._tuple(dilation, n, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = False
        self.output_padding = (0,) * n
        self.weight = _empty_param((out_channels, in_channels // groups) + self.kernel_size, dtype)
        if bias:
            self.bias = _empty_param((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F._convnd(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self._n,
            self.padding_mode,
        )

    def extra_repr(self) -> str:
        n = self._n
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
            f", stride={self.stride}"
        )
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    _n = 2


class Conv1d(_ConvNd):
    _n = 1


class _ConvTransposeNd(_ConvNd):
    """Weight (in, out/groups, *kernel), as PyTorch's; forward is F.conv_transpose{1,2}d."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        Module.__init__(self)
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = F._tuple(kernel_size, n, "kernel_size")
        self.stride = F._tuple(stride, n, "stride")
        self.padding = F._tuple(padding, n, "padding")
        self.dilation = F._tuple(dilation, n, "dilation")
        self.output_padding = F._tuple(output_padding, n, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = True
        self.weight = _empty_param((in_channels, out_channels // groups) + self.kernel_size, dtype)
        if bias:
            self.bias = _empty_param((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(output_size)[-n:]
        spatial = tuple(input.shape[-n:])
        padding = []
        for d in range(n):
            smallest = (
                (spatial[d] - 1) * self.stride[d]
                - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1)
                + 1
            )
            extra = size[d] - smallest
            if not 0 <= extra < max(self.stride[d], self.dilation[d]):
                raise ValueError(
                    f"requested an output size of {list(size)}, but valid sizes "
                    f"range from {smallest} to "
                    f"{smallest + max(self.stride[d], self.dilation[d]) - 1} "
                    f"(for an input of {list(spatial)})"
                )
            padding.append(extra)
        return tuple(padding)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        fn = F.conv_transpose2d if self._n == 2 else F.conv_transpose1d
        return fn(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose2d(_ConvTransposeNd):
    _n = 2


class ConvTranspose1d(_ConvTransposeNd):
    _n = 1


class MaxPool2d(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override=None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class BCEWithLogitsLoss(Module):
    def __init__(
        self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None
    ):
        super().__init__()
        self.reduction = reduction
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class BCELoss(Module):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class L1Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GroupNorm(Module):
    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = _empty_param((num_channels,), dtype)
            init.ones_(self.weight)
            if bias:
                self.bias = _empty_param((num_channels,), dtype)
                init.zeros_(self.bias)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class SmoothL1Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(Module):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__()
        self.reduction = reduction
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(Module):
    def __init__(
        self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
    ):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


# ------------------------------------------------------------------ recurrent layers


class _RNNBase(Module):
    """RNN / LSTM / GRU with PyTorch's parameter names and layouts (weight_ih_l{k}[_reverse]
    of shape (gates*hidden, input), gate order i,f,g,o for LSTM and r,z,n for GRU), run as a
    Python loop over time of table ops (the input projection is one matmul per layer)."""

    _gates = 1
    mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the "
                "probability of an element being zeroed"
            )
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        g = self._gates * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * directions
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (g, layer_in)), ("weight_hh", (g, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (g,)), ("bias_hh", (g,))]
                for name, shape in shapes:
                    setattr(self, name + suffix, _empty_param(shape, dtype))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _cell(self, xw: Tensor, state, w_hh: Tensor, b_hh):
        raise NotImplementedError

    def _init_state(self, batch: int, dtype) -> tuple:
        directions = 2 if self.bidirectional else 1
        z = Tensor._wrap(np.zeros((self.num_layers * directions, batch, self.hidden_size), dtype))
        return (z,)

    def forward(self, input: Tensor, hx=None):
        from tracegrad.eager.nn.utils.rnn import PackedSequence

        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        return self._forward(input, hx)

    def _forward_packed(self, packed, hx):
        """A PackedSequence: run on the padded batch with each sequence's state frozen
        past its length (so finals are each sequence's last step), then pack again."""
        from tracegrad.eager.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        padded, lengths = pad_packed_sequence(packed, batch_first=self.batch_first)
        n = lengths.numpy()
        steps = padded.shape[1 if self.batch_first else 0]
        masks = [Tensor._wrap((n > t)[:, None]) for t in range(steps)]
        output, final = self._forward(padded, hx, masks)
        out = pack_padded_sequence(
            output, n.tolist(), self.batch_first, enforce_sorted=packed.sorted_indices is None
        )
        return out, final

    def _forward(self, input: Tensor, hx=None, masks=None):
        from tracegrad.eager.torch_ops import cat, stack, where

        unbatched = input.ndim == 2
        if input.ndim not in (2, 3):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead"
            )
        x = input.unsqueeze(1 if not self.batch_first else 0) if unbatched else input
        if self.batch_first:
            x = x.transpose(0, 1)  # (T, B, F)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {x.shape[-1]}"
            )
        steps, batch = x.shape[0], x.shape[1]
        if hx is None:
            states = self._init_state(batch, x._data.dtype)
        else:
            hx = hx if isinstance(hx, tuple) else (hx,)
            states = tuple(h.unsqueeze(1) if unbatched else h for h in hx)
        directions = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                w_ih = getattr(self, "weight_ih" + suffix)
                w_hh = getattr(self, "weight_hh" + suffix)
                b_ih = getattr(self, "bias_ih" + suffix) if self.bias else None
                b_hh = getattr(self, "bias_hh" + suffix) if self.bias else None
                xw = F.linear(layer_input, w_ih, b_ih)  # (T, B, gates*H) in one matmul
                k = layer * directions + d
                state = tuple(s[k] for s in states)
                order = range(steps - 1, -1, -1) if d else range(steps)
                hs = [None] * steps
                for t in order:
                    new = self._cell(xw[t], state, w_hh, b_hh)
                    if masks is not None:  # past a sequence's length its state stays
                        new = tuple(where(masks[t], a, b) for a, b in zip(new, state, strict=True))
                    state = new
                    hs[t] = state[0]
                outs.append(stack(hs, 0))
                for i, s in enumerate(state):
                    finals[i].append(s)
            layer_input = outs[0] if directions == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input.transpose(0, 1) if self.batch_first else layer_input
        final = tuple(stack(f, 0) for f in finals)
        if unbatched:
            output = output.squeeze(0 if self.batch_first else 1)
            final = tuple(f.squeeze(1) for f in final)
        return output, (final if len(final) > 1 else final[0])

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(_RNNBase):
    def __init__(self, *args, nonlinearity: str = "tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        object.__setattr__(self, "nonlinearity", nonlinearity)
        super().__init__(*args, **kwargs)

    def _cell(self, xw, state, w_hh, b_hh):
        pre = xw + F.linear(state[0], w_hh, b_hh)
        return (F.tanh(pre) if self.nonlinearity == "tanh" else F.relu(pre),)


class LSTM(_RNNBase):
    _gates = 4

    def _init_state(self, batch: int, dtype) -> tuple:
        (h,) = super()._init_state(batch, dtype)
        return (h, Tensor._wrap(np.zeros_like(h._data)))

    def _cell(self, xw, state, w_hh, b_hh):
        h, c = state
        gates = xw + F.linear(h, w_hh, b_hh)
        n = self.hidden_size
        i = F.sigmoid(gates[..., :n])
        f = F.sigmoid(gates[..., n : 2 * n])
        g = F.tanh(gates[..., 2 * n : 3 * n])
        o = F.sigmoid(gates[..., 3 * n :])
        c = f * c + i * g
        return (o * F.tanh(c), c)


class GRU(_RNNBase):
    _gates = 3

    def _cell(self, xw, state, w_hh, b_hh):
        (h,) = state
        hw = F.linear(h, w_hh, b_hh)
        n = self.hidden_size
        r = F.sigmoid(xw[..., :n] + hw[..., :n])
        z = F.sigmoid(xw[..., n : 2 * n] + hw[..., n : 2 * n])
        cand = F.tanh(xw[..., 2 * n :] + r * hw[..., 2 * n :])
        return ((1 - z) * cand + z * h,)


# ------------------------------------------------------------------ attention / transformer


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention.out_proj (a plain Linear)."""


class MultiheadAttention(Module):
    """PyTorch's parameters (in_proj_weight (3E, E), in_proj_bias, out_proj) and its
    need_weights computation (scaled q, softmax, dropout on the weights, bmm, out_proj)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim=None,
        vdim=None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got "
                f"embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty_param((3 * embed_dim, embed_dim), dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:  # separate projections of keys and values of other widths
            self.q_proj_weight = _empty_param((embed_dim, embed_dim), dtype)
            self.k_proj_weight = _empty_param((embed_dim, self.kdim), dtype)
            self.v_proj_weight = _empty_param((embed_dim, self.vdim), dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty_param((3 * embed_dim,), dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, dtype=dtype
        )
        if add_bias_kv:  # a learned key and value appended to every sequence
            self.bias_k = _empty_param((1, 1, embed_dim), dtype)
            self.bias_v = _empty_param((1, 1, embed_dim), dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt_len, bsz, e = query.shape
        src_len = key.shape[0]
        h, hd = self.num_heads, self.head_dim
        b = self.in_proj_bias
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        q = F.linear(query, wq, None if b is None else b[:e])
        k = F.linear(key, wk, None if b is None else b[e : 2 * e])
        v = F.linear(value, wv, None if b is None else b[2 * e :])
        extra = 0  # key positions appended (bias_k/bias_v, then the zero attention)
        if self.bias_k is not None:
            k = _cat_tensors([k, self.bias_k.expand(1, bsz, e)], 0)
            v = _cat_tensors([v, self.bias_v.expand(1, bsz, e)], 0)
            extra += 1
        q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
        k = k.reshape(src_len + extra, bsz * h, hd).transpose(0, 1)
        v = v.reshape(src_len + extra, bsz * h, hd).transpose(0, 1)
        if self.add_zero_attn:
            zeros = Tensor._wrap(np.zeros((bsz * h, 1, hd), q._data.dtype))
            k, v = _cat_tensors([k, zeros], 1), _cat_tensors([v, zeros], 1)
            extra += 1
        full = src_len + extra
        bias = np.zeros((1, tgt_len, full), q._data.dtype)
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use "
                "the Transformer module method `generate_square_subsequent_mask` "
                "to create this mask."
            )
        if attn_mask is not None:  # True = not allowed (MultiheadAttention's convention)
            m = attn_mask._data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
            m = np.where(m, -np.inf, 0.0) if m.dtype == np.bool_ else m
            if extra:  # the appended positions are always visible
                m = np.concatenate([m, np.zeros(m.shape[:-1] + (extra,), m.dtype)], -1)
            bias = bias + (m.reshape(1, tgt_len, full) if m.ndim == 2 else m)
        if key_padding_mask is not None:
            kp = (
                key_padding_mask._data
                if isinstance(key_padding_mask, Tensor)
                else np.asarray(key_padding_mask)
            )
            kp = np.where(kp, -np.inf, 0.0) if kp.dtype == np.bool_ else kp
            if extra:
                kp = np.concatenate([kp, np.zeros(kp.shape[:-1] + (extra,), kp.dtype)], -1)
            kp = np.repeat(kp.reshape(bsz, 1, 1, full), h, axis=1).reshape(bsz * h, 1, full)
            bias = bias + kp
        scores = _bmm(q * (1.0 / math.sqrt(hd)), k.transpose(-2, -1))
        if bias.any():
            scores = scores + bias.astype(q._data.dtype)
        weights = F.softmax(scores, -1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout)
        out = _bmm(weights, v)  # (B*H, L, hd)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, e)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, e)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(bsz, h, tgt_len, full)
        if average_attn_weights:
            weights = weights.mean(1)
        if unbatched:
            weights = weights.squeeze(0)
        return out, weights


def _cat_tensors(tensors, dim: int) -> Tensor:
    from tracegrad.eager.torch_ops import cat as _cat

    return _cat(tensors, dim)


def _bmm(a: Tensor, b: Tensor) -> Tensor:
    from tracegrad.eager.torch_ops import bmm

    return bmm(a, b)


class TransformerEncoderLayer(Module):
    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = F.relu if activation == "relu" else F.gelu
        self.activation = activation

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self, src: Tensor, src_mask=None, src_key_padding_mask=None, is_causal: bool = False
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm=None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        import copy

        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(
                out,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        return self.norm(out) if self.norm is not None else out
