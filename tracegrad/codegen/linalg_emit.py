"""Code for the linalg primitives (tracegrad/ops/linalg.py): LAPACK/BLAS in the kernel.

Without these, each linalg node cut the kernel into njit segments with its
NumPy/SciPy impl run in between (copies, Python calls, a driver). Here they
are two external calls (tracegrad/runtime/lapack.py) in the one njit function,
on the kernel's own flat buffers:

  cholesky          the lower triangle of (A + A^T) / 2 is written into the
                    output (tg_sym_lower, a shared helper: no loop of its own
                    to compile), potrf factors it in place; info > 0 raises the
                    LinAlgError eager mode raises (op, order of the failing
                    minor, operand shapes, the user's line).
  triangular_solve  b is copied into the output (any strides), a zero on A's
                    diagonal raises LinAlgError, trsm solves in place. A given
                    as a transposed view (A^T of a row-major matrix, as the
                    cholesky and solve VJPs make) is read without a copy: the
                    other triangle, the other `trans`.
  triangular_matmul the same with trmm/trmv (B := op(A) B), no singularity check.
  solve             per matrix: A copied, getrf (an exact zero pivot raises
                    LinAlgError, as NumPy's gesv), getrs into the output.
  inv               getrf + getri (a zero pivot raises LinAlgError).
  det, slogdet      getrf, then sign and log|det| as NumPy computes them
                    (det = sign * exp(log|det|); singular: 0, -inf, no error).

  eigh, eigvalsh    syevd per matrix: eigh writes (A + A^T) / 2 (lower triangle)
                    into its packed output's rows 1..n and LAPACK overwrites
                    them with the eigenvectors, the
                    eigenvalues going to row 0; eigvalsh works on a scratch copy.
                    No convergence raises eager mode's LinAlgError.

  svd, svdvals      gesdd per matrix on a scratch copy of A: U and s straight into
                    svd's packed output [U; s; V], Vt into scratch and copied
                    transposed into V's rows (full_matrices=True: NumPy impl).

  qr                geqrf on a scratch copy of A (columns: max(n, Q's)), R^T into
                    the packed output's rows m.. (a shared loop), orgqr forms Q
                    in the scratch, copied into rows ..m.

pinv and lstsq run their NumPy impl between njit segments.
Anything else (a matrix operand of another dtype than the result, NumPy
without its OpenBLAS) raises NoCodegen and the node runs its NumPy impl
between segments, as before.
"""

from __future__ import annotations

import numpy as np

from tracegrad.codegen.access import Access, c_strides
from tracegrad.codegen.emit import Emitter, NoCodegen, dshort, structured
from tracegrad.ir.graph import Node

_IMPORTS = (
    "from tracegrad.runtime.lapack import (tg_copy2d, tg_getrf, tg_getri, tg_getrs, "
    "tg_geqrf, tg_gesdd, tg_lower_finite, tg_lu_slogdet, tg_orgqr, tg_potrf, "
    "tg_qr_r_transposed, tg_sym_lower, tg_syevd, tg_trmm, tg_trmv, tg_trsm, tg_trsv)\n"
    "from tracegrad.ops.linalg import LinAlgError, NotPositiveDefinite"
)


def _require_lapack(node: Node, matrix: Node) -> None:
    """LAPACK reads `matrix` in place: it must have the result's float dtype (the
    other operands are copied into the output, converted on the way)."""
    from tracegrad.runtime import lapack

    if not lapack.AVAILABLE:
        raise NoCodegen(f"{node.op}: NumPy's OpenBLAS (LAPACK symbols) not found")
    if np.dtype(node.dtype) not in (np.float32, np.float64) or any(
        np.dtype(o.dtype).kind not in "biuf" for o in node.inputs
    ):
        raise NoCodegen(f"{node.op}: LAPACK needs float32/float64 results of real operands")
    if np.dtype(matrix.dtype) != np.dtype(node.dtype):
        raise NoCodegen(f"{node.op}: the matrix is {matrix.dtype}, the result {node.dtype}")


