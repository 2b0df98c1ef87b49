"""`tracegrad.eager.autograd`: backward, grad, anomaly detection (PyTorch's torch.autograd).

>>> import tracegrad.eager as torch
>>> x = torch.tensor([3.0], requires_grad=True)
>>> (g,) = torch.autograd.grad((x ** 3).sum(), [x], create_graph=True)
>>> g, torch.autograd.grad(g.sum(), [x])[0]
(tensor([27.], grad_fn=<MulBackward0>), tensor([18.]))
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.engine import make_root_grads, run_backward
from tracegrad.eager.grad_mode import (
    STATE,
    inference_mode,  # noqa: F401
)
from tracegrad.eager.graph import grad_accumulator


def _as_list(x) -> list:
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def backward(
    tensors,
    grad_tensors=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Sequence[Tensor] | None = None,
) -> None:
    """Accumulate gradients of `tensors` into the leaves' `.grad`."""
    tensors = _as_list(tensors)
    grad_tensors = _as_list(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    roots, grads = make_root_grads(tensors, grad_tensors, create_graph)
    targets = None
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = {}
        for t in inputs:
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            node = t._grad_fn if t._grad_fn is not None else grad_accumulator(t)
            targets[node] = t if t._grad_fn is not None else None
    run_backward(roots, grads, retain_graph, create_graph, targets=targets, accumulate=True)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple:
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated)."""
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    grad_outputs = _as_list(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    roots, grads = make_root_grads(outputs, grad_outputs, create_graph, for_grad=True)
    nodes = []
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be Tensors, got {type(t).__name__}")
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        if t._grad_fn is not None:
            nodes.append(t._grad_fn)
        else:
            ref = t._acc_ref
            nodes.append(ref() if ref is not None else None)
    targets = {n: None for n in nodes if n is not None}
    captured = run_backward(
        roots, grads, retain_graph, create_graph, targets=targets, accumulate=False
    )
    result = []
    for i, (t, node) in enumerate(zip(inputs, nodes, strict=True)):
        g = captured.get(node) if node is not None else None
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                import numpy as np

                result.append(Tensor._wrap(np.zeros_like(t._data)))
            else:
                result.append(None)
            continue
        result.append(g if isinstance(g, Tensor) else Tensor._wrap(g))
    return tuple(result)


class detect_anomaly:
    """Make backward raise at the first NaN/Inf gradient, naming the node and
    showing the traceback of the forward op that created it (recorded only
    while this mode is on).

    >>> import tracegrad.eager as torch
    >>> x = torch.tensor([0.0], requires_grad=True)
    >>> with torch.detect_anomaly():
    ...     y = torch.sqrt(x)
    ...     y.backward()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: Function 'SqrtBackward0' returned inf values in its 0th output...
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly = True
        STATE.anomaly_check_nan = self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Turn anomaly mode on or off (immediately; restored by `with`)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly = bool(mode)
        STATE.anomaly_check_nan = check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False


def is_anomaly_enabled() -> bool:
    return STATE.anomaly


def gradcheck(
    fn,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    **kwargs,
):
    """Finite differences against backward, in float64 (tracegrad.gradcheck)."""
    from tracegrad.eager.gradcheck import gradcheck as _gradcheck

    return _gradcheck(fn, inputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    **kwargs,
) -> bool:
    """PyTorch's gradgradcheck: gradcheck of (inputs, grad_outputs) -> the gradients of
    func(inputs) (created with create_graph=True), so second derivatives are checked
    against finite differences of first ones. Random grad_outputs if none are given."""
    import numpy as np

    tupled_inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if grad_outputs is None:
        outputs = func(*tupled_inputs)
        outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
        rng = np.random.default_rng(0)

        def random_like(o):
            values = rng.standard_normal(o.shape)
            if o._data.dtype.kind == "c":  # complex outputs: complex grad_outputs
                values = values + 1j * rng.standard_normal(o.shape)
            return Tensor._wrap(values.astype(o._data.dtype)).requires_grad_()

        grad_outputs = tuple(
            random_like(o) for o in outputs if isinstance(o, Tensor) and o.requires_grad
        )
    else:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    num_outputs = len(grad_outputs)

    def new_func(*args):
        input_args = args[: len(args) - num_outputs]
        gos = args[len(args) - num_outputs :]
        outputs = func(*input_args)
        outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
        outputs = tuple(o for o in outputs if isinstance(o, Tensor) and o.requires_grad)
        diff_inputs = tuple(x for x in input_args if isinstance(x, Tensor) and x.requires_grad)
        grads = grad(outputs, diff_inputs, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        new_func,
        tupled_inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )


from tracegrad.eager import autograd_functional as functional  # noqa: E402
from tracegrad.eager import graph  # noqa: E402  (torch.autograd.graph)
from tracegrad.eager.graph import Node  # noqa: E402,F401

# `from tracegrad.eager.autograd.functional import jacobian` works as in PyTorch
sys.modules[__name__ + ".functional"] = functional
sys.modules[__name__ + ".graph"] = graph

# torch.autograd.Function and torch.autograd.function (custom functions)
from tracegrad.eager import function  # noqa: E402
from tracegrad.eager.function import Function  # noqa: E402,F401

sys.modules[__name__ + ".function"] = function
