"""`tracegrad.eager.nn.functional`: relu, softmax, log_softmax, linear, mse_loss, cross_entropy.

Losses are compositions of table primitives; the last node carries PyTorch's
name (MseLossBackward0, NllLossBackward0). log_softmax subtracts the row max,
so logits of +-1e4 stay finite.

    >>> import tracegrad.eager as torch
    >>> import tracegrad.eager.nn.functional as F
    >>> logits = torch.tensor([[1e4, -1e4], [0.0, 0.0]], requires_grad=True)
    >>> F.cross_entropy(logits, torch.tensor([0, 1]))
    tensor(0.3466, grad_fn=<NllLossBackward0>)
"""
from __future__ import annotations

import numpy as np

from tracegrad.eager import functions as _f
from tracegrad.eager.errors import EagerIndexError, EagerValueError, shape_error
from tracegrad.eager.tensor import Tensor, apply_op
from tracegrad.ops import table as T

relu = _f.relu
tanh = _f.tanh
sigmoid = _f.sigmoid


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    return _f.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    return _f.log_softmax(input, dim, dtype)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias; a 2-D input with a bias is one AddmmBackward0 node, as in PyTorch.

    >>> import tracegrad.eager as torch
    >>> w, b = torch.ones(2, 3, requires_grad=True), torch.zeros(2, requires_grad=True)
    >>> torch.nn.functional.linear(torch.ones(4, 3), w, b).grad_fn
    <AddmmBackward0 object at ...>
    """
    wt = _f.t(weight)
    if bias is not None and input.ndim == 2 and weight.ndim == 2:
        return _f.addmm(bias, input, wt)
    out = _f.matmul(input, wt)
    return out if bias is None else out + bias


def _reduce(values: Tensor, reduction: str, name: str) -> Tensor:
    if reduction == "mean":
        return apply_op(T.mean, (values,), {"axis": None, "keepdims": False}, name=name)
    if reduction == "sum":
        return apply_op(T.sum_, (values,), {"axis": None, "keepdims": False}, name=name)
    if reduction == "none":
        return values
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error."""
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=2)
    diff = input - target
    return _reduce(diff * diff, reduction, "MseLossBackward0")


def nll_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices `target` under log-probabilities `input`."""
    if input.ndim != 2 or target.ndim != 1 or input.shape[0] != target.shape[0]:
        raise shape_error("nll_loss", f"Expected input batch_size ({input.shape[0]}) to match "
                                      f"target batch_size ({target.shape[0]}).", input, target,
                          cls=EagerValueError)
    if target.dtype.np.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {target.dtype._tensor_type[:-6]}")
    n_classes = input.shape[1]
    t = target.numpy()
    if t.size and (t.min() < 0 or t.max() >= n_classes):
        bad = int(t.max() if t.max() >= n_classes else t.min())
        raise shape_error("nll_loss", f"Target {bad} is out of bounds.", input, target,
                          cls=EagerIndexError)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return apply_op(T.nll_loss, (input, target), {"reduction": reduction}, visible=(0,))


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """log_softmax + nll_loss; `target` holds class indices or class probabilities."""
    logp = log_softmax(input, dim=1)
    if target.dtype.is_floating_point:
        per_row = -(logp * target).sum(dim=1)
        return _reduce(per_row, reduction, None)
    return nll_loss(logp, target, reduction)