def _use_lapack(em: Emitter) -> None:
    """The generated module imports the LAPACK intrinsics and the error classes.

    generate.py writes each of `em.outlined_src`'s texts into the module ahead of
    the segment's function; an entry without outlined call sites stays there, so
    the imports ride on it (no change to the header generate.py builds)."""
    em.outlined_src.setdefault("_tg_lapack_imports", _IMPORTS + _runtime_stamp())


def _runtime_stamp() -> str:
    """A comment with the hash of runtime/lapack.py: the kernel's cached machine code
    has those helpers linked in, so an edit of them must change the kernel's source
    (its cache key) too."""
    global _STAMP
    if _STAMP is None:
        import hashlib

        from tracegrad.runtime import lapack

        with open(lapack.__file__, "rb") as f:
            _STAMP = f"\n# tracegrad.runtime.lapack {hashlib.sha256(f.read()).hexdigest()[:16]}"
    return _STAMP


_STAMP: str | None = None


def _operands_text(*operands: Node) -> str:
    return ", ".join(f"{dshort(o.dtype)}[{','.join(map(str, o.shape))}]" for o in operands)


def _where(node: Node) -> str:
    """Where the user wrote the op, as eager mode's user_location_suffix() says it."""
    return f"\n  (at {node.source})" if node.source else ""


def _open_batch(em: Emitter, batch: tuple) -> tuple:
    vars_ = tuple(em.fresh("bt") for _ in batch)
    for v, d in zip(vars_, batch, strict=True):
        em.emit(f"for {v} in range({d}):")
        em.indent += 1
    return vars_


def _copy2d(
    em: Emitter,
    src: Access,
    src_vars: tuple,
    dst: str,
    dst_base: str,
    dst_strides: tuple,
    n0: int,
    n1: int,
) -> None:
    """dst[dst_base + i*d0 + j*d1] = src[batch..., i, j] (a 1-D src row: j ignored)
    through the shared helper tg_copy2d (np.int64 arguments: one specialization)."""
    if src.scalar is not None:  # a literal (a size-1 const, maybe broadcast): fill
        i, j = em.fresh("i"), em.fresh("j")
        em.emit(f"for {i} in range({n0}):")
        em.emit(f"    for {j} in range({n1}):")
        em.emit(
            f"        {dst}[{dst_base} + {i} * {dst_strides[0]} + {j} * {dst_strides[1]}] = "
            f"{src.scalar}"
        )
        return
    nd = len(src.shape) - len(src_vars)
    s0 = src.strides[-nd] if nd >= 1 else 0
    s1 = src.strides[-1] if nd >= 2 else 0
    base = _offset(src, src.strides[: len(src_vars)], src_vars)
    args = [base, s0, s1, None, dst_base, *dst_strides, n0, n1]
    text = ", ".join(f"np.int64({v})" if v is not None else dst for v in args)
    em.emit(f"tg_copy2d({src.buf}, {text})")


def _offset(a: Access, strides: tuple, vars_: tuple) -> str:
    """The element offset of a[batch index] (an expression in the batch variables)."""
    return Access("", (), (), a.offset).index_expr(strides, vars_)[1:-1]


# ------------------------------------------------------------------- cholesky


