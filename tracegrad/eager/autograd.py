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
from types import FrameType

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.engine import make_root_grads, run_backward
from tracegrad.eager.grad_mode import (
    STATE,
    inference_mode,  # noqa: F401
)
from tracegrad.eager.graph import GradientEdge, grad_accumulator

CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak."
)


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel of the first frame outside tracegrad.eager."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tracegrad.eager"):
        frame, level = frame.f_back, level + 1
    return level


def _as_list(x) -> list:
    if x is None:
        return None
    if isinstance(x, (Tensor, GradientEdge)):
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
    if create_graph:
        import warnings

        warnings.warn(CREATE_GRAPH_WARNING, UserWarning, stacklevel=_user_stacklevel())
    targets = None
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = {}
        for t in inputs:
            if isinstance(t, GradientEdge):
                targets.setdefault(t.node, None)  # a GradientEdge: its node, no tensor to fill
                continue
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
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple:
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated).
    Outputs and inputs may be GradientEdges (torch.autograd.graph.get_gradient_edge).
    With is_grads_batched, the first dimension of each grad_output is a batch: one
    vector-Jacobian product per entry, stacked (PyTorch computes it with vmap)."""
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    grad_outputs = _as_list(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if is_grads_batched:
        return _batched_grad(
            outputs,
            inputs,
            grad_outputs,
            retain_graph,
            create_graph,
            allow_unused,
            materialize_grads,
        )
    roots, grads = make_root_grads(outputs, grad_outputs, create_graph, for_grad=True)
    nodes = []
    for t in inputs:
        if isinstance(t, GradientEdge):
            nodes.append(t.node)
            continue
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

                if isinstance(t, GradientEdge):
                    raise RuntimeError(
                        "materialize_grads cannot be used when the given input is a GradientEdge"
                    )
                zeros = Tensor._wrap(np.zeros_like(t._data))
                result.append(zeros.requires_grad_() if create_graph else zeros)  # (PyTorch)
            else:
                result.append(None)
            continue
        result.append(g if isinstance(g, Tensor) else Tensor._wrap(g))
    return tuple(result)


def _batched_grad(
    outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads
) -> tuple:
    """autograd.grad(..., is_grads_batched=True): one backward pass per batch entry."""
    from tracegrad.eager.engine import _size_str
    from tracegrad.eager.torch_ops import stack

    if grad_outputs is None or len(grad_outputs) != len(outputs):
        raise RuntimeError(
            "is_grads_batched=True needs one batched grad_output per output (got "
            f"{0 if grad_outputs is None else len(grad_outputs)} for {len(outputs)} outputs)"
        )
    batch: int | None = None
    for i, (out, go) in enumerate(zip(outputs, grad_outputs, strict=True)):
        shape = tuple(out.shape)
        if not isinstance(go, Tensor) or go.ndim == 0 or tuple(go.shape[1:]) != shape:
            got = _size_str(tuple(go.shape[1:]) if isinstance(go, Tensor) and go.ndim else ())
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {got} and output[{i}] has a shape "
                f"of {_size_str(shape)}. If you only want some tensors in `grad_output` to be "
                "considered batched, consider using vmap."
            )
        if batch is not None and go.shape[0] != batch:
            raise RuntimeError(
                f"is_grads_batched=True: grad_output[{i}] has a batch of {go.shape[0]} "
                f"entries but grad_output[0] has {batch}"
            )
        batch = go.shape[0]
    if batch is None:
        raise RuntimeError("grad(..., is_grads_batched=True) needs at least one output")
    per_entry = [
        grad(
            outputs,
            inputs,
            [go[b] for go in grad_outputs],
            retain_graph=retain_graph or b < batch - 1,
            create_graph=create_graph,
            allow_unused=allow_unused,
        )
        for b in range(batch)
    ]
    result = []
    for k, t in enumerate(inputs):
        gs = [entry[k] for entry in per_entry]
        if batch and all(g is not None for g in gs):
            result.append(stack(gs))
        elif materialize_grads and not isinstance(t, GradientEdge):
            import numpy as np

            result.append(Tensor._wrap(np.zeros_like(t._data)))  # (PyTorch: unbatched zeros)
        else:
            result.append(None)
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
        import warnings

        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and "
            "should only be enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )

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
            mode = object.__new__(detect_anomaly)  # (warned once, when decorating)
            mode.check_nan = self.check_nan
            with mode:
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


class _unsafe_preserve_version_counter:
    """PyTorch's torch.autograd._unsafe_preserve_version_counter(tensor or tensors): in-place
    changes inside the `with` leave the version counters as they were (so saved copies
    still pass their check: only for changes that do not alter what backward needs)."""

    def __init__(self, tensors):
        self.tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)

    def __enter__(self):
        self._versions = [t._counter[0] for t in self.tensors]
        return self

    def __exit__(self, *exc):
        for t, v in zip(self.tensors, self._versions, strict=True):
            t._counter[0] = v
        return False


def gradcheck(
    fn,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    **kwargs,
):
    """Finite differences against backward, in float64 (tracegrad.gradcheck)."""
    from tracegrad.eager.gradcheck import gradcheck as _gradcheck

    tupled = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in tupled):
        raise ValueError(  # (tracegrad.gradcheck itself also checks plain float inputs)
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "the them have requires_grad=True."
        )

    return _gradcheck(
        fn,
        inputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
    )


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
    nondet_tol: float = 0.0,
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
        nondet_tol=nondet_tol,
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
