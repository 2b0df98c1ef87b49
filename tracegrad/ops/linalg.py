"""Linear algebra primitives: cholesky, triangular_solve, solve, inv, det, slogdet.

Each one is defined once, like the primitives of tracegrad/ops/table.py (whose
end imports this module, so they are in the rule table): a NumPy/LAPACK
implementation, a shape rule, vector-Jacobian rules written in tracegrad ops
(they call these very primitives, so grad of grad works in both modes) and
PyTorch's backward node names.

Conventions:
  - Operands are (..., n, n) matrices (batched over leading axes); int and
    bool operands compute in float64, float32 stays float32 (NumPy's rules).
  - `cholesky` reads the symmetric part (A + A^T) / 2 of its operand, as JAX's
    does, so its gradient is symmetric and is the true gradient in every
    direction (NumPy reads the lower triangle; on symmetric input both agree).
  - `triangular_solve` has scipy.linalg.solve_triangular's semantics: it solves
    op(A) x = b with op(A) = A or A^T, reading only A's lower or upper triangle.
  - `slogdet` is two primitives: a sign (no gradient) and log|det|.
  - A matrix that is not positive definite (cholesky) or singular (solve, inv,
    triangular_solve) raises `LinAlgError` naming the op and the operand
    shapes, also from compiled code.

Code generation: every one of them runs inside the compiled kernel
(tracegrad/codegen/linalg_emit.py: LAPACK potrf/getrf/getrs/getri and BLAS
trsm/trmm of NumPy's own OpenBLAS, called from njit through
tracegrad/runtime/lapack.py), so a graph of them is one njit call. Empty
matrices, and a triangular matrix whose dtype is not the result's, run the
NumPy impl between njit segments instead. Numba's own np.linalg inside njit
compiles for seconds (perf/linalg_codegen_bench.py).

    >>> import numpy as np, tracegrad as tg
    >>> a = np.array([[4.0, 2.0], [2.0, 3.0]])
    >>> tg.linalg.cholesky(a)
    array([[2.        , 0.        ],
           [1.        , 1.41421356]])
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from tracegrad.ops import blas_threads
from tracegrad.ops import table as T
from tracegrad.ops.core import (
    Aval,
    DTypeError,
    TracegradError,
    aval_of,
    dtype_short,
    op_error,
    primitive,
    user_location_suffix,
)
from tracegrad.ops.rulekit import as_aval, no_grad


class LinAlgError(TracegradError, np.linalg.LinAlgError):
    """A matrix is not positive definite (cholesky) or is singular (solve, inv, ...).

    Also a `numpy.linalg.LinAlgError`, so code that catches NumPy's error keeps working."""


class NotPositiveDefinite(LinAlgError):
    """cholesky's LinAlgError as a compiled kernel raises it: the kernel passes the
    message's head, the order of the failing leading minor (LAPACK's info) and the
    tail (operands, user's line); the text is eager mode's."""

    def __init__(self, head: str, order: int | None = None, tail: str = ""):
        if order is not None:  # else `head` is the whole message (as unpickling passes it)
            head = f"{head} (the leading minor of order {order} is not positive definite){tail}"
        super().__init__(head)


# ------------------------------------------------------------------ shape rules


def _linalg_dtype(name: str, *avals: Aval) -> np.dtype:
    dtype = np.result_type(*[a.dtype for a in avals])
    if dtype.kind in "biu":
        return np.dtype(np.float64)  # NumPy computes integer matrices in float64
    if dtype not in (np.float32, np.float64):
        raise op_error(name, list(avals), f"expected float32 or float64 matrices, got {dtype}",
                       cls=DTypeError)
    return np.dtype(dtype)


def _square(name: str, a: Any) -> Aval:
    a = as_aval(a)
    if a.ndim < 2:
        raise op_error(name, [a], f"expected a matrix or a batch of matrices, got a {a.ndim}-D "
                                  "array")
    if a.shape[-1] != a.shape[-2]:
        raise op_error(name, [a], f"expected square matrices, got {a.shape[-2]}x{a.shape[-1]} "
                                  "matrices")
    return a


def _square_rule(name: str, drop_matrix_axes: bool = False):
    def rule(a, **attrs):
        a = _square(name, a)
        shape = a.shape[:-2] if drop_matrix_axes else a.shape
        return Aval(tuple(shape), _linalg_dtype(name, a))
    return rule


