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

import math

import numpy as np

from tracegrad.eager._tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _vector_norm(arr: np.ndarray, norm_type: float) -> np.ndarray:
    a = np.abs(arr.ravel())
    if math.isinf(norm_type):
        return (a.max() if norm_type > 0 else a.min()) if a.size else np.zeros((), arr.dtype)
    if norm_type == 0:
        return np.asarray(np.count_nonzero(a), arr.dtype)
    if norm_type == 1:
        return a.sum()
    if norm_type == 2:
        return np.sqrt(np.dot(a, a))
    return np.sum(a ** norm_type) ** (1.0 / norm_type)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._wrap(np.zeros((), np.float32))
    norms = np.asarray([_vector_norm(t._data, norm_type) for t in tensors])
    total = np.asarray(_vector_norm(norms.astype(tensors[0]._data.dtype), norm_type),
                       tensors[0]._data.dtype)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           "is non-finite, so it cannot be clipped. To disable this error and "
                           "scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return Tensor._wrap(total)


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    grads = _grads(parameters)
    if not grads:
        return
    coef = float(max_norm) / (float(total_norm._data if isinstance(total_norm, Tensor)
                                    else total_norm) + 1e-6)
    coef = min(coef, 1.0)
    for g in grads:
        g._data *= np.asarray(coef, g._data.dtype)
        g._counter[0] += 1


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
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
    for g in _grads(parameters):
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._counter[0] += 1


def parameters_to_vector(parameters) -> Tensor:
    from tracegrad.eager.torch_ops import cat
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for p in parameters:
        n = p._data.size
        p._data[...] = vec._data[pointer:pointer + n].reshape(p._data.shape)
        p._counter[0] += 1
        pointer += n
