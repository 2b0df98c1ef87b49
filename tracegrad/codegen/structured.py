"""Code for the structured primitives: matmul, views, axis-wise ops, indexing.

`STRUCTURED` maps a primitive's codegen template name (or its op name) to an
emitter `fn(em, node)`. Each one reads operands through `em.acc`/`em.array`,
allocates its output with `em.alloc` and records it with `em.set_materialized`.
A primitive missing here is run by its NumPy impl from the Python driver.
"""

from __future__ import annotations

import numpy as np

from tracegrad.codegen.access import Access, c_strides, size_of
from tracegrad.codegen.emit import (
    STRUCTURED,
    Emitter,
    NoCodegen,
    literal,
    structured,
)
from tracegrad.ir.graph import Node
from tracegrad.ops.blas_threads import BLAS_THREADED_MNK


def emitter_for(node: Node):
    from tracegrad.ops.core import REGISTRY

    prim = REGISTRY.get(node.op)
    cg = prim.codegen if prim is not None else None
    if isinstance(cg, str) and cg in STRUCTURED:
        return STRUCTURED[cg]
    return STRUCTURED.get(node.op)


# ------------------------------------------------------------------- matmul


def _matrix_operand(em: Emitter, node: Node, a: Access, rows: int, cols: int):
    """(trans flag, leading dim) for a (rows, cols) matrix access, or None if it is
    neither row-major nor column-major with unit stride along its rows or columns.
    The leading dimension may exceed the matrix (a head of a (t, heads*d) array is
    rows of d with leading dimension heads*d): BLAS reads it in place, no copy."""
    rs, cs = a.strides[-2], a.strides[-1]
    if (cs == 1 or cols == 1) and (rows == 1 or rs >= max(cols, 1)):
        return 0, max(cols, rs if rows > 1 else 1, 1)
    if (rs == 1 or rows == 1) and (cols == 1 or cs >= max(rows, 1)):
        return 1, max(rows, cs if cols > 1 else 1, 1)
    return None


def _as_matrix(a: Access, ndim: int, first: bool) -> Access:
    """1-D operands as matrices: x (k,) -> (1, k); y (k,) -> (k, 1)."""
    if ndim != 1:
        return a
    if first:
        return Access(a.buf, (1,) + a.shape, (0,) + a.strides, a.offset, a.scalar)
    return Access(a.buf, a.shape + (1,), a.strides + (0,), a.offset, a.scalar)


def _check_blas_dtypes(node: Node, operands) -> None:
    if not (
        np.dtype(node.dtype) in (np.float32, np.float64)
        and all(o.dtype == node.dtype for o in operands)
    ):
        raise NoCodegen(f"{node.op}: BLAS needs float32/float64 operands of one dtype")


@structured("matmul")
def emit_matmul(em: Emitter, node: Node) -> None:
    x, y = node.inputs
    _check_blas_dtypes(node, (x, y))
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    if x.shape[-1] == 0:
        em.loop_fill(out, node.size, literal(0, node.dtype))
        return
    layout = _layout_for_transpose(em, node, out)
    if layout is not None:
        out = em.access[node.id] = layout
    _emit_gemm(em, node, x, y, out, beta="0.0")


def _layout_for_transpose(em: Emitter, node: Node, out: Access) -> Access | None:
    """A batched product read only through a transpose that keeps each matrix's rows
    (attention's (batch, head, t, d) -> (batch, t, head, d) before the heads merge):
    the GEMMs write straight into the transposed order, so the transpose is C-ordered
    and the reshape after it needs no copy. The region is the same size; only the
    order of the elements in it changes."""
    users = em.users.get(node.id, [])
    if (
        node.ndim < 3
        or min(i.ndim for i in node.inputs) < 2
        or node.id in em.output_ids
        or node.id in em.reshaped_outputs
        or len(users) != 1
        or users[0].op != "transpose"
        or out.strides != c_strides(tuple(node.shape))
    ):
        return None
    axes = tuple(a % node.ndim for a in users[0].attrs.get("axes") or ())
    if len(axes) != node.ndim or axes[-1] != node.ndim - 1:
        return None  # (each matrix must keep unit stride along its rows)
    if axes == tuple(range(node.ndim)):
        return None
    transposed = c_strides(tuple(node.shape[a] for a in axes))
    strides = [0] * node.ndim
    for i, a in enumerate(axes):
        strides[a] = transposed[i]
    return Access(out.buf, out.shape, tuple(strides), out.offset)


@structured("addmm")
def emit_addmm(em: Emitter, node: Node) -> None:
    """bias + mat1 @ mat2: the output starts as the broadcast bias, then GEMM adds to it."""
    bias, x, y = node.inputs
    _check_blas_dtypes(node, (bias, x, y))
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    m, n = node.shape
    b = em.acc(bias).broadcast((m, n))
    i, j = em.fresh("i"), em.fresh("j")
    em.emit(f"for {i} in range({m}):")
    em.indent += 1
    em.emit(f"for {j} in range({n}):")
    em.indent += 1
    em.emit(f"{out.index_expr((n, 1), (i, j))} = {b.index_expr(b.strides, (i, j))}")
    em.indent -= 2
    if x.shape[-1] != 0:
        _emit_gemm(em, node, x, y, out, beta="1.0")