def _rhs_shape(name: str, a: Aval, b: Aval, batch_broadcasts: bool) -> tuple:
    """Shape of x in A x = b: b is a vector when 1-D (NumPy 2's rule), else (..., n, k)."""
    n = a.shape[-1]
    if b.ndim == 0 or b.shape[-1 if b.ndim == 1 else -2] != n:
        raise op_error(name, [a, b], f"b must have {n} rows to solve with {n}x{n} matrices")
    if not batch_broadcasts and a.ndim > 2 and b.shape[:-2] != a.shape[:-2]:
        raise op_error(name, [a, b], "a batch of matrices needs b (..., n, k) with the same "
                                     "batch axes")
    if b.ndim == 1:
        return tuple(a.shape[:-1])
    if not batch_broadcasts:
        if b.ndim != a.ndim:
            raise op_error(name, [a, b], "b must be (n,) or (n, k) for one matrix")
        return tuple(b.shape)
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise op_error(name, [a, b], "the batch axes of a and b do not broadcast") from None
    return tuple(batch) + tuple(b.shape[-2:])


def _solve_rule(name: str, batch_broadcasts: bool):
    def rule(a, b, **attrs):
        a, b = _square(name, a), as_aval(b)
        return Aval(_rhs_shape(name, a, b, batch_broadcasts), _linalg_dtype(name, a, b))
    return rule


# ---------------------------------------------------------- NumPy implementations


_SCIPY_LAPACK_SEEN = []


def _scipy_linalg():
    """scipy.linalg, imported on first use (~0.2 s); its OpenBLAS then follows the load too."""
    import scipy.linalg
    if not _SCIPY_LAPACK_SEEN:
        blas_threads.note_new_library()
        _SCIPY_LAPACK_SEEN.append(True)
    return scipy.linalg


def _as_float(name: str, *arrays):
    """The operands in their common float dtype; the first must be square matrices.

    Every impl comes here before LAPACK: BLAS threads are set to the idle CPUs first
    (blas_threads.py: on a busy machine OpenBLAS's threads wait for each other)."""
    blas_threads.follow_load()
    first = arrays[0]
    if type(first) is np.ndarray and first.ndim >= 2 and first.shape[-1] == first.shape[-2] \
            and all(type(a) is np.ndarray and a.dtype == first.dtype for a in arrays) \
            and first.dtype in (np.float32, np.float64):
        return arrays  # the common case, checked without building avals
    avals = [aval_of(a) for a in arrays]
    _square(name, avals[0])  # NumPy's own errors would be reported as a singular matrix
    dtype = _linalg_dtype(name, *avals)
    return [np.asarray(a, dtype=dtype) for a in arrays]


def _failure(name: str, operands, reason: str) -> LinAlgError:
    shapes = ", ".join(f"{dtype_short(np.asarray(o).dtype)}[{','.join(map(str, np.shape(o)))}]"
                       for o in operands)
    return LinAlgError(f"{name}: {reason} (operands: {shapes}){user_location_suffix()}")


def _leading_minor(a: np.ndarray) -> str:
    """Which leading minor of the first failing matrix is not positive definite."""
    from scipy.linalg import lapack
    for m in a.reshape((-1,) + a.shape[-2:]):
        potrf = lapack.dpotrf if m.dtype == np.float64 else lapack.spotrf
        _, info = potrf(m, lower=True, clean=False)
        if info > 0:
            return f" (the leading minor of order {info} is not positive definite)"
    return ""


def _cholesky_impl(a, upper=False):
    (a,) = _as_float("cholesky", a)
    sym = np.add(a, np.swapaxes(a, -1, -2))
    sym *= a.dtype.type(0.5)
    try:
        low = np.linalg.cholesky(sym)
    except np.linalg.LinAlgError:
        raise _failure("cholesky", [a], "the matrix is not positive definite"
                       + _leading_minor(sym)) from None
    if not np.isfinite(low).all() and np.isfinite(sym).all():
        raise _failure("cholesky", [a], "the matrix is not positive definite")
    return np.ascontiguousarray(np.swapaxes(low, -1, -2)) if upper else low