@structured("cholesky")
def emit_cholesky(em: Emitter, node: Node) -> None:
    (x,) = node.inputs
    _require_lapack(node, node)  # the input is read once, into the output
    _use_lapack(em)
    n = node.shape[-1]
    batch = tuple(node.shape[:-2])
    em.comment(node)
    src = em.acc(x)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    src = src.broadcast(tuple(x.shape))
    head = "cholesky: the matrix is not positive definite"
    tail = f" (operands: {_operands_text(x)}){_where(node)}"
    if src.scalar is not None:  # a 1x1 literal: the helper reads arrays
        src = em.copy_to_buffer(x).broadcast(tuple(x.shape))
    vars_ = _open_batch(em, batch)
    nb = len(batch)
    base = _offset(out, c_strides(batch + (n * n,))[:nb], vars_)
    s_base = _offset(src, src.strides[:nb], vars_)
    fin, info = em.fresh("finite"), em.fresh("info")
    i, j = em.fresh("i"), em.fresh("j")
    # np.int64(...): literal ints would compile one specialization of the helper each
    em.emit(
        f"{fin} = tg_sym_lower({src.buf}, np.int64({s_base}), np.int64({src.strides[-2]}), "
        f"np.int64({src.strides[-1]}), {out.buf}, np.int64({base}), np.int64({n}))"
    )
    em.emit(f"{info} = tg_potrf({n}, {out.buf}, {base})")
    em.emit(f"if {info} != 0:")
    em.emit(f"    raise NotPositiveDefinite({head!r}, {info}, {tail!r})")
    # eager mode's check: a finite matrix whose factor overflowed is not accepted
    em.emit(f"if {fin} and not tg_lower_finite({out.buf}, np.int64({base}), np.int64({n})):")
    em.emit(f"    raise LinAlgError({head + tail!r})")
    if node.attrs.get("upper"):
        em.emit(f"for {i} in range({n}):  # upper=True: L^T, in place")
        em.emit(f"    for {j} in range({i}):")
        em.emit(
            f"        {out.buf}[{base} + {j} * {n} + {i}] = {out.buf}[{base} + {i} * {n} + {j}]"
        )
        em.emit(f"        {out.buf}[{base} + {i} * {n} + {j}] = 0.0")
    em.indent -= len(batch)


# ----------------------------------------------------------- triangular_solve


def _triangle_layout(a: Access, n: int):
    """(row stride, flipped) when the (n, n) matrix access is row-major (False) or
    column-major (True: memory holds A^T row-major), else None."""
    rs, cs = a.strides[-2], a.strides[-1]
    if n <= 1:
        return max(n, 1), False
    if cs == 1 and rs == n:
        return n, False
    if rs == 1 and cs == n:
        return n, True
    return None


@structured("triangular_solve", "triangular_matmul")
def emit_triangular(em: Emitter, node: Node) -> None:
    """triangular_solve (trsm/trsv) and triangular_matmul (trmm/trmv): b is copied
    into the output, where BLAS solves or multiplies in place."""
    a, b = node.inputs
    solve = node.op == "triangular_solve"
    _require_lapack(node, a)
    _use_lapack(em)
    lower, trans = bool(node.attrs.get("lower", True)), bool(node.attrs.get("trans", False))
    unit = bool(node.attrs.get("unit_diagonal", False))
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    k = 1 if b.ndim == 1 or b.ndim == len(batch) + 1 else b.shape[-1]
    em.comment(node)
    acc_a = em.acc(a)
    if acc_a.scalar is not None or _triangle_layout(acc_a, n) is None:
        acc_a = em.copy_to_buffer(a)
    lda, flipped = _triangle_layout(acc_a, n)
    if flipped:  # memory holds M = A^T: A's lower triangle is M's upper one
        lower, trans = not lower, not trans
    acc_b = em.acc(b).broadcast(tuple(b.shape))
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0:
        return
    vars_ = _open_batch(em, batch)
    nb = len(batch)
    a_base = _offset(acc_a, acc_a.strides[:nb], vars_)
    o_base = _offset(out, c_strides(batch + (n * k,))[:nb], vars_)
    i = em.fresh("i")
    if solve and not unit and not _is_cholesky_factor(a):
        step = lda + 1
        em.emit(f"for {i} in range({n}):")
        em.emit(f"    if {acc_a.buf}[{a_base} + {i} * {step}] == 0.0:")
        em.emit(f"        raise LinAlgError({_singular_message(node, a, b)!r})")
    # b into the output, where trsm solves in place
    _copy2d(em, acc_b, vars_, out.buf, o_base, (k, 1), n, k)
    flags = f"{int(lower)}, {int(trans)}, {int(unit)}, {n}"
    vector_fn, matrix_fn = ("tg_trsv", "tg_trsm") if solve else ("tg_trmv", "tg_trmm")
    if k == 1:  # one vector: trsv (trsm's blocking costs ~5x at n = 256)
        em.emit(f"{vector_fn}({flags}, {acc_a.buf}, {a_base}, {lda}, {out.buf}, {o_base})")
    else:
        em.emit(
            f"{matrix_fn}({flags}, {k}, {acc_a.buf}, {a_base}, {lda}, {out.buf}, {o_base}, {k})"
        )
    em.indent -= nb