def _emit_gemm(em: Emitter, node: Node, x: Node, y: Node, out: Access, beta: str) -> None:
    """out = x @ y + beta * out through BLAS, batched over leading axes."""
    k = x.shape[-1]
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
    batch = tuple(node.shape[: len(node.shape) - (x.ndim >= 2) - (y.ndim >= 2)])
    bx = ax.broadcast(batch + ax.shape[-2:])
    by = ay.broadcast(batch + ay.shape[-2:])
    tx, ldx = _matrix_operand(em, x, bx, m, k)
    ty, ldy = _matrix_operand(em, y, by, k, n)
    nb = len(batch)
    # a small A @ B.T: one operand copied transposed first (nt_relayout_choice)
    nt_copy = (tx, ty) == (0, 1) and small_nt_is_slow()
    choice = nt_relayout_choice(m, n, k) if nt_copy else None
    if out.strides == c_strides(out.shape) and _stacked_rows(bx, by, batch, m, ldx, tx):
        # the batch's rows of x lie one after another, as the output's do, and y is
        # shared: one GEMM with M = batch * m instead of a call per batch element
        rows = m * int(np.prod(batch))
        stacked = nt_relayout_choice(rows, n, k) if nt_copy else None
        if stacked != "a":  # (copying x transposed would need the batch loop back)
            m, batch, nb, choice, by = rows, (), 0, stacked, ay
    vars_ = tuple(f"b{i}" for i in range(nb))
    scratch = None
    if choice is not None:
        scratch = _scratch(em, node.dtype, m * k if choice == "a" else k * n)
    copied = bx if choice == "a" else by
    # an operand shared by the whole batch is copied once, before the batch loop
    hoisted = choice is not None and not any(copied.strides[:nb])
    if hoisted:
        copied = _copy_transposed(em, copied, choice, scratch, nb, ())
    for i, d in enumerate(batch):
        em.emit(f"for b{i} in range({d}):")
        em.indent += 1
    if choice is not None and not hoisted:
        copied = _copy_transposed(em, copied, choice, scratch, nb, vars_)
    if choice == "a":
        bx, tx, ldx = copied, 1, m
    elif choice == "b":
        by, ty, ldy = copied, 0, n
    out_batch = out.strides[:nb] if nb else ()
    # C-ordered unless _layout_for_transpose chose the transposed order (rows then
    # lie `ldc` apart)
    ldc = n if out.strides == c_strides(out.shape) else out.strides[-2]

    def offset(a: Access, strides) -> str:
        idx = Access("", (), (), a.offset).index_expr(strides, vars_)
        return idx[1:-1]

    em.emit(
        f"tg_gemm({tx}, {ty}, {m}, {n}, {k}, {bx.buf}, {offset(bx, bx.strides[:nb])}, {ldx}, "
        f"{by.buf}, {offset(by, by.strides[:nb])}, {ldy}, {beta}, "
        f"{out.buf}, {offset(out, out_batch)}, {max(ldc, n, 1)})"
    )
    em.indent -= nb
    if scratch is not None:
        _release(em, scratch)
    em.uses_gemm = True
    if m * n * k >= BLAS_THREADED_MNK:
        em.threaded_gemm = True


def _stacked_rows(bx: Access, by: Access, batch: tuple, m: int, ldx: int, tx: int) -> bool:
    """x's batch elements are untransposed row blocks that follow one another (batch
    strides of a C-contiguous (batch, m * ldx) array) and y is the same for all."""
    nb = len(batch)
    return (
        nb > 0
        and tx == 0
        and not any(by.strides[:nb])
        and tuple(bx.strides[:nb]) == tuple(c_strides(batch + (m * ldx,))[:nb])
    )


# OpenBLAS splits a GEMM over its threads from BLAS_THREADED_MNK (ops/blas_threads.py)
# on; below that it runs on the calling thread. Its workers then spin for a long while
# (~0.1 s) before they sleep. A kernel that calls such a GEMM gets no prange variant (generate.py): Numba's OpenMP workers
# and OpenBLAS's would share the cores, each spinning while the other works.
# mlp_mnist_b4096 float32, BLAS on 2 threads, process under SCHED_FIFO (an idle
# machine for it): 42.8 ms a call serial, 91.6 ms with the prange variant
# (perf/gemm_profile.md, "Two thread pools").


