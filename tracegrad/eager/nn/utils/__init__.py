"""`torch.nn.utils`: gradient clipping and parameter/vector conversion.

>>> import tracegrad.eager as torch
>>> w = torch.tensor([3.0, 4.0], requires_grad=True)
>>> (w * w).sum().backward()          # grad = [6, 8], norm 10
>>> torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(10.)
>>> w.grad
tensor([0.6000, 0.8000])
"""

from __future__ import annotations

import numpy as np

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.grad_mode import no_grad


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(
    tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """The norm of the tensors' norms, as PyTorch computes it: tensor ops under no_grad
    (so a captured training step records them like any other op)."""
    from tracegrad.eager.linalg import vector_norm
    from tracegrad.eager.torch_ops import stack

    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._wrap(np.zeros((), np.float32))
    with no_grad():
        norms = [vector_norm(t, norm_type) for t in tensors]
        total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(np.isfinite(total._data)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` "
            "is non-finite, so it cannot be clipped. To disable this error and "
            "scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale every gradient in place by min(max_norm / (total_norm + 1e-6), 1)."""
    from tracegrad.eager.torch_ops import clamp

    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        clip_coef = clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(clip_coef)


def clip_grad_norm_(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach=None,
) -> Tensor:
    """Scale all gradients together so their joint norm is at most max_norm (PyTorch's
    formula: by max_norm / (total_norm + 1e-6), clamped at 1). Returns the total norm."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters) -> Tensor:
    from tracegrad.eager.torch_ops import cat

    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for p in parameters:
        n = p._data.size
        p._data[...] = vec._data[pointer : pointer + n].reshape(p._data.shape)
        p._counter[0] += 1
        pointer += n


from tracegrad.eager.nn.utils import rnn  # noqa: E402  (torch.nn.utils.rnn)
