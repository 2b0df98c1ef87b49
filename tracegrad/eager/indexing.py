"""`x[index]` and `x[index] = v` on eager tensors, with PyTorch's node names.

Reading goes through the table's `getitem` primitive (tracegrad.ops.indexing
builds its static spec). Writing, when recorded, is expressed with table
primitives too: the new value is `where(mask, scattered v, old)`, where the
scatter is `index_add_zeros`; the node is named `CopySlices` (basic index) or
`IndexPutBackward0` (tensor index), and shows (old, v) in next_functions as
PyTorch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.eager.errors import EagerIndexError
from tracegrad.eager.grad_mode import STATE
from tracegrad.ops import table as T
from tracegrad.ops.core import ShapeError
from tracegrad.ops.indexing import index_spec
from tracegrad.ops.rulekit import spec_to_index


def _plain_index(index: Any) -> Any:
    """Tensors inside an index become arrays (bool masks stay bool)."""
    from tracegrad.eager._tensor import Tensor

    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if isinstance(index, list) and any(isinstance(i, Tensor) for i in index):
        return np.asarray([i._data if isinstance(i, Tensor) else i for i in index])
    return index


def _spec(x, index):
    try:
        return index_spec(tuple(x._data.shape), index)
    except ShapeError as exc:  # PyTorch raises IndexError for these
        raise EagerIndexError(str(exc)) from None


def getitem(x, index, name: str | None = None):
    """x[index]; basic indexing (ints, slices, None) returns a view sharing x's memory
    and version counter, as in PyTorch, so an in-place change of it writes into x."""
    from tracegrad.eager._tensor import _make_view, apply_op

    index = _plain_index(index)
    spec, arrays = _spec(x, index)
    out = apply_op(T.getitem, (x, *arrays), {"spec": spec}, name=name)
    if not arrays:
        # The table's impl copies (compiled mode never aliases); eager reads through a view.
        out._data = x._data[spec_to_index(spec, ()) + (Ellipsis,)]
        _make_view(out, x, T.getitem, {"spec": spec}, name)
    return out


def setitem(x, index, value) -> None:
    from tracegrad.eager._tensor import (
        _VALUE_KINDS,
        Tensor,
        apply_op,
        check_inplace,
        commit_inplace,
        inplace_operand,
        refresh_view,
        tensor,
    )

    if x._requires_grad and x._grad_fn is None and STATE.grad_enabled:
        from tracegrad.eager._tensor import LEAF_VIEW_INPLACE_MESSAGE

        raise RuntimeError(LEAF_VIEW_INPLACE_MESSAGE)  # PyTorch: x[i] = v writes through a view
    check_inplace(x)
    plain = _plain_index(index)
    value_requires_grad = isinstance(value, Tensor) and value._requires_grad
    recording = STATE.grad_enabled and (x._requires_grad or value_requires_grad)
    if x._base is not None:
        refresh_view(x)
        recording = recording or (STATE.grad_enabled and x._base._requires_grad)
    v = value._data if isinstance(value, Tensor) else value
    traced = type(x._data) in _VALUE_KINDS or type(v) in _VALUE_KINDS
    if not recording and not traced:  # (in a capture, the functional form below)
        dst = x._data
        if not dst.flags.writeable:  # an expanded tensor: write the selected elements
            from tracegrad.eager._tensor import OVERLAP_WRITE_MESSAGE, expanded_view, writable_alias

            idx = plain if isinstance(plain, tuple) else (plain,)
            if not any(i is Ellipsis for i in idx):
                idx = (*idx, Ellipsis)  # (a view, also where the index selects one element)
            sel = dst[idx]
            alias = writable_alias(sel, expanded_view(x)) if np.shares_memory(sel, dst) else None
            if alias is None:
                raise RuntimeError(OVERLAP_WRITE_MESSAGE)
            alias[...] = v
        else:
            dst[plain] = v
        x._counter[0] += 1
        return
    spec, arrays = _spec(x, plain)
    selected_shape = np.empty(x._data.shape, dtype=np.bool_)[plain].shape
    if not isinstance(value, Tensor):
        value = tensor(np.asarray(value, dtype=x._data.dtype))
    if value._data.shape != selected_shape:
        value = (
            value.expand(*selected_shape)
            if value.dim() <= len(selected_shape)
            else value.reshape(selected_shape)
        )
    mask = np.zeros(x._data.shape, dtype=np.bool_)
    mask[plain] = True
    scattered = apply_op(
        T.index_add_zeros, (value, *arrays), {"spec": spec, "shape": tuple(x._data.shape)}
    )
    name = "IndexPutBackward0" if arrays else "torch::autograd::CopySlices"
    target = inplace_operand(x) if x._base is not None else x
    result = apply_op(T.where, (mask, scattered, target), {}, name=name, visible=(2, 1))
    commit_inplace(x, result)