# OpenBLAS's small-matrix path (M*N*K up to ~1e6; SKYLAKEX kernels, as NumPy ships
# them) is up to 2-5x slower for C = A @ B.T (both operands with K contiguous:
# every backward-data GEMM g @ W.T, attention's q @ k.T) than for the other
# layouts, in float32 and float64. Measured on this machine, single thread (us):
#   (m, n, k)        A @ B.T   A.T copied, then TT   B.T copied, then NN
#   (32, 64, 256)     23-25          14                   ~16
#   (8, 256, 64)       12.9           5.5                  ~4
#   (128, 256, 10)     12.3-13.4     13.0 (TT slow too)     8.1
#   (64, 32, 256)      16.8          23.0                  ~13
# So in that regime a transposed copy of one operand (a loop, ~0.3-0.8 ns per
# element) pays: A's, when A is a few rows against a wider B; B's, when B is the
# smaller one. Bigger products use the general kernels, where NT costs <= 15%.
NT_RELAYOUT_MAX_MNK = 600_000
NT_RELAYOUT_MIN_MN = 2048
NT_RELAYOUT_MIN_K = 16
NT_SMALL_B = 4096  # elements of B worth copying whatever A's size
# A short k (a classifier head's W.T, k = n_classes) with a small B pays further:
# (128, 256, 10) 12.3 -> 8.1 us, (128, 512, 10) 33 -> 18 us in float32, 0.7-0.95x
# the time in float64; at (4096, 256, 10) NT and NN take the same time.
SHORT_K = (8, 16)  # k in [8, 16)
SHORT_K_MAX_B = 8192
SHORT_K_MAX_MNK = 1_500_000


# Those measurements are of OpenBLAS's SkylakeX kernel set, the only x86 one with the
# small-matrix path. With the Haswell set (AVX2 machines, AMD's Zen included) A @ B.T
# takes the time A @ B does ((64, 64, 16) float32: 2.56 vs 2.47 us; (32, 64, 256)
# 10.4 vs 11.2 us), so a copy only adds its time: attention_4h_t64 float32's 64 copies
# cost 8% of its kernel on an AMD EPYC.
SMALL_MATRIX_CORES = ("skylakex", "cooperlake", "sapphirerapids")
_small_nt_slow: list[bool] = []


def small_nt_is_slow() -> bool:
    """Whether the loaded OpenBLAS runs small A @ B.T products on its slow small-matrix
    path (its SkylakeX kernels); True when it cannot say (the measured default)."""
    if not _small_nt_slow:
        from tracegrad.ops.blas_threads import core_names

        names = [n.lower() for n in core_names()]
        _small_nt_slow.append(not names or any(n.startswith(SMALL_MATRIX_CORES) for n in names))
    return _small_nt_slow[0]


def nt_relayout_choice(m: int, n: int, k: int) -> str | None:
    """Which operand of an (m, k) @ (n, k).T product to copy transposed: "a"
    (then BLAS's TT kernel), "b" (then NN), or None (call it as it is).

        >>> nt_relayout_choice(32, 64, 256), nt_relayout_choice(128, 16, 256)
        ('a', 'b')
        >>> nt_relayout_choice(128, 256, 10), nt_relayout_choice(4096, 256, 10)
        ('b', None)
        >>> nt_relayout_choice(4096, 256, 256), nt_relayout_choice(32, 32, 256)
        (None, None)
    """
    if m * n < NT_RELAYOUT_MIN_MN:
        return None
    mnk = m * n * k
    if k >= NT_RELAYOUT_MIN_K:
        if mnk > NT_RELAYOUT_MAX_MNK:
            return None
        if m <= 32 and n >= 2 * m:
            return "a"
        if n <= m or n * k <= NT_SMALL_B:
            return "b"
        return None
    if SHORT_K[0] <= k and n * k <= SHORT_K_MAX_B and mnk <= SHORT_K_MAX_MNK:
        return "b"
    return None


def _scratch(em: Emitter, dtype, size: int) -> tuple[str, int, int]:
    """A workspace region for a temporary no node owns, (buffer, offset, size);
    give it back with `_release` (recorded like any value's, so planning sees it)."""
    ws = em.workspace(dtype)
    offset = em.workspaces[ws].take(size)
    em.region_events.append(("take", ws, offset, size))
    em.live_bytes += size * np.dtype(dtype).itemsize
    em.peak_live_bytes = max(em.peak_live_bytes, em.live_bytes)
    return ws, offset, size


def _release(em: Emitter, region: tuple[str, int, int]) -> None:
    ws, offset, size = region
    em.workspaces[ws].give_back(offset, size)
    em.region_events.append(("give_back", ws, offset, size))
    em.live_bytes -= size * em.workspaces[ws].dtype.itemsize


