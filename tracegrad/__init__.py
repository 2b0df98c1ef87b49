"""tracegrad: automatic differentiation with dynamic and static graphs.

    >>> import numpy as np, tracegrad as tg
    >>> f = lambda x: tg.sum(tg.tanh(x) ** 2)
    >>> value, grad = tg.value_and_grad(f)(np.ones(3, np.float32))

Two modes, one rule table of primitives (tracegrad/ops):

Eager mode, a dynamic graph recorded on every call, like PyTorch's autograd:
    import tracegrad.eager as torch   (tensors, backward(), nn, optim, utils.data)

Compiled mode, a static graph traced once per input signature, like JAX:
    compile (alias jit)      trace + differentiate + optimize + Numba kernel, cached on disk;
                             also PyTorch-style code: compile(model), compile(train_step)
    explain                  the graphs and graph breaks of compiled PyTorch-style code
    grad, value_and_grad     reverse mode; argnums, has_aux, pytrees
    jacobian (jacrev), hessian, jacfwd, jvp, vjp, linearize, vmap
    custom_vjp, custom_jvp   user derivative rules
    scan, fori_loop, while_loop, cond    loops and branches inside one graph
    trace (make_jaxpr), eval_shape      the IR graph and output shapes, nothing computed
    gradcheck                finite differences against eager backward, in float64
    clear_caches             drop every compiled kernel this process holds
    devices, device_put      placement: a compiled function called with GPU arrays
                             runs on the GPU (numba.cuda; the `cuda` extra)
    set_num_threads, get_num_threads    one thread limit for kernels, eager ops and BLAS
    random                   jax.random's keys and samplers (PRNGKey, split, normal, ...)
    scipy                    scipy.special / scipy.stats, traceable (as jax.scipy)

The ops: NumPy's names (tg.sin, tg.where, tg.einsum, tg.linalg, ...) work on
NumPy arrays, on eager tensors and while tracing; NumPy's own functions
(np.sin(x), x.sum()) are captured while tracing too. `dir(tracegrad)` lists them
all; each has its own docstring with an example. Errors are TracegradError
subclasses (ShapeError, DTypeError, TracingError, ...) naming the op, the shapes
and the user's line.

Numba is imported only when a kernel is first compiled, so eager-only use
starts fast. Environment variables: `tracegrad.config`.
"""

from __future__ import annotations

from typing import Any

# First, before anything imports NumPy: its OpenBLAS's wait policy (runtime/threads.py).
from tracegrad.runtime.threads import import_numpy as _import_numpy

_import_numpy()

import tracegrad.loops
from tracegrad.ops.api import *  # noqa: F403  (the NumPy-named ops)
from tracegrad.ops.api import trace as _numpy_trace
from tracegrad.ops.core import DTypeError, ShapeError, TracegradError
from tracegrad.ops.nn import *  # noqa: F403  (conv2d, max_pool2d, cross_entropy, ...)
from tracegrad.ops.numpy_names import *  # noqa: F403  (acos, concat, zeros, vecdot, ...)
from tracegrad.runtime.threads import get_num_threads, set_num_threads


def trace(fn_or_array: Any, *args: Any, **kwargs: Any) -> Any:
    """`tg.trace(fn, *example_args)` records `fn` into an IR graph (see
    `tracegrad.tracing.trace`); `tg.trace(array, offset=0, ...)` is NumPy's trace.

    >>> import numpy as np, tracegrad as tg
    >>> [n.op for n in tg.trace(lambda x: tg.sum(x * x), np.ones(2)).nodes]
    ['input', 'mul', 'sum']
    >>> float(tg.trace(np.eye(3)))
    3.0
    """
    if callable(fn_or_array):
        from tracegrad.tracing import trace as trace_graph

        return trace_graph(fn_or_array, *args, **kwargs)
    return _numpy_trace(fn_or_array, *args, **kwargs)


_LAZY = {
    # from the package metadata, looked up on first use (importlib.metadata costs ~40 ms)
    "__version__": "tracegrad.config",
    "TracingError": "tracegrad.tracing",
    "compile": "tracegrad.compiler",
    "explain": "tracegrad.explainer",
    "grad": "tracegrad.compiler",
    "value_and_grad": "tracegrad.compiler",
    "jacobian": "tracegrad.transforms",
    "hessian": "tracegrad.transforms",
    "clear_caches": "tracegrad.compiler",
    "gradcheck": "tracegrad.eager.gradcheck",
    "vjp": "tracegrad.transforms",
    "jvp": "tracegrad.transforms",
    "linearize": "tracegrad.transforms",
    "jacfwd": "tracegrad.transforms",
    "vmap": "tracegrad.transforms",
    "jacrev": "tracegrad.transforms",
    "custom_vjp": "tracegrad.custom",
    "custom_jvp": "tracegrad.custom",
    "scan": "tracegrad.loops",
    "fori_loop": "tracegrad.loops",
    "while_loop": "tracegrad.loops",
    "cond": "tracegrad.loops",
    "devices": "tracegrad.placement",
    "device_put": "tracegrad.placement",
    "DeviceArray": "tracegrad.placement",
    "viz": None,
    "eager": None,
    "random": None,
    "scipy": None,
}


# JAX's names for the same things: name -> (module, attribute)
_ALIASES = {
    "jit": ("tracegrad.compiler", "compile"),
    "make_jaxpr": ("tracegrad.tracing", "make_graph"),
    "eval_shape": ("tracegrad.tracing", "eval_shape"),
}


def __getattr__(name: str):
    import importlib

    if name in _ALIASES:
        modname, attr = _ALIASES[name]
        return getattr(importlib.import_module(modname), attr)
    if name not in _LAZY:
        raise AttributeError(f"module 'tracegrad' has no attribute {name!r}")
    modname = _LAZY[name]
    if modname is None:
        return importlib.import_module(f"tracegrad.{name}")
    return getattr(importlib.import_module(modname), name)


def __dir__() -> list[str]:
    """The public API, with the lazily imported transforms (compile, grad, ...)."""
    return sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY) | set(_ALIASES))
