"""`tracegrad.compile(module)`: a module whose forward runs as a captured graph.

The result behaves like the module, as torch.compile's OptimizedModule does: it
is an `nn.Module` holding the original as `_orig_mod` (so `state_dict()` keys
start with `_orig_mod.`, as PyTorch's do), shares its parameters and buffers,
and `train()`/`eval()`/`load_state_dict()` reach the original. Its parameters
are graph inputs read on every call; guards retrace on `train()`/`eval()` or a
swapped submodule.

    >>> import numpy as np, tracegrad as tg, tracegrad.eager as torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    >>> fast = tg.compile(net, backend="interpret")
    >>> x = torch.ones(2, 4)
    >>> np.allclose(fast(x).detach().numpy(), net(x).detach().numpy())
    True
    >>> [p is q for p, q in zip(fast.parameters(), net.parameters())]
    [True, True]
"""

from __future__ import annotations

from typing import Any


def is_module(value: Any) -> bool:
    from tracegrad.eager.nn.modules import Module

    return isinstance(value, Module)


def module_names(fn: Any) -> dict:
    """id(tensor) -> a readable name ("model.fc1.weight") for the parameters and
    buffers of the modules `fn` reaches through its closure, globals or self."""
    names: dict = {}
    for prefix, module in _modules_of(fn):
        for name, p in module.named_parameters():
            names.setdefault(id(p), f"{prefix}{name}")
        for name, b in _named_buffers(module):
            names.setdefault(id(b), f"{prefix}{name}")
    return names


def _named_buffers(module) -> list:
    out = []
    for mod_prefix, m in module.named_modules():
        for name, b in m._buffers.items():
            if b is not None:
                out.append((f"{mod_prefix}.{name}" if mod_prefix else name, b))
    return out


def _modules_of(fn: Any) -> list:
    if is_module(fn):
        return [("", fn)]
    found = []
    bound = getattr(fn, "__self__", None)
    if is_module(bound):
        found.append(("", bound))
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    if code is not None:
        for name, cell in zip(code.co_freevars, cells, strict=True):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if is_module(value):
                found.append((name + ".", value))
        globals_ = getattr(fn, "__globals__", {})
        for name in code.co_names:
            value = globals_.get(name)
            if is_module(value):
                found.append((name + ".", value))
    return found


def _module_base():
    from tracegrad.eager.nn.modules import Module

    return Module


def CompiledModule(
    module,
    make_compiled,
    backend: str | None = None,
    fullgraph: bool = False,
):
    """Wrap `module` so that calling it runs the captured graph (see the module doc);
    `make_compiled(fn, backend)` is tracegrad.compiler's CompiledFunction factory."""
    return _compiled_module_class()(module, make_compiled, backend, fullgraph)


_CLASS = None


def _compiled_module_class():
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    Module = _module_base()

    class OptimizedModule(Module):
        """A module compiled by `tracegrad.compile` (PyTorch's OptimizedModule)."""

        def __init__(self, module, make_compiled, backend, fullgraph):
            super().__init__()
            self._orig_mod = module

            def forward(*args, **kwargs):
                return module(*args, **kwargs)

            forward.__name__ = type(module).__name__
            compiled = make_compiled(forward, backend)
            compiled.fullgraph = fullgraph
            compiled.force_capture = True
            compiled.names_from = module
            object.__setattr__(self, "_compiled", compiled)

        def forward(self, *args, **kwargs):
            return self._compiled(*args, **kwargs)

        def __call__(self, *args, **kwargs):
            return self._compiled(*args, **kwargs)

        def cache_info(self):
            return self._compiled.cache_info()

        def wait_kernels(self, timeout: float | None = None) -> bool:
            """Wait until the Numba kernels replace the eager tier (see tracegrad.compile)."""
            return self._compiled.wait_kernels(timeout)

        @property
        def trace_reasons(self) -> list:
            return self._compiled.trace_reasons

        def lower(self, *args, **kwargs):
            return self._compiled.lower(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            try:
                return Module.__getattr__(self, name)
            except AttributeError:
                return getattr(self.__dict__["_modules"]["_orig_mod"], name)

        def __repr__(self) -> str:
            return f"OptimizedModule(\n  (_orig_mod): {self._orig_mod!r}\n)"

    OptimizedModule.__name__ = "OptimizedModule"
    _CLASS = OptimizedModule
    return _CLASS


__all__ = ["CompiledModule", "is_module", "module_names"]