def _copy_transposed(em: Emitter, src: Access, choice: str, region, nb: int, vars_) -> Access:
    """Copy A (choice "a", read (m, k): stored as A.T, (k, m) row-major) or B (choice
    "b", read (k, n): stored (k, n) row-major) of one product into `region`; the
    returned access reads the copy (the same for every batch element). `vars_` are
    the batch loop variables around the copy (none when it is hoisted out)."""
    ws, offset, _ = region
    rows, cols = src.shape[nb:]
    dst_rows, dst_cols = (cols, rows) if choice == "a" else (rows, cols)
    em.emit(
        f"# {'A' if choice == 'a' else 'B'} copied transposed: BLAS's small-matrix "
        "A @ B.T kernel is slow (structured.nt_relayout_choice)"
    )
    if vars_:
        # inside the batch loop: one call per batch element to a shared, run-time-sized
        # copy function. Inlined, LLVM unrolled and vectorized each site's constant-size
        # strided loop: 3x the compile time of a 4-head attention kernel, for a copy.
        inner = src.strides[nb:]
        row_stride, col_stride = (inner[1], inner[0]) if choice == "a" else inner
        batch_offset = Access("", (), (), src.offset).index_expr(src.strides[:nb], vars_)
        em.emit(
            f"{_relayout_function(em, ws, src.buf)}({ws}, np.int64({offset}), {src.buf}, "
            f"np.int64({batch_offset[1:-1]}), np.int64({dst_rows}), np.int64({dst_cols}), "
            f"np.int64({row_stride}), np.int64({col_stride}))"
        )
        return Access(ws, src.shape[:nb] + (dst_rows, dst_cols), (0,) * nb + (dst_cols, 1), offset)
    r, c = "tr", "tc"  # the same names at every site, so equal copies outline to one function
    start = len(em.lines)
    em.emit(f"for {r} in range({dst_rows}):")
    em.emit(f"    for {c} in range({dst_cols}):")
    # dst[r, c] is src[c, r] for "a" (A.T), src[r, c] for "b" (B as (k, n))
    inner = (c, r) if choice == "a" else (r, c)
    strides = src.strides if vars_ else src.strides[nb:]
    read = src.index_expr(strides, tuple(vars_) + inner)
    em.emit(f"        {ws}[{offset} + {r} * {dst_cols} + {c}] = {read}")
    if not vars_:
        # one call to a shared copy function, like a fused loop: a deep net's
        # repeated backward layers stay a run of calls that `reroll` folds
        em.outline(start, "relayout")
    return Access(ws, src.shape[:nb] + (dst_rows, dst_cols), (0,) * nb + (dst_cols, 1), offset)


def _relayout_function(em: Emitter, dst: str, src: str) -> str:
    """The module's shared strided copy from `src`'s array type into `dst`'s:
    dst[d + r * cols + c] = src[s + r * rs + c * cs], sizes and strides at run time."""
    dst_type, src_type = em.array_type(dst), em.array_type(src)
    # one per pair of array types, which the dtypes name (as the emitter's _poisoner does)
    fn = f"{em.name}_relayout_{em.array_dtype(dst)}_{em.array_dtype(src)}"
    if fn in em.outlined_src:
        return fn
    em.outlined_src[fn] = (
        f"@njit(({dst_type}, types.int64, {src_type}, types.int64, types.int64, types.int64, "
        "types.int64, types.int64), fastmath=_FASTMATH, error_model='numpy', cache=True, "
        "nogil=True, no_cpython_wrapper=True)\n"
        f"def {fn}(dst, d, src, s, rows, cols, rs, cs):\n"
        "    for r in range(rows):\n"
        "        for c in range(cols):\n"
        "            dst[d + r * cols + c] = src[s + r * rs + c * cs]"
        f"\n\n\ntg_noinline({fn})"
    )
    return fn


# --------------------------------------------------------- axis-wise helpers


def _axes(node: Node, nd: int, attr="axis") -> tuple:
    axis = node.attrs.get(attr)
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(a) % max(nd, 1) for a in axes))


def _split(shape: tuple, axes: tuple) -> tuple[int, int, int]:
    """(outer, n, inner) for reducing a contiguous block of axes, else NoCodegen."""
    if not axes:
        return size_of(shape), 1, 1
    if list(axes) != list(range(axes[0], axes[-1] + 1)):
        raise NoCodegen("axes are not one contiguous block")
    return (
        size_of(shape[: axes[0]]),
        size_of(shape[axes[0] : axes[-1] + 1]),
        size_of(shape[axes[-1] + 1 :]),
    )


def _math(em: Emitter, name: str, dtype) -> str:
    """The dtype-specific mathlib helper name (and remember it is used)."""
    from tracegrad.codegen.emit import dshort
    from tracegrad.runtime import mathlib

    expr = mathlib.specialize(f"{name}(", dshort(dtype))
    return expr[:-1]


def _acc_dtype(dtype) -> str:
    return "np.float64" if np.dtype(dtype) == np.float32 else f"np.{np.dtype(dtype).name}"


# A float32 row of up to this many exponentials is summed in float32: with fastmath's
# reassociation LLVM keeps 8-16 partial sums in a vector, and each of the row's values
# is in (0, 1], so the sum's relative error stays below ~1e-5. Converting to float64
# halves the vector width: attention's softmax over (8, 4, 64, 64) took 284 us with a
# float64 total and a NaN-propagating peak, 143 us with both changes (PyTorch and XLA
# sum float32 softmax rows in float32 too).
SHORT_ROW = 1024


def _row_acc_dtype(dtype, n: int) -> str:
    return f"np.{np.dtype(dtype).name}" if n <= SHORT_ROW else _acc_dtype(dtype)


def _emit_row_peak(em: Emitter, src: Access, n: int, inner: int) -> None:
    """`peak` = the row's largest value. It skips NaN, so the loop vectorizes; a NaN in
    the row still makes the row's total (and so every output) NaN, as NumPy's does."""
    _open(em, "j", n)
    em.emit(f"peak = max(peak, {_at(src, f'base + j * {inner}')})")
    em.indent -= 1


