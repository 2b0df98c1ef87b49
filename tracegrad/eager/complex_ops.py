"""PyTorch's complex-number functions: torch.complex, view_as_real, view_as_complex,
real, imag, conj, angle, polar (issue 26).

They are composites of the rule table's real/imag/conj/complex primitives
(tracegrad/ops/complex_ops.py), whose vjp rules follow JAX's convention; the
backward engine conjugates complex gradients into and out of every node
(tracegrad/eager/graph.py), so `z.grad` is PyTorch's conjugate Wirtinger
gradient: for a real loss L(z), z.grad = dL/dx + i dL/dy.

    >>> import tracegrad.eager as torch
    >>> z = torch.tensor([3 + 4j], requires_grad=True)
    >>> z.abs().sum().backward()
    >>> z.grad
    tensor([0.6000+0.8000j])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.eager import dtypes as _dt
from tracegrad.eager._tensor import Tensor, apply_op
from tracegrad.ops import table as T

__all__ = [
    "complex",
    "view_as_real",
    "view_as_complex",
    "real",
    "imag",
    "conj",
    "conj_physical",
    "resolve_conj",
    "is_conj",
    "angle",
    "polar",
]


def _is_c(t: Tensor) -> bool:
    return t._data.dtype.kind == "c"


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """torch.complex: real + i imag, from two float tensors of one dtype.

    >>> import tracegrad.eager as torch
    >>> torch.complex(torch.tensor([1.0]), torch.tensor([2.0]))
    tensor([1.+2.j])
    """
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"complex(): argument '{name}' (position {1 if name == 'real' else 2}) "
                f"must be Tensor, not {type(t).__name__}"
            )
    if real._data.dtype != imag._data.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {_dt.from_numpy_dtype(real._data.dtype).name.title()}"
            f" but got scalar type {_dt.from_numpy_dtype(imag._data.dtype).name.title()} for "
            "second argument"
        )
    if real._data.dtype.kind != "f" or real._data.dtype == np.float16:
        raise RuntimeError(
            "Expected both inputs to be Half, Float or Double tensors but got "
            f"{_dt.from_numpy_dtype(real._data.dtype).name.title()} and "
            f"{_dt.from_numpy_dtype(imag._data.dtype).name.title()}"
        )
    return apply_op(T.REGISTRY["complex"], (real, imag), {}, name="ComplexBackward0")


def real(input: Tensor) -> Tensor:
    """torch.real: the real part (the tensor itself for real tensors)."""
    return apply_op(T.REGISTRY["real"], (input,), {}) if _is_c(input) else input


def imag(input: Tensor) -> Tensor:
    """torch.imag: the imaginary part; real tensors raise as in PyTorch."""
    if not _is_c(input):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply_op(T.REGISTRY["imag"], (input,), {})


def conj(input: Tensor) -> Tensor:
    """torch.conj: the complex conjugate (the tensor itself for real tensors).

    tracegrad has no lazy conjugate bit: the result is a new tensor (PyTorch's is a
    view with `is_conj()` set); values and gradients agree."""
    return apply_op(T.REGISTRY["conj"], (input,), {}) if _is_c(input) else input


conj_physical = conj


def resolve_conj(input: Tensor) -> Tensor:
    """The tensor itself (tracegrad conjugates eagerly: there is no conjugate bit)."""
    return input


def is_conj(input: Tensor) -> bool:
    """Always False: tracegrad conjugates eagerly."""
    return False


def angle(input: Tensor) -> Tensor:
    """torch.angle: atan2(imag, real) for complex tensors; 0 or pi for real ones.

    >>> import tracegrad.eager as torch
    >>> torch.angle(torch.tensor([1j, -1.0 + 0j]))
    tensor([1.5708, 3.1416])
    """
    if _is_c(input):
        return apply_op(T.arctan2, (imag(input), real(input)), {}, name="AngleBackward0")
    from tracegrad.ops import api

    out = api.angle(input._data)
    return Tensor._wrap(np.asarray(out, dtype=input._data.dtype))


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """torch.polar: abs * (cos(angle) + i sin(angle))."""
    return complex(abs * angle.cos(), abs * angle.sin())


def view_as_real(input: Tensor) -> Tensor:
    """torch.view_as_real: a complex (...,) tensor as a real (..., 2) one (real, imag).

    A copy here (PyTorch's shares memory); values and gradients agree.

    >>> import tracegrad.eager as torch
    >>> torch.view_as_real(torch.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    if not _is_c(input):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    from tracegrad.eager import torch_ops

    return torch_ops.stack([real(input), imag(input)], dim=-1)


def view_as_complex(input: Tensor) -> Tensor:
    """torch.view_as_complex: a real (..., 2) tensor as a complex (...,) one.

    >>> import tracegrad.eager as torch
    >>> torch.view_as_complex(torch.tensor([[1.0, 2.0]]))
    tensor([1.+2.j])
    """
    d = input._data
    if d.dtype.kind != "f" or d.dtype == np.float16:
        raise RuntimeError(
            "view_as_complex is only supported for float and double tensors, but got a "
            f"tensor of scalar type: {_dt.from_numpy_dtype(d.dtype).name.title()}"
        )
    if d.ndim == 0 or d.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return complex(input[..., 0], input[..., 1])


def _method(fn: Any):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def install_methods() -> None:
    """Tensor.conj/angle/is_conj/resolve_conj/conj_physical and the
    .real/.imag properties (PyTorch's)."""
    for name in ("conj", "angle", "conj_physical", "resolve_conj", "is_conj"):
        setattr(Tensor, name, _method(globals()[name]))
    setattr(Tensor, "real", property(real))  # noqa: B010
    setattr(Tensor, "imag", property(imag))  # noqa: B010


install_methods()