def _is_cholesky_factor(a: Node) -> bool:
    """Is `a` a cholesky output, or its matrix transpose? Then its diagonal is
    positive (potrf succeeded, or the kernel raised already): no zero check (each
    check is a loop and a raise site, ~0.05 s of Numba compile)."""
    while a.op == "transpose":
        nd = len(a.shape)
        if tuple(a.attrs.get("axes") or ()) != tuple(range(nd - 2)) + (nd - 1, nd - 2):
            return False
        a = a.inputs[0]
    return a.op == "cholesky"


def _singular_message(node: Node, a: Node, b: Node) -> str:
    return (
        f"triangular_solve: the matrix is singular (a zero on its diagonal) "
        f"(operands: {_operands_text(a, b)}){_where(node)}"
    )


# ---------------------------------------------------------------------- solve


@structured("solve")
def emit_solve(em: Emitter, node: Node) -> None:
    """A copied into scratch (any strides, so the VJP's A^T costs no extra pass),
    LU by getrf (an exact zero pivot raises eager mode's LinAlgError), getrs solves
    into the output; per matrix of a batch (a and b broadcast over batch axes, a
    1-D b is one vector for every matrix, as NumPy 2 reads it)."""
    a, b = node.inputs
    _require_lapack(node, node)  # both operands are copied (and converted) first
    _use_lapack(em)
    n = a.shape[-1]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[-1]
    shape = tuple(node.shape)
    batch = shape[:-1] if vector else shape[:-2]
    em.comment(node)
    acc_a = em.acc(a).broadcast(batch + (n, n))
    acc_b = em.acc(b).broadcast(shape)
    out = em.alloc(node)
    em.set_materialized(node, out)
    if node.size == 0 or n == 0:
        return
    lu = em.scratch(node.dtype, n * n)
    piv = em.scratch(np.int64, n)
    col = em.scratch(node.dtype, n * k) if k > 1 else None
    vars_ = _open_batch(em, batch)
    base = (
        _offset(out, c_strides(batch + (n * k,))[: len(batch)], vars_) if batch else str(out.offset)
    )
    info = em.fresh("info")
    # A row-major is A^T column-major: getrf factors A^T, getrs solves (A^T)^T x = b
    _copy2d(em, acc_a, vars_, lu[0], str(lu[1]), (n, 1), n, n)
    em.emit(f"{info} = tg_getrf({n}, {lu[0]}, {lu[1]}, {piv[0]}, {piv[1]})")
    em.emit(f"if {info} != 0:")
    em.emit(f"    raise LinAlgError({_solve_message(node, a, b)!r})")
    if col is None:  # one column: row-major and column-major are the same memory
        _copy2d(em, acc_b, vars_, out.buf, base, (1, 0), n, 1)
        em.emit(f"tg_getrs({n}, 1, {lu[0]}, {lu[1]}, {piv[0]}, {piv[1]}, {out.buf}, {base})")
    else:  # B column-major in scratch, solved there, copied back row-major
        _copy2d(em, acc_b, vars_, col[0], str(col[1]), (1, n), n, k)
        em.emit(f"tg_getrs({n}, {k}, {lu[0]}, {lu[1]}, {piv[0]}, {piv[1]}, {col[0]}, {col[1]})")
        col_acc = Access(col[0], (n, k), (1, n), col[1])
        _copy2d(em, col_acc, (), out.buf, base, (k, 1), n, k)
    em.indent -= len(batch)
    if col is not None:
        em.release_scratch(col)
    em.release_scratch(piv)
    em.release_scratch(lu)


def _solve_message(node: Node, a: Node, b: Node) -> str:
    return f"solve: the matrix is singular (operands: {_operands_text(a, b)}){_where(node)}"


# ------------------------------------------------------ det, slogdet, inv (LU)