def _at(a: Access, expr: str) -> str:
    return f"{a.buf}[{a.offset} + {expr}]" if a.offset else f"{a.buf}[{expr}]"


def _open(em: Emitter, var: str, n: int) -> None:
    em.emit(f"for {var} in range({n}):")
    em.indent += 1


def _where_from(node: Node) -> str:
    return f" (at {node.source})" if node.source else ""


@structured("softmax", "log_softmax")
def emit_softmax(em: Emitter, node: Node) -> None:
    x = node.inputs[0]
    axes = _axes(node, x.ndim)
    outer, n, inner = _split(tuple(x.shape), axes)
    src = em.contiguous(x)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    exp, log = _math(em, "tg_exp", node.dtype), _math(em, "tg_log", node.dtype)
    dt = f"np.{np.dtype(node.dtype).name}"
    if inner == 1 and n < SHORT_ROW_VECTOR:
        _emit_short_rows(em, node, src, out, outer, n, exp, log, dt)
        return
    _open(em, "o", outer)
    _open(em, "i", inner)
    em.emit(f"base = o * {n * inner} + i")
    em.emit(f"peak = {literal(-np.inf, node.dtype)}")
    _emit_row_peak(em, src, n, inner)
    em.emit(f"total = {_row_acc_dtype(node.dtype, n)}(0.0)")
    _open(em, "j", n)
    em.emit(f"e = {exp}({dt}({_at(src, f'base + j * {inner}')} - peak))")
    em.emit("total += e")
    if node.op == "softmax":
        em.emit(f"{_at(out, f'base + j * {inner}')} = e")
    em.indent -= 1
    if node.op == "softmax":
        em.emit(f"inv = {dt}(1.0 / total)")
        _open(em, "j", n)
        em.emit(f"{_at(out, f'base + j * {inner}')} *= inv")
    else:
        em.emit(f"shift = peak + {dt}({log}({dt}(total)))")
        _open(em, "j", n)
        em.emit(f"{_at(out, f'base + j * {inner}')} = {_at(src, f'base + j * {inner}')} - shift")
    em.indent -= 3


# Rows shorter than this leave a row loop's exponentials mostly in its scalar
# remainder: they are computed in one flat loop over every row instead, which
# vectorizes (softmax_reg_n256's log_softmax over (256, 10) float64: 20 -> 11.5 us).
SHORT_ROW_VECTOR = 16


def _emit_short_rows(em: Emitter, node: Node, src, out, outer: int, n: int, exp, log, dt):
    """softmax / log_softmax over short last-axis rows: shift each row by its peak,
    exponentiate every value in one flat loop, then normalize row by row."""
    size = outer * n
    em.emit(f"for o in range({outer}):")
    em.emit(f"    base = o * {n}")
    em.emit(f"    peak = {literal(-np.inf, node.dtype)}")
    em.indent += 1
    _emit_row_peak(em, src, n, 1)
    em.emit(f"for j in range({n}):")
    em.emit(f"    {_at(out, 'base + j')} = {_at(src, 'base + j')} - peak")
    em.indent -= 1
    # softmax exponentiates in place; log_softmax keeps the shifted values
    exps = out if node.op == "softmax" else None
    scratch = None
    if exps is None:
        scratch = _scratch(em, node.dtype, size)
        exps = Access(scratch[0], (size,), (1,), scratch[1])
    em.emit(f"for q in range({size}):")
    em.emit(f"    {_at(exps, 'q')} = {exp}({_at(out, 'q')})")
    em.emit(f"for o in range({outer}):")
    em.emit(f"    base = o * {n}")
    em.emit(f"    total = {_row_acc_dtype(node.dtype, n)}(0.0)")
    em.emit(f"    for j in range({n}):")
    em.emit(f"        total += {_at(exps, 'base + j')}")
    if node.op == "softmax":
        em.emit(f"    inv = {dt}(1.0 / total)")
        em.emit(f"    for j in range({n}):")
        em.emit(f"        {_at(out, 'base + j')} *= inv")
    else:
        em.emit(f"    shift = {dt}({log}({dt}(total)))")
        em.emit(f"    for j in range({n}):")
        em.emit(f"        {_at(out, 'base + j')} -= shift")
    if scratch is not None:
        _release(em, scratch)


def _reduction_prologue(em: Emitter, node: Node, x: Node):
    """Split x's shape around the reduced axes, and allocate the node's output."""
    outer, n, inner = _split(tuple(x.shape), _axes(node, x.ndim))
    src = em.contiguous(x)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    return outer, n, inner, src, out


