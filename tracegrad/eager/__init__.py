"""tracegrad.eager: PyTorch-faithful dynamic autograd on NumPy.

Replace `import torch` with `import tracegrad.eager as torch` and PyTorch's
autograd snippets give the same values, grad_fn names and errors:

    >>> import tracegrad.eager as torch
    >>> x = torch.tensor([1.0], requires_grad=True)
    >>> y = x * 2
    >>> z = y + 3
    >>> y.grad_fn.name(), z.grad_fn.name(), z.grad_fn.next_functions[1]
    ('MulBackward0', 'AddBackward0', (None, 0))

Every op is one primitive of tracegrad's rule table (tracegrad/ops/table.py);
the backward pass runs that table's vjp rules, the same ones compiled mode uses.
"""

from __future__ import annotations

from tracegrad.eager import (
    autograd,
    special,
)
from tracegrad.eager._tensor import Size, Tensor, tensor
from tracegrad.eager.autograd import detect_anomaly, set_detect_anomaly

# issue 13: PyTorch's top level (tracegrad/eager/compat.py)
from tracegrad.eager.compat import (
    Generator,
    Variable,
    accelerator,
    backends,
    cuda,
    device,
    get_default_device,
    load,
    save,
    set_default_device,
)
from tracegrad.eager.complex_ops import *  # noqa: F403  (issue 26: complex, view_as_real, ...)
from tracegrad.eager.complex_ops import complex, real
from tracegrad.eager.creation import (
    arange,
    as_tensor,
    clone,
    detach,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    is_tensor,
    linspace,
    manual_seed,
    numel,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    zeros,
    zeros_like,
)
from tracegrad.eager.dtypes import (
    bool_ as bool,
)
from tracegrad.eager.dtypes import (
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    uint8,
)
from tracegrad.eager.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from tracegrad.eager.more_ops import *  # noqa: F403  (issue 26: einsum, scatter, prod, ...)
from tracegrad.eager.more_ops import round
from tracegrad.eager.torch_ops import *  # noqa: F403
from tracegrad.eager.torch_ops import abs, max, min, pow, sum

_LAZY = {
    "nn": "tracegrad.eager.nn",
    "optim": "tracegrad.eager.optim",
    "checkpoint": ("tracegrad.eager.checkpointing", "checkpoint"),
    "checkpoint_sequential": ("tracegrad.eager.checkpointing", "checkpoint_sequential"),
    "utils": "tracegrad.eager.utils",
    "fft": "tracegrad.eager.fft",  # torch.fft (issue 26)
    # torch.compile is tracegrad.compile (the compiled front end, looked up lazily as
    # PyTorch's own torch.compile imports torch._dynamo: eager mode never needs it)
    "compile": ("tracegrad.compiler", "compile"),
}


def __getattr__(name: str):
    import importlib

    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tracegrad.eager' has no attribute {name!r}")
    if isinstance(target, tuple):
        return getattr(importlib.import_module(target[0]), target[1])
    return importlib.import_module(target)


autograd.Variable = Variable
from tracegrad.eager import linalg  # noqa: E402  (torch.linalg; its TOP_LEVEL: torch.det, torch.cholesky_solve, ...)

globals().update(linalg.TOP_LEVEL)