def _lu_batch(em: Emitter, node: Node):
    """Open the batch loops over node's input matrices and LU-factor each one into
    scratch: (vars, lu region, pivot region, info name, n). The caller emits what
    it reads from the factorization, closes the loops and releases the regions."""
    (a,) = node.inputs
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    acc_a = em.acc(a).broadcast(tuple(a.shape))
    lu = em.scratch(node.dtype, max(n * n, 1))
    piv = em.scratch(np.int64, max(n, 1))
    vars_ = _open_batch(em, batch)
    info = em.fresh("info")
    _copy2d(em, acc_a, vars_, lu[0], str(lu[1]), (n, 1), n, n)
    em.emit(f"{info} = tg_getrf({n}, {lu[0]}, {lu[1]}, {piv[0]}, {piv[1]})")
    return vars_, lu, piv, info, n


def _lu_node_ok(node: Node) -> None:
    (a,) = node.inputs
    _require_lapack(node, node)  # the matrix is copied (and converted) first
    if a.shape[-1] == 0 or node.size == 0:
        raise NoCodegen(f"{node.op}: empty matrices (NumPy's conventions)")


@structured("det", "slogdet_sign", "logabsdet")
def emit_lu_determinant(em: Emitter, node: Node) -> None:
    """det = sign * exp(log|det|), as NumPy computes it; a zero pivot gives sign 0
    and log|det| = -inf (det 0), never an error."""
    _lu_node_ok(node)
    _use_lapack(em)
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    batch = tuple(node.inputs[0].shape[:-2])
    vars_, lu, piv, info, n = _lu_batch(em, node)
    sign, logdet = em.fresh("sign"), em.fresh("logdet")
    em.emit(
        f"{sign}, {logdet} = tg_lu_slogdet({lu[0]}, np.int64({lu[1]}), {piv[0]}, "
        f"np.int64({piv[1]}), np.int64({n}), {info})"
    )
    value = {"det": f"{sign} * np.exp({logdet})", "slogdet_sign": sign, "logabsdet": logdet}[
        node.op
    ]
    at = _offset(out, c_strides(batch), vars_) if batch else str(out.offset)
    em.emit(f"{out.buf}[{at}] = {value}")
    em.indent -= len(batch)
    em.release_scratch(piv)
    em.release_scratch(lu)


@structured("inv")
def emit_inv(em: Emitter, node: Node) -> None:
    """getrf + getri on a row-major copy (A^T column-major: its inverse read back
    row-major is A^-1); an exact zero pivot raises eager mode's LinAlgError."""
    _lu_node_ok(node)
    _use_lapack(em)
    (a,) = node.inputs
    em.comment(node)
    out = em.alloc(node)
    em.set_materialized(node, out)
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    lwork = 64 * n  # getri's blocked work size (block 64), >= n
    work = em.scratch(node.dtype, lwork)
    vars_, lu, piv, info, n = _lu_batch(em, node)
    message = f"inv: the matrix is singular (operands: {_operands_text(a)}){_where(node)}"
    em.emit(f"if {info} != 0:")
    em.emit(f"    raise LinAlgError({message!r})")
    em.emit(f"tg_getri({n}, {lu[0]}, {lu[1]}, {piv[0]}, {piv[1]}, {work[0]}, {work[1]}, {lwork})")
    base = _offset(out, c_strides(batch + (n * n,))[: len(batch)], vars_)
    _copy2d(em, Access(lu[0], (n, n), (n, 1), lu[1]), (), out.buf, base, (n, 1), n, n)
    em.indent -= len(batch)
    em.release_scratch(piv)
    em.release_scratch(lu)
    em.release_scratch(work)


# ------------------------------------------------------------ eigh, eigvalsh