@structured("reduce_logsumexp", "logsumexp")
def emit_logsumexp(em: Emitter, node: Node) -> None:
    x = node.inputs[0]
    outer, n, inner, src, out = _reduction_prologue(em, node, x)
    exp, log = _math(em, "tg_exp", node.dtype), _math(em, "tg_log", node.dtype)
    dt = f"np.{np.dtype(node.dtype).name}"
    _open(em, "o", outer)
    _open(em, "i", inner)
    em.emit(f"base = o * {n * inner} + i")
    em.emit(f"peak = {literal(-np.inf, node.dtype)}")
    _emit_row_peak(em, src, n, inner)
    em.emit(f"if not (abs(peak) < {literal(np.inf, node.dtype)}):")
    em.emit(f"    peak = {literal(0, node.dtype)}  # all -inf (or inf/nan): shift by 0")
    em.emit(f"total = {_row_acc_dtype(node.dtype, n)}(0.0)")
    _open(em, "j", n)
    em.emit(f"total += {exp}({dt}({_at(src, f'base + j * {inner}')} - peak))")
    em.indent -= 1
    em.emit(f"{_at(out, f'o * {inner} + i')} = {dt}({log}({dt}(total))) + peak")
    em.indent -= 2


@structured("reduce_argmax", "reduce_argmin", "argmax", "argmin")
def emit_argextremum(em: Emitter, node: Node) -> None:
    x = node.inputs[0]
    if x.size == 0:
        raise NoCodegen("empty argmax")
    outer, n, inner, src, out = _reduction_prologue(em, node, x)
    cmp = ">" if node.op in ("argmax",) or "argmax" in str(node.op) else "<"
    _open(em, "o", outer)
    _open(em, "i", inner)
    em.emit(f"base = o * {n * inner} + i")
    em.emit(f"best = {_at(src, 'base')}")
    em.emit("where = 0")
    _open(em, "j", n)
    em.emit(f"v = {_at(src, f'base + j * {inner}')}")
    em.emit(f"if best == best and ((v {cmp} best) or v != v):  # the first NaN wins, as in NumPy")
    em.emit("    best = v")
    em.emit("    where = j")
    em.indent -= 1
    em.emit(f"{_at(out, f'o * {inner} + i')} = where")
    em.indent -= 2


@structured("reduce_var", "var")
def emit_var(em: Emitter, node: Node) -> None:
    x = node.inputs[0]
    outer, n, inner, src, out = _reduction_prologue(em, node, x)
    ddof = int(node.attrs.get("ddof", 0) or 0)
    denom = n - ddof
    scale = "np.nan" if denom <= 0 else repr(1.0 / denom)
    acc = "np.float64" if np.dtype(x.dtype) in (np.float32, np.float64) else "np.float64"
    _open(em, "o", outer)
    _open(em, "i", inner)
    em.emit(f"base = o * {n * inner} + i")
    em.emit(f"total = {acc}(0.0)")
    _open(em, "j", n)
    em.emit(f"total += {_at(src, f'base + j * {inner}')}")
    em.indent -= 1
    em.emit(f"mu = total / {max(n, 1)}" if n else "mu = np.nan")
    em.emit(f"sq = {acc}(0.0)")
    _open(em, "j", n)
    em.emit(f"d = {_at(src, f'base + j * {inner}')} - mu")
    em.emit("sq += d * d")
    em.indent -= 1
    em.emit(f"{_at(out, f'o * {inner} + i')} = sq * {scale}")
    em.indent -= 2


# ------------------------------------------------------------ gather/scatter


def _nested(em: Emitter, shape: tuple) -> tuple:
    vars_ = tuple(f"i{k}" for k in range(len(shape)))
    for v, d in zip(vars_, shape, strict=True):
        _open(em, v, d)
    return vars_


def _bounds_check(em: Emitter, node: Node, var: str, n: int) -> None:
    em.emit(f"if {var} < 0:")
    em.emit(f"    {var} += {n}")
    em.emit(f"if {var} < 0 or {var} >= {n}:")
    em.emit(
        f"    raise IndexError({(f'{node.op}: index out of range for an axis of size {n}' + _where_from(node))!r})"
    )


@structured("nll_loss")
def emit_nll_loss(em: Emitter, node: Node) -> None:
    logp, target = node.inputs
    n, c = logp.shape
    la, ta = em.acc(logp), em.acc(target)
    reduction = node.attrs["reduction"]
    dt = f"np.{np.dtype(node.dtype).name}"
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if reduction != "none":
        em.emit(f"total = {_acc_dtype(node.dtype)}(0.0)")
    _open(em, "r", n)
    em.emit(f"k = {ta.index_expr(ta.strides, ('r',))}")
    _bounds_check(em, node, "k", c)
    picked = la.index_expr(la.strides, ("r", "k"))
    if reduction == "none":
        em.emit(f"{out.index_expr(out.strides, ('r',))} = -{picked}")
    else:
        em.emit(f"total += {picked}")
    em.indent -= 1
    if reduction != "none":
        mean = f" / {n}" if reduction == "mean" else ""
        em.emit(f"{_at(out, '0')} = {dt}(-total{mean})")