def _triangular_solve_impl(a, b, lower=True, trans=False, unit_diagonal=False):
    solve_triangular = _scipy_linalg().solve_triangular
    a, b = _as_float("triangular_solve", a, b)
    triangular_solve_p.shape_rule(aval_of(a), aval_of(b))  # scipy would batch b alone
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    if not unit_diagonal and (diag == 0).any():
        raise _failure("triangular_solve", [a, b], "the matrix is singular (a zero on its "
                                                   "diagonal)")
    if a.ndim == 2:
        return np.asarray(solve_triangular(a, b, lower=lower, trans=int(trans),
                                           unit_diagonal=unit_diagonal, check_finite=False))
    out = np.empty(b.shape, a.dtype)
    for i in np.ndindex(*a.shape[:-2]):  # scipy < 1.15 does not batch
        out[i] = solve_triangular(a[i], b[i], lower=lower, trans=int(trans),
                                  unit_diagonal=unit_diagonal, check_finite=False)
    return out


def _triangular_matmul_impl(a, b, lower=True, trans=False):
    a, b = _as_float("triangular_matmul", a, b)
    triangular_matmul_p.shape_rule(aval_of(a), aval_of(b))
    tri = np.tril(a) if lower else np.triu(a)
    return np.matmul(np.swapaxes(tri, -1, -2) if trans else tri, b)


def _solve_impl(a, b):
    a, b = _as_float("solve", a, b)
    try:
        if b.ndim == 1:
            return np.linalg.solve(a, b)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]),
                               np.broadcast_to(b, batch + b.shape[-2:]))
    except np.linalg.LinAlgError:
        raise _failure("solve", [a, b], "the matrix is singular") from None


def _inv_impl(a):
    (a,) = _as_float("inv", a)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _failure("inv", [a], "the matrix is singular") from None


def _det_impl(a):
    (a,) = _as_float("det", a)
    return np.asarray(np.linalg.det(a), dtype=a.dtype)


def _slogdet_sign_impl(a):
    (a,) = _as_float("slogdet", a)
    return np.asarray(np.linalg.slogdet(a)[0], dtype=a.dtype)


def _logabsdet_impl(a):
    (a,) = _as_float("slogdet", a)
    return np.asarray(np.linalg.slogdet(a)[1], dtype=a.dtype)


# ------------------------------------------------- helpers for the vjp rules
# (tracegrad ops only: each rule runs on arrays, eager tensors and tracers)


