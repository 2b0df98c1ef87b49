"""Code for the structured primitives: matmul, views, axis-wise ops, indexing.

`STRUCTURED` maps a primitive's codegen template name (or its op name) to an
emitter `fn(em, node)`. Each one reads operands through `em.acc`/`em.array`,
allocates its output with `em.alloc` and records it with `em.set_materialized`.
A primitive missing here is run by its NumPy impl from the Python driver.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tracegrad.codegen.access import Access, c_strides, size_of
from tracegrad.codegen.emit import Emitter, NoCodegen, literal, np_dtype_name
from tracegrad.ir.graph import Node

STRUCTURED: dict[str, Callable[[Emitter, Node], None]] = {}


def structured(*names):
    def register(fn):
        for n in names:
            STRUCTURED[n] = fn
        return fn
    return register


def emitter_for(node: Node):
    from tracegrad.ops.core import REGISTRY
    prim = REGISTRY.get(node.op)
    cg = prim.codegen if prim is not None else None
    if isinstance(cg, str) and cg in STRUCTURED:
        return STRUCTURED[cg]
    return STRUCTURED.get(node.op)


# ------------------------------------------------------------------- matmul

def _matrix_operand(em: Emitter, node: Node, a: Access, rows: int, cols: int):
    """(trans flag, leading dim) for a (rows, cols) matrix access, or None if it
    is neither row-major nor column-major contiguous."""
    rs, cs = a.strides[-2], a.strides[-1]
    if (cs == 1 or cols == 1) and (rs == cols or rows == 1):
        return 0, max(cols, 1)
    if (rs == 1 or rows == 1) and (cs == rows or cols == 1):
        return 1, max(rows, 1)
    return None


def _as_matrix(a: Access, ndim: int, first: bool) -> Access:
    """1-D operands as matrices: x (k,) -> (1, k); y (k,) -> (k, 1)."""
    if ndim != 1:
        return a
    if first:
        return Access(a.buf, (1,) + a.shape, (0,) + a.strides, a.offset, a.scalar)
    return Access(a.buf, a.shape + (1,), a.strides + (0,), a.offset, a.scalar)


@structured("matmul")
def emit_matmul(em: Emitter, node: Node) -> None:
    x, y = node.inputs
    if not (np.dtype(node.dtype) in (np.float32, np.float64)
            and x.dtype == node.dtype and y.dtype == node.dtype):
        raise NoCodegen("matmul: BLAS needs float32/float64 operands of one dtype")
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    k = x.shape[-1]
    if k == 0:
        em.loop_fill(out, node.size, literal(0, node.dtype))
        return
    ops = []
    for operand, first in ((x, True), (y, False)):
        a = _as_matrix(em.acc(operand), operand.ndim, first)
        rows, cols = a.shape[-2], a.shape[-1]
        if a.scalar is not None or _matrix_operand(em, operand, a, rows, cols) is None:
            em.copy_to_buffer(operand)
            a = _as_matrix(em.acc(operand), operand.ndim, first)
        ops.append(a)
    ax, ay = ops
    m, n = ax.shape[-2], ay.shape[-1]
    batch = tuple(node.shape[:len(node.shape) - (x.ndim >= 2) - (y.ndim >= 2)])
    bx = ax.broadcast(batch + ax.shape[-2:])
    by = ay.broadcast(batch + ay.shape[-2:])
    tx, ldx = _matrix_operand(em, x, bx, m, k)
    ty, ldy = _matrix_operand(em, y, by, k, n)
    nb = len(batch)
    vars_ = tuple(f"b{i}" for i in range(nb))
    for i, d in enumerate(batch):
        em.emit(f"for b{i} in range({d}):")
        em.indent += 1
    out_batch = c_strides(batch + (m * n,))[:nb] if nb else ()

    def offset(a: Access, strides) -> str:
        idx = Access("", (), (), a.offset).index_expr(strides, vars_)
        return idx[1:-1]

    em.emit(f"tg_gemm({tx}, {ty}, {m}, {n}, {k}, {bx.buf}, {offset(bx, bx.strides[:nb])}, {ldx}, "
            f"{by.buf}, {offset(by, by.strides[:nb])}, {ldy}, 0.0, "
            f"{out.buf}, {offset(out, out_batch)}, {max(n, 1)})")
    em.indent -= nb
    em.uses_gemm = True