@structured("take_along_axis")
def emit_take_along_axis(em: Emitter, node: Node) -> None:
    x, idx = node.inputs
    ax = int(node.attrs["axis"]) % node.ndim
    shape = tuple(node.shape)
    n = x.shape[ax]
    x_shape = shape[:ax] + (n,) + shape[ax + 1 :]
    xa = em.acc(x).broadcast(x_shape)
    ia = em.acc(idx).broadcast(shape)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    vars_ = _nested(em, shape)
    em.emit(f"k = {ia.index_expr(ia.strides, vars_)}")
    _bounds_check(em, node, "k", n)
    em.emit(f"{out.index_expr(out.strides, vars_)} = {_at_k_along(xa, ax, vars_)}")
    em.indent -= len(shape)


def _at_k_along(acc, ax: int, vars_) -> str:
    """`acc` indexed by the loop variables, except position `k` along `ax`."""
    strides = list(acc.strides)
    idx = acc.index_expr(tuple(0 if d == ax else st for d, st in enumerate(strides)), vars_)
    return idx[:-1] + (f" + k * {strides[ax]}" if strides[ax] else "") + "]"


@structured("put_along_axis_add")
def emit_put_along_axis_add(em: Emitter, node: Node) -> None:
    g, idx = node.inputs
    ax = int(node.attrs["axis"]) % node.ndim
    n = node.shape[ax]
    gshape = tuple(g.shape)
    ga = em.acc(g).broadcast(gshape)
    ia = em.acc(idx).broadcast(gshape)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    em.loop_fill(out, node.size, literal(0, node.dtype))
    if g.size == 0:
        return
    vars_ = _nested(em, gshape)
    em.emit(f"k = {ia.index_expr(ia.strides, vars_)}")
    _bounds_check(em, node, "k", n)
    em.emit(f"{_at_k_along(out, ax, vars_)} += {ga.index_expr(ga.strides, vars_)}")
    em.indent -= len(gshape)


@structured("concatenate")
def emit_concatenate(em: Emitter, node: Node) -> None:
    ax = int(node.attrs["axis"]) % node.ndim
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    start = 0
    for x in node.inputs:
        src = em.acc(x)
        dst = Access(out.buf, tuple(x.shape), out.strides, out.offset + start * out.strides[ax])
        start += x.shape[ax]
        if x.size == 0:
            continue
        from tracegrad.codegen.plan import coalesce

        dims, (ss, ds) = coalesce(list(x.shape), [src.strides, dst.strides])
        vars_ = _nested(em, tuple(dims))
        em.emit(f"{dst.index_expr(ds, vars_)} = {src.index_expr(ss, vars_)}")
        em.indent -= len(dims)


def basic_index_view(a: Access, spec) -> Access:
    """The access of x[spec] for basic indexing (ints, slices, None)."""
    shape, strides, offset, dim = [], [], a.offset, 0
    for e in spec:
        if e is None:
            shape.append(1)
            strides.append(0)
            continue
        s = a.strides[dim]
        if isinstance(e, (int, np.integer)):
            offset += int(e) * s
        else:
            _, start, stop, step = e
            length = len(range(start, -1 if stop is None else stop, step))
            if length > 0:
                offset += start * s
            shape.append(length)
            strides.append(s * step)
        dim += 1
    return Access(a.buf, tuple(shape), tuple(strides), offset, a.scalar)


def _advanced_index(em: Emitter, node: Node, base: Access, spec, index_nodes, shape):
    """Loop over the result of an advanced (array) index and yield, inside the
    innermost loop, (flat index into `base`, loop variables). NumPy's rules:
    ints count as advanced indices; the broadcast block of index arrays goes
    where the first advanced index stands if they are adjacent, else in front."""
    basic, advanced, positions, dim = [], [], [], 0
    block_at = None
    for pos, e in enumerate(spec):
        if e is None:
            basic.append(None)
            continue
        d, dim = dim, dim + 1
        if isinstance(e, (int, np.integer)) or e[0] == "array":
            advanced.append((d, e))
            positions.append(pos)
            if block_at is None:
                block_at = len(basic)
        else:
            basic.append((d, e[1], e[3]))
    if positions != list(range(positions[0], positions[-1] + 1)):
        block_at = 0
    arrays = [(d, index_nodes[e[1]]) for d, e in advanced if not isinstance(e, (int, np.integer))]
    block = tuple(np.broadcast_shapes(*[a.shape for _, a in arrays]))
    nb = len(block)
    vars_ = _nested(em, tuple(shape))
    block_vars = vars_[block_at : block_at + nb]
    basic_vars = vars_[:block_at] + vars_[block_at + nb :]
    terms = [str(base.offset)] if base.offset else []
    for var, b in zip(basic_vars, basic, strict=True):
        if b is None:
            continue
        d, start, step = b
        stride = base.strides[d]
        if stride:
            terms.append(
                f"({start} + {var} * {step}) * {stride}"
                if (start or step != 1)
                else f"{var} * {stride}"
            )
    for j, (d, e) in enumerate(advanced):
        stride = base.strides[d]
        if isinstance(e, (int, np.integer)):
            if e and stride:
                terms.append(str(int(e) * stride))
            continue
        idx = em.acc(index_nodes[e[1]]).broadcast(block)
        em.emit(f"k{j} = {idx.index_expr(idx.strides, block_vars)}")
        _bounds_check(em, node, f"k{j}", base.shape[d])
        if stride:
            terms.append(f"k{j} * {stride}")
    return " + ".join(terms) or "0", vars_