@structured("eigh", "eigvalsh")
def emit_eigh(em: Emitter, node: Node) -> None:
    """syevd on each matrix: eigh's packed output [w; V] is written in place (A copied
    into V's rows, LAPACK returns the eigenvectors there and w in row 0)."""
    (a,) = node.inputs
    n = a.shape[-1]
    _require_lapack(node, node)  # the matrix is copied (and converted) first
    if n == 0 or node.size == 0:
        raise NoCodegen(f"{node.op}: empty matrices (NumPy's conventions)")
    _use_lapack(em)
    vectors = node.op == "eigh"
    lower = bool(node.attrs.get("lower", True))
    batch = tuple(a.shape[:-2])
    nb = len(batch)
    em.comment(node)
    acc_a = em.acc(a).broadcast(tuple(a.shape))
    if acc_a.scalar is not None:  # a 1x1 literal: the helper reads arrays
        acc_a = em.copy_to_buffer(a).broadcast(tuple(a.shape))
    out = em.alloc(node)
    em.set_materialized(node, out)
    work = None if vectors else em.scratch(node.dtype, n * n)
    vars_ = _open_batch(em, batch)
    per_matrix = (n + 1) * n if vectors else n
    w_base = (
        _offset(out, c_strides(batch + (per_matrix,))[:nb], vars_) if batch else str(out.offset)
    )
    if vectors:
        m_buf, m_base = out.buf, f"{w_base} + {n}"
    else:
        m_buf, m_base = work[0], str(work[1])
    info = em.fresh("info")
    # the lower triangle of (A + A^T) / 2, as the impl reads it (tg_sym_lower: shared)
    s_base = _offset(acc_a, acc_a.strides[:nb], vars_) if batch else str(acc_a.offset)
    em.emit(
        f"tg_sym_lower({acc_a.buf}, np.int64({s_base}), np.int64({acc_a.strides[-2]}), "
        f"np.int64({acc_a.strides[-1]}), {m_buf}, np.int64({m_base}), np.int64({n}))"
    )
    em.emit(
        f"{info} = tg_syevd({int(vectors)}, {int(lower)}, {n}, {m_buf}, {m_base}, "
        f"{out.buf}, {w_base})"
    )
    em.emit(f"if {info} != 0:")
    message = (
        f"{node.op}: the algorithm did not converge (operands: {_operands_text(a)}){_where(node)}"
    )
    em.emit(f"    raise LinAlgError({message!r})")
    if vectors and not lower:  # column-major eigenvectors: transpose in place
        i, j, t = em.fresh("i"), em.fresh("j"), em.fresh("t")
        em.emit(f"for {i} in range({n}):")
        em.emit(f"    for {j} in range({i}):")
        em.emit(f"        {t} = {m_buf}[{m_base} + {i} * {n} + {j}]")
        em.emit(
            f"        {m_buf}[{m_base} + {i} * {n} + {j}] = {m_buf}[{m_base} + {j} * {n} + {i}]"
        )
        em.emit(f"        {m_buf}[{m_base} + {j} * {n} + {i}] = {t}")
    em.indent -= nb
    if work is not None:
        em.release_scratch(work)


# ----------------------------------------------------------------- svd, svdvals


@structured("svd", "svdvals")
def emit_svd(em: Emitter, node: Node) -> None:
    """gesdd on a scratch copy of each matrix; svd's packed [U; s; V] (reduced: k columns)
    gets U and s from LAPACK directly and V = Vt^T through one strided copy."""
    (a,) = node.inputs
    m, n = a.shape[-2:]
    k = min(m, n)
    vectors = node.op == "svd"
    _require_lapack(node, node)  # the matrix is copied (and converted) first
    if k == 0 or node.size == 0:
        raise NoCodegen(f"{node.op}: empty matrices (NumPy's conventions)")
    if vectors and node.attrs.get("full_matrices"):
        raise NoCodegen("svd: full_matrices=True (zero-padded packing) runs in NumPy")
    _use_lapack(em)
    batch = tuple(a.shape[:-2])
    nb = len(batch)
    em.comment(node)
    acc_a = em.acc(a).broadcast(tuple(a.shape))
    out = em.alloc(node)
    em.set_materialized(node, out)
    work = em.scratch(node.dtype, m * n)
    vt = em.scratch(node.dtype, k * n) if vectors else None
    vars_ = _open_batch(em, batch)
    per_matrix = (m + 1 + n) * k if vectors else k
    base = _offset(out, c_strides(batch + (per_matrix,))[:nb], vars_) if batch else str(out.offset)
    s_base = f"{base} + {m * k}" if vectors else base
    info = em.fresh("info")
    _copy2d(em, acc_a, vars_, work[0], str(work[1]), (n, 1), m, n)
    if vectors:
        em.emit(
            f"{info} = tg_gesdd(1, {m}, {n}, {work[0]}, {work[1]}, {out.buf}, {s_base}, "
            f"{out.buf}, {base}, {k}, {vt[0]}, {vt[1]}, {n})"
        )
    else:
        em.emit(
            f"{info} = tg_gesdd(0, {m}, {n}, {work[0]}, {work[1]}, {out.buf}, {s_base}, "
            f"{work[0]}, {work[1]}, 1, {work[0]}, {work[1]}, 1)"
        )
    em.emit(f"if {info} != 0:")
    message = (
        f"{node.op}: the algorithm did not converge (operands: {_operands_text(a)}){_where(node)}"
    )
    em.emit(f"    raise LinAlgError({message!r})")
    if vectors:  # V (n, k) row-major = Vt (k, n) read column by column
        _copy2d(
            em,
            Access(vt[0], (n, k), (1, n), vt[1]),
            (),
            out.buf,
            f"{base} + {(m + 1) * k}",
            (k, 1),
            n,
            k,
        )
    em.indent -= nb
    if vt is not None:
        em.release_scratch(vt)
    em.release_scratch(work)