def _mT(x):
    """Swap the last two axes."""
    nd = np.ndim(x)
    return T.transpose(x, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mask(x, lower: bool, strict: bool = False):
    """Keep the lower (upper) triangle of the last two axes; strict drops the diagonal."""
    n = np.shape(x)[-1]
    ones = np.ones((n, n), dtype=aval_of(x).dtype)
    keep = np.tril(ones, -1 if strict else 0) if lower else np.triu(ones, 1 if strict else 0)
    return T.mul(x, keep)


def _outer(u, v):
    """u[..., :, None] * v[..., None, :] (u and v of one shape)."""
    shape = tuple(np.shape(u))
    column = T.reshape(u, shape=shape + (1,))
    return T.mul(column, T.reshape(v, shape=shape[:-1] + (1,) + shape[-1:]))


def _times_matrix(g, m):
    """g[..., None, None] * m."""
    return T.mul(T.reshape(g, shape=tuple(np.shape(g)) + (1, 1)), m)


def _outer_or_product(u, v, vector: bool):
    """u v^T: an outer product for vectors, a matrix product otherwise."""
    return _outer(u, v) if vector else T.matmul(u, _mT(v))


def _rank_one_or_product(u, v, vector: bool):
    """-(u v^T): an outer product for vectors, a matrix product otherwise."""
    return T.neg(_outer(u, v) if vector else T.matmul(u, _mT(v)))


# ----------------------------------------------------------------- vjp rules


def _cholesky_vjp(g, out, a, upper=False):
    # Murray (2016), as in PyTorch's cholesky_backward: with P = tril(L^T gL),
    # gA = L^-T (P with its diagonal halved, made symmetric) L^-1.
    low, g_low = (_mT(out), _mT(g)) if upper else (out, g)
    # tril(L^T gL) reads only gL's lower triangle; trmm: half a GEMM's flops
    p = _mask(triangular_matmul_p(low, g_low, lower=True, trans=True), lower=True)
    s = T.mul(T.add(p, _mT(_mask(p, lower=True, strict=True))), 0.5)
    y = triangular_solve_p(low, s, lower=True, trans=True)              # L^-T S
    ga = triangular_solve_p(low, _mT(y), lower=True, trans=True)        # L^-T S L^-1
    return T.mul(T.add(ga, _mT(ga)), 0.5)  # symmetric up to rounding: make it exact


def _triangular_solve_vjp_b(g, out, a, b, lower=True, trans=False, unit_diagonal=False):
    return triangular_solve_p(a, g, lower=lower, trans=not trans, unit_diagonal=unit_diagonal)


def _triangular_solve_vjp_a(g, out, a, b, lower=True, trans=False, unit_diagonal=False):
    gb = _triangular_solve_vjp_b(g, out, a, b, lower, trans, unit_diagonal)
    vector = np.ndim(b) == 1
    # op(A) x = b: g_op(A) = -gb x^T; for op(A) = A^T that is gA^T
    ga = _rank_one_or_product(out, gb, vector) if trans else _rank_one_or_product(gb, out, vector)
    return _mask(ga, lower=lower, strict=unit_diagonal)


def _triangular_matmul_vjp_b(g, out, a, b, lower=True, trans=False):
    return triangular_matmul_p(a, g, lower=lower, trans=not trans)  # op(A)^T g


def _triangular_matmul_vjp_a(g, out, a, b, lower=True, trans=False):
    vector = np.ndim(b) == 1
    # C = op(A) B: g_op(A) = g B^T; for op(A) = A^T that is gA^T = B g^T
    ga = _outer_or_product(b, g, vector) if trans else _outer_or_product(g, b, vector)
    return _mask(ga, lower=lower)


def _solve_vjp_b(g, out, a, b):
    # the driver sums a broadcast batch back to b's shape
    if np.ndim(b) == 1 and np.ndim(g) > 1:  # a batch of vectors: solve them as (..., n, 1)
        shape = tuple(np.shape(g))
        return T.reshape(solve_p(_mT(a), T.reshape(g, shape=shape + (1,))), shape=shape)
    return solve_p(_mT(a), g)


def _solve_vjp_a(g, out, a, b):
    gb = _solve_vjp_b(g, out, a, b)  # the driver sums a broadcast batch back to a's shape
    return _rank_one_or_product(gb, out, np.ndim(b) == 1)


def _inv_vjp(g, out, a):
    return T.neg(T.matmul(T.matmul(_mT(out), g), _mT(out)))  # -A^-T g A^-T


def _det_vjp(g, out, a):
    return _times_matrix(T.mul(g, out), _mT(inv_p(a)))  # g det(A) A^-T


def _logabsdet_vjp(g, out, a):
    return _times_matrix(g, _mT(inv_p(a)))  # g A^-T


# ---------------------------------------------------------------- the primitives

cholesky_p = primitive(  # lower L with L L^T = (A + A^T) / 2; upper=True gives L^T
    "cholesky", impl=_cholesky_impl, shape_rule=_square_rule("cholesky"), kind="other",
    vjps=(_cholesky_vjp,), torch_name="LinalgCholeskyExBackward0", saves=("out",),
    codegen="cholesky")

triangular_solve_p = primitive(  # x with op(A) x = b, op(A) = A or A^T (trans), A triangular
    "triangular_solve", impl=_triangular_solve_impl,
    shape_rule=_solve_rule("triangular_solve", batch_broadcasts=False), kind="other",
    vjps=(_triangular_solve_vjp_a, _triangular_solve_vjp_b),
    torch_name="LinalgSolveTriangularBackward0", saves=(0, "out"), codegen="triangular_solve")

triangular_matmul_p = primitive(  # op(A) @ b, A triangular (only that triangle is read)
    "triangular_matmul", impl=_triangular_matmul_impl,
    shape_rule=_solve_rule("triangular_matmul", batch_broadcasts=False), kind="other",
    vjps=(_triangular_matmul_vjp_a, _triangular_matmul_vjp_b),
    torch_name="TriangularMatmulBackward0", saves=(0, 1), codegen="triangular_matmul")

solve_p = primitive(  # x with A x = b; b is a vector when 1-D, batch axes broadcast
    "solve", impl=_solve_impl, shape_rule=_solve_rule("solve", batch_broadcasts=True),
    kind="other", vjps=(_solve_vjp_a, _solve_vjp_b), torch_name="LinalgSolveExBackward0",
    saves=(0, "out"), codegen="solve")

inv_p = primitive(
    "inv", impl=_inv_impl, shape_rule=_square_rule("inv"), kind="other", vjps=(_inv_vjp,),
    torch_name="LinalgInvExBackward0", saves=("out",), codegen="inv")

det_p = primitive(
    "det", impl=_det_impl, shape_rule=_square_rule("det", drop_matrix_axes=True), kind="other",
    vjps=(_det_vjp,), torch_name="LinalgDetBackward0", saves=(0, "out"), codegen="det")

slogdet_sign_p = primitive(  # the sign of det(A): -1, 0 or 1, no gradient
    "slogdet_sign", impl=_slogdet_sign_impl,
    shape_rule=_square_rule("slogdet", drop_matrix_axes=True), kind="other", nondiff=True,
    vjps=(no_grad,), torch_name=None, saves=(), codegen="slogdet_sign")

logabsdet_p = primitive(  # log|det(A)|
    "logabsdet", impl=_logabsdet_impl,
    shape_rule=_square_rule("slogdet", drop_matrix_axes=True), kind="other",
    vjps=(_logabsdet_vjp,), torch_name="LinalgSlogdetBackward0", saves=(0,), codegen="logabsdet")


# ------------------------------------------------------- NumPy-named functions
# tracegrad.linalg.<name> (tracegrad/ops/api.py), np.linalg.<name> on tracers
# (tracegrad/tracing.py) and torch.linalg.<name> (tracegrad/eager/linalg.py).

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])