@structured("getitem")
def emit_getitem(em: Emitter, node: Node) -> None:
    """Advanced indexing (basic indexing is a view, see generate._emit_view)."""
    x, index_nodes = node.inputs[0], node.inputs[1:]
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    src = em.acc(x)
    flat, vars_ = _advanced_index(em, node, src, node.attrs["spec"], index_nodes, node.shape)
    em.emit(
        f"{out.index_expr(out.strides, vars_)} = {src.buf}[{flat}]"
        if src.scalar is None
        else f"{out.index_expr(out.strides, vars_)} = {src.scalar}"
    )
    em.indent -= len(vars_)


@structured("index_add_zeros")
def emit_index_add_zeros(em: Emitter, node: Node) -> None:
    if len(node.inputs) != 1:
        g, index_nodes = node.inputs[0], node.inputs[1:]
        em.comment(node)
        out = em.alloc(node)
        em.set_materialized(node, out)
        em.loop_fill(out, node.size, literal(0, node.dtype))
        if g.size == 0:
            return
        ga = em.acc(g)
        flat, vars_ = _advanced_index(em, node, out, node.attrs["spec"], index_nodes, g.shape)
        em.emit(f"{out.buf}[{flat}] += {ga.index_expr(ga.strides, vars_)}")
        em.indent -= len(vars_)
        return
    g = node.inputs[0]
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    em.loop_fill(out, node.size, literal(0, node.dtype))
    if g.size == 0:
        return
    dst = basic_index_view(out, node.attrs["spec"])
    src = em.acc(g)
    from tracegrad.codegen.plan import coalesce

    dims, (ss, ds) = coalesce(list(g.shape), [src.strides, dst.strides])
    vars_ = _nested(em, tuple(dims))
    em.emit(f"{dst.index_expr(ds, vars_)} = {src.index_expr(ss, vars_)}")
    em.indent -= len(dims)


# ------------------------------------------------- scans along one axis (issue 13)


def _scan_layout(node: Node):
    ax = int(node.attrs["axis"]) % max(node.ndim, 1)
    shape = tuple(node.shape)
    return size_of(shape[:ax]), shape[ax], size_of(shape[ax + 1 :])


@structured("cumsum", "linrec")
def emit_scan(em: Emitter, node: Node) -> None:
    """cumsum: out_t = out_(t-1) + x_t; linrec: out_t = a_t * out_(t-1) + b_t (h_(-1) = 0).

    Walks the axis in the outer loop and the contiguous inner block in the inner
    loop (each step reads the previous step's row of the output)."""
    outer, n, inner = _scan_layout(node)
    srcs = [em.contiguous(x) for x in node.inputs]
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    reverse = bool(node.attrs.get("reverse", False))
    dt = f"np.{np.dtype(node.dtype).name}"
    first = n - 1 if reverse else 0
    _open(em, "o", outer)
    em.emit(f"base = o * {n * inner}")
    _open(em, "i", inner)
    at = f"base + {first * inner} + i"
    if node.op == "cumsum":
        em.emit(f"{_at(out, at)} = {dt}({_at(srcs[0], at)})")
    else:
        em.emit(f"{_at(out, at)} = {dt}({_at(srcs[0], at)} * 0 + {_at(srcs[1], at)})")
    em.indent -= 1
    _open(em, "j", n - 1)
    em.emit(f"t = {n - 2} - j" if reverse else "t = j + 1")
    em.emit(f"prev = base + (t {'+' if reverse else '-'} 1) * {inner}")
    em.emit(f"cur = base + t * {inner}")
    _open(em, "i", inner)
    if node.op == "cumsum":
        em.emit(f"{_at(out, 'cur + i')} = {_at(out, 'prev + i')} + {_at(srcs[0], 'cur + i')}")
    else:
        em.emit(
            f"{_at(out, 'cur + i')} = {_at(srcs[0], 'cur + i')} * {_at(out, 'prev + i')}"
            f" + {_at(srcs[1], 'cur + i')}"
        )
    em.indent -= 3


@structured("argsort")
def emit_argsort(em: Emitter, node: Node) -> None:
    """Stable argsort of each line along the axis (Numba's mergesort: NaNs last, as NumPy)."""
    x = node.inputs[0]
    outer, n, inner = _scan_layout(node)
    src = em.contiguous(x)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    em.emit(f"line = np.empty({n}, np.{np.dtype(x.dtype).name})")
    _open(em, "o", outer)
    _open(em, "i", inner)
    em.emit(f"base = o * {n * inner} + i")
    _open(em, "j", n)
    em.emit(f"line[j] = {_at(src, f'base + j * {inner}')}")
    em.indent -= 1
    em.emit("perm = np.argsort(line, kind='mergesort')")
    _open(em, "j", n)
    em.emit(f"{_at(out, f'base + j * {inner}')} = perm[j]")
    em.indent -= 3


import tracegrad.codegen.linalg_emit  # noqa: E402,F401  (registers cholesky, triangular_solve)
