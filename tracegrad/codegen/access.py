"""Strided access: how the generated code reads a node's elements.

Every materialized array lives in a flat, C-ordered 1-D buffer. A view op
(reshape, broadcast_to, transpose, expand_dims, squeeze) does not copy: it
changes how indices map onto its base's buffer. An `Access` is that map:
element `idx` of the node sits at `buf[offset + sum(idx[k] * strides[k])]`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def c_strides(shape: tuple) -> tuple:
    """Element strides of a C-contiguous array of `shape`."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Access:
    buf: str  # name of the flat buffer variable in generated code
    shape: tuple
    strides: tuple
    offset: int = 0
    scalar: str | None = None  # a literal (size-1 const): no buffer at all

    @property
    def contiguous(self) -> bool:
        """Is this the C-ordered layout of `shape` (so a reshape stays a view)?"""
        keep = [(d, s) for d, s in zip(self.shape, self.strides, strict=True) if d != 1]
        return all(
            s == cs for (d, s), cs in zip(keep, c_strides(tuple(d for d, _ in keep)), strict=True)
        )

    def broadcast(self, shape: tuple) -> Access:
        """Read this array broadcast to `shape` (NumPy rules, right-aligned)."""
        shape = tuple(shape)
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for d_src, s, d_dst in zip(self.shape, self.strides, shape[lead:], strict=True):
            strides.append(0 if (d_src == 1 and d_dst != 1) else s)
        return Access(self.buf, shape, tuple(strides), self.offset, self.scalar)

    def transpose(self, axes) -> Access:
        axes = (
            tuple(range(len(self.shape)))[::-1]
            if axes is None
            else tuple(a % max(len(self.shape), 1) for a in axes)
        )
        return Access(
            self.buf,
            tuple(self.shape[a] for a in axes),
            tuple(self.strides[a] for a in axes),
            self.offset,
            self.scalar,
        )

    def reshape(self, shape: tuple) -> Access | None:
        """The access for a reshape, or None when it would need a copy."""
        shape = tuple(shape)
        if self.scalar is not None:
            return Access(self.buf, shape, (0,) * len(shape), 0, self.scalar)
        if self.contiguous:
            return Access(self.buf, shape, c_strides(shape), self.offset)
        # Only size-1 dims added or removed: keep the other strides in order.
        src = [(d, s) for d, s in zip(self.shape, self.strides, strict=True) if d != 1]
        if [d for d, _ in src] == [d for d in shape if d != 1]:
            it = iter(s for _, s in src)
            return Access(
                self.buf, shape, tuple(0 if d == 1 else next(it) for d in shape), self.offset
            )
        return None

    def index_expr(self, loop_strides: tuple, loop_vars: tuple) -> str:
        """`buf[...]` for loop variables whose strides over this array are given."""
        if self.scalar is not None:
            return self.scalar
        terms = [str(self.offset)] if self.offset else []
        for var, s in zip(loop_vars, loop_strides, strict=True):
            if s == 1:
                terms.append(var)
            elif s != 0:
                terms.append(f"{var} * {s}")
        return f"{self.buf}[{' + '.join(terms) or '0'}]"


def size_of(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))