PUBLIC = ("cholesky", "solve", "inv", "det", "slogdet", "solve_triangular")


def _operand(x):
    """Lists and Python numbers become arrays; arrays, tensors and tracers stay."""
    return np.asarray(x) if isinstance(x, (list, tuple, int, float, bool, np.generic)) else x


def cholesky(a, upper: bool = False):
    """The Cholesky factor of a symmetric positive-definite matrix (or a batch).

    Lower-triangular L with L @ L.T == a (upper=True: L.T, as in NumPy 2). Reads
    the symmetric part of `a`, as JAX does, so its gradient is symmetric; raises
    LinAlgError if `a` is not positive definite.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 2.0]]))
    array([[2., 0.],
           [1., 1.]])
    """
    return cholesky_p(_operand(a), upper=bool(upper))


def solve_triangular(a, b, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False):
    """scipy.linalg.solve_triangular: x with op(a) @ x == b, a triangular.

    `trans` 0/'N' solves a x = b, 1/'T'/2/'C' solves a.T x = b (real matrices);
    only the `lower` (else upper) triangle of `a` is read, and its diagonal is
    taken as ones with unit_diagonal. `b` is (n,) or (n, k); `a` may be a batch
    (..., n, n) with `b` of the same batch axes.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.solve_triangular(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 3.0]),
    ...                            lower=True)
    array([1., 2.])
    """
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}{user_location_suffix()}")
    return triangular_solve_p(_operand(a), _operand(b), lower=bool(lower),
                              trans=trans not in (0, "N"), unit_diagonal=bool(unit_diagonal))


def solve(a, b):
    """numpy.linalg.solve: x with a @ x == b (b a vector when 1-D; batch axes broadcast).

    Raises LinAlgError for a singular matrix.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))
    array([1. , 0.5])
    """
    return solve_p(_operand(a), _operand(b))


def inv(a):
    """numpy.linalg.inv; raises LinAlgError for a singular matrix.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
    array([[0.5 , 0.  ],
           [0.  , 0.25]])
    """
    return inv_p(_operand(a))


def det(a):
    """numpy.linalg.det; its gradient is det(a) * inv(a).T (inf/nan where a is singular).

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))
    array(5.)
    """
    return det_p(_operand(a))


def slogdet(a) -> SlogdetResult:
    """numpy.linalg.slogdet: (sign, logabsdet) with det(a) == sign * exp(logabsdet).

    Only logabsdet has a gradient (inv(a).T); the sign is constant where it is defined.

    >>> import numpy as np, tracegrad as tg
    >>> sign, logabsdet = tg.linalg.slogdet(np.array([[0.0, 2.0], [3.0, 0.0]]))
    >>> float(sign), round(float(logabsdet), 6)
    (-1.0, 1.791759)
    """
    a = _operand(a)
    return SlogdetResult(slogdet_sign_p(a), logabsdet_p(a))

