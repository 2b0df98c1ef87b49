"""NumPy indexing (`x[0, 1:3, None, idx, ...]`) turned into the `getitem` primitive.

`index_spec(shape, index)` normalizes a NumPy index against a known shape into a
static, hashable spec (see the comment above `getitem` in table.py) plus the
list of integer index arrays, which become operands. Boolean masks that are
concrete become integer arrays through `np.nonzero`; a traced mask would give a
data-dependent shape, which a static graph cannot have.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops.core import (
    DTypeError,
    IndexTypeError,
    ShapeError,
    TracegradError,
    aval_of,
    user_location_suffix,
)
from tracegrad.ops.table import getitem as getitem_prim


def _error(cls, message: str) -> TracegradError:
    return cls(f"getitem: {message}{user_location_suffix()}")


def _is_array_like(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") or isinstance(v, (list, np.ndarray))


def _concrete_mask(mask: Any, shape: tuple) -> np.ndarray:
    if isinstance(mask, np.ndarray):
        return mask
    arr = None
    for convert in (np.asarray, lambda m: m.numpy()):  # eager tensors: __array__ or .numpy()
        try:
            arr = np.asarray(convert(mask))
        except Exception:
            continue
        if arr.dtype == np.bool_:
            break
    if arr is None or arr.dtype != np.bool_:
        raise _error(
            TracegradError,
            f"a traced boolean mask of shape {tuple(mask.shape)} selects a data-dependent "
            "number of elements, which a static graph cannot represent; "
            "use tracegrad.where(mask, x, 0) to keep the shape fixed",
        )
    return arr


def _expand(index: tuple, ndim: int) -> list:
    """Replace `...` (or the missing trailing axes) with full slices."""
    consumed = sum(_mask_ndim(e) for e in index if e is not None and e is not Ellipsis)
    ellipses = [i for i, e in enumerate(index) if e is Ellipsis]
    if len(ellipses) > 1:
        raise _error(ShapeError, "an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise _error(
            ShapeError,
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed",
        )
    fill = [slice(None)] * (ndim - consumed)
    if ellipses:
        i = ellipses[0]
        return list(index[:i]) + fill + list(index[i + 1 :])
    return list(index) + fill


def _mask_ndim(e) -> int:
    """How many axes an index entry consumes (a k-d bool mask consumes k)."""
    if isinstance(e, list):
        e = np.asarray(e)
    if _is_array_like(e) and aval_of(e).dtype == np.bool_:
        if np.ndim(e) == 0:
            raise _error(DTypeError, "a 0-d boolean index is not supported")
        return np.ndim(e)
    return 1


def _normalize_slice(s: slice, n: int) -> tuple:
    """("slice", start, stop, step) with 0 <= start < n; stop None runs past index 0."""
    start, stop, step = s.indices(n)
    if len(range(start, stop, step)) == 0:
        return ("slice", 0, 0, 1)
    return ("slice", start, stop if stop >= 0 else None, step)


def index_spec(shape: tuple, index: Any) -> tuple[tuple, list]:
    """(spec, index_arrays) for `x[index]` where x has `shape`."""
    if not isinstance(index, tuple):
        index = (index,)
    entries = _expand(index, len(shape))
    spec, arrays, dim = [], [], 0
    for e in entries:
        if e is None:
            spec.append(None)
            continue
        if isinstance(e, (bool, np.bool_)):
            raise _error(DTypeError, "a bare True/False index is not supported")
        n = shape[dim] if dim < len(shape) else None
        if isinstance(e, (int, np.integer)):
            i = int(e)
            if not -n <= i < n:
                raise _error(ShapeError, f"index {i} is out of range for axis {dim} with size {n}")
            spec.append(i % n)
            dim += 1
        elif isinstance(e, slice):
            spec.append(_normalize_slice(e, n))
            dim += 1
        elif _is_array_like(e):
            if isinstance(e, list):
                e = np.asarray(e)
            if aval_of(e).dtype == np.bool_:
                mask = _concrete_mask(e, shape)
                if mask.shape != tuple(shape[dim : dim + mask.ndim]):
                    raise _error(
                        ShapeError,
                        f"boolean mask of shape {mask.shape} does not match "
                        f"the indexed axes {tuple(shape[dim : dim + mask.ndim])}",
                    )
                for part in np.nonzero(mask):
                    spec.append(("array", len(arrays)))
                    arrays.append(part)
                dim += mask.ndim
                continue
            if not np.issubdtype(aval_of(e).dtype, np.integer):
                raise _error(
                    IndexTypeError,
                    f"index arrays must be integers or bools, got {aval_of(e).dtype}",
                )
            if isinstance(e, np.ndarray) and e.size and (e.max() >= n or e.min() < -n):
                bad = e.max() if e.max() >= n else e.min()
                raise _error(
                    ShapeError, f"index {bad} is out of range for axis {dim} with size {n}"
                )
            spec.append(("array", len(arrays)))
            arrays.append(e)
            dim += 1
        else:
            raise _error(TypeError, f"unsupported index {e!r} of type {type(e).__name__}")
    return tuple(spec), arrays


def getitem(x: Any, index: Any):
    """`x[index]` with NumPy's rules, on arrays, eager tensors and tracers.

    >>> import numpy as np, tracegrad as tg
    >>> tg.getitem(np.arange(6.0).reshape(2, 3), (1, slice(0, 2)))
    array([3., 4.])
    """
    spec, arrays = index_spec(tuple(np.shape(x)), index)
    return getitem_prim(x, *arrays, spec=spec)