# ------------------------------------------------------------------------- qr


@structured("qr")
def emit_qr(em: Emitter, node: Node) -> None:
    """Householder QR per matrix: packed [Q (m, kq); R^T (n, kq)] (kq = min(m, n), or m
    for mode 'complete')."""
    (a,) = node.inputs
    m, n = a.shape[-2:]
    k = min(m, n)
    kq = node.shape[-1]
    _require_lapack(node, node)  # the matrix is copied (and converted) first
    if k == 0 or node.size == 0:
        raise NoCodegen("qr: empty matrices (NumPy's conventions)")
    _use_lapack(em)
    batch = tuple(a.shape[:-2])
    nb = len(batch)
    lda = max(n, kq)
    em.comment(node)
    acc_a = em.acc(a).broadcast(tuple(a.shape))
    out = em.alloc(node)
    em.set_materialized(node, out)
    work = em.scratch(node.dtype, m * lda)
    tau = em.scratch(node.dtype, k)
    vars_ = _open_batch(em, batch)
    base = (
        _offset(out, c_strides(batch + ((m + n) * kq,))[:nb], vars_) if batch else str(out.offset)
    )
    _copy2d(em, acc_a, vars_, work[0], str(work[1]), (lda, 1), m, n)
    i, j, info = em.fresh("i"), em.fresh("j"), em.fresh("info")
    if kq > n:  # complete Q of a tall matrix: LAPACKE rejects NaN (garbage) in any column
        em.emit(f"for {i} in range({m}):")
        em.emit(f"    for {j} in range({n}, {kq}):")
        em.emit(f"        {work[0]}[{work[1]} + {i} * {lda} + {j}] = 0.0")
    em.emit(f"{info} = tg_geqrf({m}, {n}, 0, {work[0]}, {work[1]}, {lda}, {tau[0]}, {tau[1]})")
    em.emit(f"if {info} != 0:  # a NaN in A (LAPACKE's check): NaN factors, as NumPy's")
    em.emit(f"    for {i} in range({(m + n) * kq}):")
    em.emit(f"        {out.buf}[{base} + {i}] = np.nan")
    em.emit("else:")
    em.indent += 1
    em.emit(
        f"tg_qr_r_transposed({work[0]}, np.int64({work[1]}), np.int64({lda}), {out.buf}, "
        f"np.int64({base} + {m * kq}), np.int64({n}), np.int64({kq}))"
    )
    em.emit(f"tg_orgqr({m}, {kq}, {k}, {work[0]}, {work[1]}, {lda}, {tau[0]}, {tau[1]})")
    _copy2d(em, Access(work[0], (m, kq), (lda, 1), work[1]), (), out.buf, base, (kq, 1), m, kq)
    em.indent -= 1
    em.indent -= nb
    em.release_scratch(tau)
    em.release_scratch(work)
