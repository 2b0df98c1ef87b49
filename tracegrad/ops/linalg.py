"""Linear algebra primitives: cholesky, triangular_solve, solve, inv, det, slogdet, and the
decompositions eigh, eigvalsh, qr, svd, svdvals with pinv and lstsq (second half).

Each one is defined once, like the primitives of tracegrad/ops/table.py (whose
end imports this module, so they are in the rule table): a NumPy/LAPACK
implementation, a shape rule, vector-Jacobian rules written in tracegrad ops
(they call these very primitives, so grad of grad works in both modes) and
PyTorch's backward node names.

Conventions:
  - Operands are (..., n, n) matrices (batched over leading axes); int and
    bool operands compute in float64, float32 stays float32 (NumPy's rules).
  - `cholesky`, `eigh` and `eigvalsh` read the symmetric part (A + A^T) / 2 of
    their operand, as JAX's do, so its gradient is symmetric and is the true gradient in every
    direction (NumPy reads the lower triangle; on symmetric input both agree).
  - `triangular_solve` has scipy.linalg.solve_triangular's semantics: it solves
    op(A) x = b with op(A) = A or A^T, reading only A's lower or upper triangle.
  - `slogdet` is two primitives: a sign (no gradient) and log|det|.
  - A matrix that is not positive definite (cholesky) or singular (solve, inv,
    triangular_solve) raises `LinAlgError` naming the op and the operand
    shapes, also from compiled code.

Code generation: all but pinv and lstsq run inside the compiled kernel
(tracegrad/codegen/linalg_emit.py: LAPACK potrf/getrf/getrs/getri/syevd/gesdd/
geqrf/orgqr and BLAS trsm/trmm of NumPy's own OpenBLAS, called from njit through
tracegrad/runtime/lapack.py), so a graph of them is one njit call; pinv, lstsq
and svd with full_matrices=True run their NumPy impl between njit segments. Empty
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

from tracegrad.ops import blas_threads, numpy_blas
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
        raise op_error(
            name, list(avals), f"expected float32 or float64 matrices, got {dtype}", cls=DTypeError
        )
    return np.dtype(dtype)


def _square(name: str, a: Any) -> Aval:
    a = as_aval(a)
    if a.ndim < 2:
        raise op_error(
            name, [a], f"expected a matrix or a batch of matrices, got a {a.ndim}-D array"
        )
    if a.shape[-1] != a.shape[-2]:
        raise op_error(
            name, [a], f"expected square matrices, got {a.shape[-2]}x{a.shape[-1]} matrices"
        )
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
        raise op_error(
            name, [a, b], "a batch of matrices needs b (..., n, k) with the same batch axes"
        )
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
    if (
        type(first) is np.ndarray
        and first.ndim >= 2
        and first.shape[-1] == first.shape[-2]
        and all(type(a) is np.ndarray and a.dtype == first.dtype for a in arrays)
        and first.dtype in (np.float32, np.float64)
    ):
        return arrays  # the common case, checked without building avals
    avals = [aval_of(a) for a in arrays]
    _square(name, avals[0])  # NumPy's own errors would be reported as a singular matrix
    dtype = _linalg_dtype(name, *avals)
    return [np.asarray(a, dtype=dtype) for a in arrays]


def _failure(name: str, operands, reason: str) -> LinAlgError:
    shapes = ", ".join(
        f"{dtype_short(np.asarray(o).dtype)}[{','.join(map(str, np.shape(o)))}]" for o in operands
    )
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
        raise _failure(
            "cholesky", [a], "the matrix is not positive definite" + _leading_minor(sym)
        ) from None
    if not np.isfinite(low).all() and np.isfinite(sym).all():
        raise _failure("cholesky", [a], "the matrix is not positive definite")
    return np.ascontiguousarray(np.swapaxes(low, -1, -2)) if upper else low


def _solve_one_triangular(a, b, lower, trans, unit_diagonal):
    """One (n, n) system, on NumPy's OpenBLAS where it has trsm (ops/numpy_blas.py:
    SciPy's copy would start a second spinning thread pool), else scipy.linalg."""
    x = numpy_blas.trsm(a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    if x is not None:
        return x
    return np.asarray(
        _scipy_linalg().solve_triangular(
            a, b, lower=lower, trans=int(trans), unit_diagonal=unit_diagonal, check_finite=False
        )
    )


def _triangular_solve_impl(a, b, lower=True, trans=False, unit_diagonal=False):
    a, b = _as_float("triangular_solve", a, b)
    triangular_solve_p.shape_rule(aval_of(a), aval_of(b))  # scipy would batch b alone
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    if not unit_diagonal and (diag == 0).any():
        raise _failure(
            "triangular_solve", [a, b], "the matrix is singular (a zero on its diagonal)"
        )
    if a.ndim == 2:
        return _solve_one_triangular(a, b, lower, trans, unit_diagonal)
    out = np.empty(b.shape, a.dtype)
    for i in np.ndindex(*a.shape[:-2]):
        out[i] = _solve_one_triangular(a[i], b[i], lower, trans, unit_diagonal)
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
        return np.linalg.solve(
            np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
        )
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
    y = triangular_solve_p(low, s, lower=True, trans=True)  # L^-T S
    ga = triangular_solve_p(low, _mT(y), lower=True, trans=True)  # L^-T S L^-1
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
    "cholesky",
    impl=_cholesky_impl,
    shape_rule=_square_rule("cholesky"),
    kind="other",
    vjps=(_cholesky_vjp,),
    torch_name="LinalgCholeskyExBackward0",
    saves=("out",),
    codegen="cholesky",
)

triangular_solve_p = primitive(  # x with op(A) x = b, op(A) = A or A^T (trans), A triangular
    "triangular_solve",
    impl=_triangular_solve_impl,
    shape_rule=_solve_rule("triangular_solve", batch_broadcasts=False),
    kind="other",
    vjps=(_triangular_solve_vjp_a, _triangular_solve_vjp_b),
    torch_name="LinalgSolveTriangularBackward0",
    saves=(0, "out"),
    codegen="triangular_solve",
)

triangular_matmul_p = primitive(  # op(A) @ b, A triangular (only that triangle is read)
    "triangular_matmul",
    impl=_triangular_matmul_impl,
    shape_rule=_solve_rule("triangular_matmul", batch_broadcasts=False),
    kind="other",
    vjps=(_triangular_matmul_vjp_a, _triangular_matmul_vjp_b),
    torch_name="TriangularMatmulBackward0",
    saves=(0, 1),
    codegen="triangular_matmul",
)

solve_p = primitive(  # x with A x = b; b is a vector when 1-D, batch axes broadcast
    "solve",
    impl=_solve_impl,
    shape_rule=_solve_rule("solve", batch_broadcasts=True),
    kind="other",
    vjps=(_solve_vjp_a, _solve_vjp_b),
    torch_name="LinalgSolveExBackward0",
    saves=(0, "out"),
    codegen="solve",
)

inv_p = primitive(
    "inv",
    impl=_inv_impl,
    shape_rule=_square_rule("inv"),
    kind="other",
    vjps=(_inv_vjp,),
    torch_name="LinalgInvExBackward0",
    saves=("out",),
    codegen="inv",
)

det_p = primitive(
    "det",
    impl=_det_impl,
    shape_rule=_square_rule("det", drop_matrix_axes=True),
    kind="other",
    vjps=(_det_vjp,),
    torch_name="LinalgDetBackward0",
    saves=(0, "out"),
    codegen="det",
)

slogdet_sign_p = primitive(  # the sign of det(A): -1, 0 or 1, no gradient
    "slogdet_sign",
    impl=_slogdet_sign_impl,
    shape_rule=_square_rule("slogdet", drop_matrix_axes=True),
    kind="other",
    nondiff=True,
    vjps=(no_grad,),
    torch_name=None,
    saves=(),
    codegen="slogdet_sign",
)

logabsdet_p = primitive(  # log|det(A)|
    "logabsdet",
    impl=_logabsdet_impl,
    shape_rule=_square_rule("slogdet", drop_matrix_axes=True),
    kind="other",
    vjps=(_logabsdet_vjp,),
    torch_name="LinalgSlogdetBackward0",
    saves=(0,),
    codegen="logabsdet",
)


# ------------------------------------------------------- NumPy-named functions
# tracegrad.linalg.<name> (tracegrad/ops/api.py), np.linalg.<name> on tracers
# (tracegrad/tracing.py) and torch.linalg.<name> (tracegrad/eager/linalg.py).

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

PUBLIC = (
    "cholesky",
    "solve",
    "inv",
    "det",
    "slogdet",
    "solve_triangular",
    "eigh",
    "eigvalsh",
    "qr",
    "svd",
    "svdvals",
    "pinv",
    "lstsq",
    "matrix_rank",
)


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
        raise ValueError(
            f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
            f"{trans!r}{user_location_suffix()}"
        )
    return triangular_solve_p(
        _operand(a),
        _operand(b),
        lower=bool(lower),
        trans=trans not in (0, "N"),
        unit_diagonal=bool(unit_diagonal),
    )


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


# =================================================== decompositions (eigh, qr, svd, ...)
# A primitive has one output, so eigh, qr and svd return their factors packed in
# one array along the matrix-row axis, and the NumPy-named functions slice them
# apart (one LAPACK call for all the factors; the slices' vjps put each factor's
# cotangent back in place, zeros for an unused one):
#   eigh (..., n+1, n)        row 0: the eigenvalues w (ascending), rows 1..n: V
#   qr   (..., m+n, kq)       rows :m: Q (m, kq), rows m: : R^T (n, kq)
#   svd  (..., m+1+n, w)      rows :m: U, row m: s, rows m+1: : V = Vh^T, columns
#                             padded with zeros to w = max of U's and V's widths
# Their vjps are PyTorch's (FunctionsManual.cpp: linalg_eig_backward for the
# Hermitian case, linalg_qr_backward, svd_backward, pinv_backward,
# linalg_lstsq_backward), real case, in tracegrad ops.


def _any_matrix(name: str, a: Any) -> Aval:
    a = as_aval(a)
    if a.ndim < 2:
        raise op_error(
            name, [a], f"expected a matrix or a batch of matrices, got a {a.ndim}-D array"
        )
    return a


def _rows(x, start: int, stop: int):
    """x[..., start:stop, :] (a static slice of the matrix-row axis)."""
    shape = tuple(np.shape(x))
    spec = tuple(("slice", 0, d, 1) for d in shape[:-2]) + (
        ("slice", start, stop, 1),
        ("slice", 0, shape[-1], 1),
    )
    return T.getitem(x, spec=spec)


def _row(x, i: int):
    """x[..., i, :]."""
    shape = tuple(np.shape(x))
    spec = tuple(("slice", 0, d, 1) for d in shape[:-2]) + (i, ("slice", 0, shape[-1], 1))
    return T.getitem(x, spec=spec)


def _cols(x, stop: int):
    """x[..., :stop] (unchanged when it has `stop` columns)."""
    shape = tuple(np.shape(x))
    if shape[-1] == stop:
        return x
    spec = tuple(("slice", 0, d, 1) for d in shape[:-1]) + (("slice", 0, stop, 1),)
    return T.getitem(x, spec=spec)


def _diag_embed(v):
    """A batch of diagonal matrices from (..., n) vectors."""
    n = np.shape(v)[-1]
    return T.mul(
        T.reshape(v, shape=tuple(np.shape(v))[:-1] + (1, n)), np.eye(n, dtype=aval_of(v).dtype)
    )


def _column_scale(x, v):
    """x * v[..., None, :]: scale column j of x by v_j."""
    return T.mul(x, T.reshape(v, shape=tuple(np.shape(v))[:-1] + (1, np.shape(v)[-1])))


def _row_scale(x, v):
    """x * v[..., :, None]: scale row i of x by v_i."""
    return T.mul(x, T.reshape(v, shape=tuple(np.shape(v)) + (1,)))


def _pairwise_reciprocal(d):
    """F[..., i, j] = 1 / (d_j - d_i) off the diagonal, 0 on it (PyTorch's E with a filled
    diagonal; infinite where two values are equal: the vectors are then not unique)."""
    n = np.shape(d)[-1]
    eye = np.eye(n, dtype=aval_of(d).dtype)
    shape = tuple(np.shape(d))
    diff = T.sub(T.reshape(d, shape=shape[:-1] + (1, n)), T.reshape(d, shape=shape + (1,)))
    return T.div(1.0 - eye, T.add(diff, eye))


def _skew(x):
    return T.sub(x, _mT(x))


def _right_solve_upper_t(g, r):
    """g R^{-T} for upper-triangular R (PyTorch: solve_triangular(R^H, g, left=False))."""
    return _mT(triangular_solve_p(r, _mT(g), lower=False, trans=False))


def _lapack_failure(name: str, a, call):
    try:
        return call()
    except np.linalg.LinAlgError:
        raise _failure(name, [a], "the algorithm did not converge") from None


# ----------------------------------------------------------------------- eigh


def _eigh_rule(a, lower=True):
    a = _square("eigh", a)
    n = a.shape[-1]
    return Aval(tuple(a.shape[:-2]) + (n + 1, n), _linalg_dtype("eigh", a))


def _eigvalsh_rule(a, lower=True):
    a = _square("eigvalsh", a)
    return Aval(tuple(a.shape[:-1]), _linalg_dtype("eigvalsh", a))


def _symmetric_part(a: np.ndarray) -> np.ndarray:
    sym = np.add(a, np.swapaxes(a, -1, -2))
    sym *= a.dtype.type(0.5)
    return sym


def _eigh_impl(a, lower=True):
    # (UPLO on the symmetric part: the same LAPACK call as NumPy's, so the same signs)
    (a,) = _as_float("eigh", a)
    w, v = _lapack_failure(
        "eigh", a, lambda: np.linalg.eigh(_symmetric_part(a), UPLO="L" if lower else "U")
    )
    return np.concatenate([w[..., None, :], v], axis=-2)


def _eigvalsh_impl(a, lower=True):
    (a,) = _as_float("eigvalsh", a)
    return _lapack_failure(
        "eigvalsh", a, lambda: np.linalg.eigvalsh(_symmetric_part(a), UPLO="L" if lower else "U")
    )


def _eigh_vjp(g, out, a, lower=True):
    # PyTorch's linalg_eig_backward (Hermitian): gA = V (skew(V^T gV)/2 / E + diag(gw)) V^T,
    # E_ij = w_j - w_i. Symmetric, and the true gradient: the impl reads (A + A^T) / 2, as
    # JAX's (and tracegrad's cholesky) do; PyTorch's and JAX's on symmetric input.
    n = np.shape(a)[-1]
    w, v = _row(out, 0), _rows(out, 1, n + 1)
    gw, gv = _row(g, 0), _rows(g, 1, n + 1)
    inner = T.mul(T.mul(_skew(T.matmul(_mT(v), gv)), 0.5), _pairwise_reciprocal(w))
    inner = T.add(inner, _diag_embed(gw))
    return T.matmul(T.matmul(v, inner), _mT(v))


def _eigvalsh_vjp(g, out, a, lower=True):
    v = _rows(eigh_p(a, lower=lower), 1, np.shape(a)[-1] + 1)
    return T.matmul(_column_scale(v, g), _mT(v))  # V diag(gw) V^T


eigh_p = primitive(  # packed [w; V]: eigenvalues (ascending) and eigenvectors of a symmetric A
    "eigh",
    impl=_eigh_impl,
    shape_rule=_eigh_rule,
    kind="other",
    vjps=(_eigh_vjp,),
    torch_name="LinalgEighBackward0",
    saves=("out",),
    codegen="eigh",
)

eigvalsh_p = primitive(  # the eigenvalues of a symmetric A, ascending
    "eigvalsh",
    impl=_eigvalsh_impl,
    shape_rule=_eigvalsh_rule,
    kind="other",
    vjps=(_eigvalsh_vjp,),
    torch_name="LinalgEighBackward0",
    saves=(0,),
    codegen="eigvalsh",
)


# ------------------------------------------------------------------------- qr

QR_MODES = ("reduced", "complete", "r")


def _qr_width(m: int, n: int, mode: str) -> int:
    return m if mode == "complete" else min(m, n)


def _qr_rule(a, mode="reduced"):
    a = _any_matrix("qr", a)
    m, n = a.shape[-2:]
    return Aval(tuple(a.shape[:-2]) + (m + n, _qr_width(m, n, mode)), _linalg_dtype("qr", a))


def _qr_impl(a, mode="reduced"):
    blas_threads.follow_load()
    a = np.asarray(a)
    a = a.astype(_linalg_dtype("qr", _any_matrix("qr", aval_of(a))), copy=False)
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    return np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2)


class QRNotDifferentiable(TracegradError, RuntimeError):
    """The QR decomposition has no derivative in this mode (PyTorch's texts)."""


def _qr_vjp(g, out, a, mode="reduced"):
    m, n = np.shape(a)[-2:]
    if mode == "r":
        raise QRNotDifferentiable(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
            "through linalg.qr."
        )
    if mode == "complete" and m > n:
        raise QRNotDifferentiable(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    q, r = _rows(out, 0, m), _mT(_rows(out, m, m + n))
    gq, gr = _rows(g, 0, m), _mT(_rows(g, m, m + n))
    # PyTorch's linalg_qr_backward, with gQ and gR both given (an unused one is zeros)
    core = T.sub(T.matmul(gr, _mT(r)), T.matmul(_mT(q), gq))
    if m >= n:
        upper = _mask(core, lower=False)
        sym = T.sub(
            T.add(upper, _mT(upper)),
            _diag_embed(
                T.diagonal(upper, offset=0, axis1=np.ndim(upper) - 2, axis2=np.ndim(upper) - 1)
            ),
        )
        # (syminvadj: X + X^T with the diagonal once)
        return _right_solve_upper_t(T.add(T.matmul(q, sym), gq), r)
    ga = T.matmul(q, _mask(_skew(T.neg(core)), lower=True))  # trilImInvAdjSkew(-core)
    ga = _right_solve_upper_t(ga, _cols(r, m))
    zeros = np.zeros(tuple(np.shape(ga))[:-1] + (n - m,), dtype=aval_of(ga).dtype)
    ga = T.concatenate(ga, zeros, axis=np.ndim(ga) - 1)
    return T.add(ga, T.matmul(q, gr))


qr_p = primitive(  # packed [Q; R^T]; mode "r" is "reduced" whose gradient raises (PyTorch's)
    "qr",
    impl=_qr_impl,
    shape_rule=_qr_rule,
    kind="other",
    vjps=(_qr_vjp,),
    torch_name="LinalgQrBackward0",
    saves=("out",),
    codegen="qr",
)


# ------------------------------------------------------------------------ svd


def _svd_widths(m: int, n: int, full_matrices: bool) -> tuple:
    k = min(m, n)
    return (m, n) if full_matrices else (k, k)


def _svd_rule(a, full_matrices=False):
    a = _any_matrix("svd", a)
    m, n = a.shape[-2:]
    width = max(_svd_widths(m, n, full_matrices))
    return Aval(tuple(a.shape[:-2]) + (m + 1 + n, width), _linalg_dtype("svd", a))


def _svdvals_rule(a):
    a = _any_matrix("svdvals", a)
    return Aval(tuple(a.shape[:-2]) + (min(a.shape[-2:]),), _linalg_dtype("svdvals", a))


def _as_float_any(name: str, a) -> np.ndarray:
    blas_threads.follow_load()
    a = np.asarray(a)
    return a.astype(_linalg_dtype(name, _any_matrix(name, aval_of(a))), copy=False)


def _pad_columns(x: np.ndarray, width: int) -> np.ndarray:
    if x.shape[-1] == width:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, width - x.shape[-1])]
    return np.pad(x, pad)


def _svd_impl(a, full_matrices=False):
    a = _as_float_any("svd", a)
    out_aval = _svd_rule(aval_of(a), full_matrices)
    u, s, vh = _lapack_failure("svd", a, lambda: np.linalg.svd(a, full_matrices=full_matrices))
    width = out_aval.shape[-1]
    parts = [u, s[..., None, :], np.swapaxes(vh, -1, -2)]
    return np.concatenate([_pad_columns(p, width) for p in parts], axis=-2)


def _svdvals_impl(a):
    a = _as_float_any("svdvals", a)
    return _lapack_failure("svdvals", a, lambda: np.linalg.svd(a, compute_uv=False))


def _svd_parts(packed, m: int, n: int):
    """(U, s, V) of the reduced SVD from a packed one (full matrices: the first k columns,
    as PyTorch's backward narrows them: the rest are an arbitrary basis)."""
    k = min(m, n)
    return (
        _cols(_rows(packed, 0, m), k),
        _row(_cols(packed, k), m),
        _cols(_rows(packed, m + 1, m + 1 + n), k),
    )


def _svd_vjp(g, out, a, full_matrices=False):
    # PyTorch's svd_backward (real case; distinct singular values, full rank if m != n)
    m, n = np.shape(a)[-2:]
    u, s, v = _svd_parts(out, m, n)
    gu, gs, gv = _svd_parts(g, m, n)
    uhgu, vhgv = _skew(T.matmul(_mT(u), gu)), _skew(T.matmul(_mT(v), gv))
    inner = T.mul(
        T.add(_column_scale(uhgu, s), _row_scale(vhgv, s)), _pairwise_reciprocal(T.mul(s, s))
    )
    inner = T.add(inner, _diag_embed(gs))
    vh = _mT(v)
    if m > n:  # gA = [U inner + (I - U U^T) gU S^-1] V^T
        gu_sinv = T.div(gu, T.reshape(s, shape=tuple(np.shape(s))[:-1] + (1, np.shape(s)[-1])))
        ga = T.add(T.matmul(u, inner), T.sub(gu_sinv, T.matmul(u, T.matmul(_mT(u), gu_sinv))))
        return T.matmul(ga, vh)
    if m < n:  # gA = U [inner V^T + S^-1 gV^T (I - V V^T)]
        sinv_gvh = T.div(_mT(gv), T.reshape(s, shape=tuple(np.shape(s)) + (1,)))
        ga = T.add(T.matmul(inner, vh), T.sub(sinv_gvh, T.matmul(T.matmul(sinv_gvh, v), vh)))
        return T.matmul(u, ga)
    return T.matmul(T.matmul(u, inner), vh)


def _svdvals_vjp(g, out, a):
    m, n = np.shape(a)[-2:]
    u, _, v = _svd_parts(svd_p(a, full_matrices=False), m, n)
    return T.matmul(_column_scale(u, g), _mT(v))  # U diag(gs) V^T


svd_p = primitive(  # packed [U; s; V] (V = Vh^T), columns padded to the wider factor
    "svd",
    impl=_svd_impl,
    shape_rule=_svd_rule,
    kind="other",
    vjps=(_svd_vjp,),
    torch_name="LinalgSvdBackward0",
    saves=("out",),
    codegen="svd",
)

svdvals_p = primitive(  # the singular values, descending
    "svdvals",
    impl=_svdvals_impl,
    shape_rule=_svdvals_rule,
    kind="other",
    vjps=(_svdvals_vjp,),
    torch_name="LinalgSvdBackward0",
    saves=(0,),
    codegen="svdvals",
)


# -------------------------------------------------------------- pinv, lstsq


def _pinv_rule(a, atol=0.0, rtol=None, hermitian=False):
    a = _any_matrix("pinv", a)
    return Aval(tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), _linalg_dtype("pinv", a))


def _pinv_impl(a, atol=0.0, rtol=None, hermitian=False):
    """Singular values <= max(atol, rtol * largest) count as zero (PyTorch's rule; rtol None:
    max(m, n) * eps, NumPy's and PyTorch's default)."""
    a = _as_float_any("pinv", a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    if rtol is None:
        rtol = max(m, n) * np.finfo(a.dtype).eps if not atol else 0.0
    u, s, vh = _lapack_failure("pinv", a, lambda: np.linalg.svd(a, full_matrices=False))
    cutoff = np.maximum(atol, rtol * s[..., :1])
    keep = s > cutoff
    s_inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0).astype(a.dtype)
    return np.matmul(np.swapaxes(vh, -1, -2) * s_inv[..., None, :], np.swapaxes(u, -1, -2))


def _pinv_backward(g, pinv_a, a):
    """PyTorch's pinv_backward (the gradient of A -> pinv(A), where the rank is constant)."""
    m, n = np.shape(a)[-2:]
    pinv_at, gt = _mT(pinv_a), _mT(g)
    mm = T.matmul
    if m <= n:
        k = mm(gt, pinv_a)
        k_pinv_at = mm(k, pinv_at)
        return T.add(
            T.sub(T.sub(k_pinv_at, _mT(mm(pinv_a, k))), mm(mm(a, pinv_a), k_pinv_at)),
            mm(mm(pinv_at, pinv_a), T.sub(gt, mm(k, a))),
        )
    k = mm(pinv_a, gt)
    pinv_at_k = mm(pinv_at, k)
    return T.add(
        T.sub(T.sub(pinv_at_k, _mT(mm(k, pinv_a))), mm(mm(pinv_at_k, pinv_a), a)),
        mm(mm(T.sub(gt, mm(a, k)), pinv_a), pinv_at),
    )


def _pinv_vjp(g, out, a, atol=0.0, rtol=None, hermitian=False):
    return _pinv_backward(g, out, a)


pinv_p = primitive(  # the Moore-Penrose pseudo-inverse
    "pinv",
    impl=_pinv_impl,
    shape_rule=_pinv_rule,
    kind="other",
    vjps=(_pinv_vjp,),
    torch_name="LinalgPinvBackward0",
    saves=(0, "out"),
    codegen="numpy",
)


def _lstsq_rule(a, b, rcond=None):
    a, b = _any_matrix("lstsq", a), as_aval(b)
    m, n = a.shape[-2:]
    if b.ndim == 0 or b.shape[-1 if b.ndim == 1 else -2] != m:
        raise op_error("lstsq", [a, b], f"b must have {m} rows for {m}x{n} matrices")
    if b.ndim == 1:
        return Aval(tuple(a.shape[:-2]) + (n,), _linalg_dtype("lstsq", a, b))
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise op_error("lstsq", [a, b], "the batch axes of a and b do not broadcast") from None
    return Aval(tuple(batch) + (n, b.shape[-1]), _linalg_dtype("lstsq", a, b))


def _lstsq_impl(a, b, rcond=None):
    out = _lstsq_rule(aval_of(a), aval_of(b), rcond)
    a, b = _as_float_any("lstsq", a).astype(out.dtype, copy=False), np.asarray(b, out.dtype)
    return np.asarray(np.matmul(_pinv_impl(a, rtol=rcond), b), out.dtype)


def _lstsq_vjp_a(g, out, a, b, rcond=None):
    # PyTorch's linalg_lstsq_backward: gA = pinv_backward(gX B^T, pinv(A), A)
    pinv_a = pinv_p(a, rtol=rcond)
    if np.ndim(b) == 1:  # gX b^T, for a vector b and gX (..., n)
        g_bt = T.mul(
            T.reshape(g, shape=tuple(np.shape(g)) + (1,)), T.reshape(b, shape=(1, np.shape(b)[0]))
        )
    else:
        g_bt = T.matmul(g, _mT(b))
    return _pinv_backward(g_bt, pinv_a, a)


def _lstsq_vjp_b(g, out, a, b, rcond=None):
    pinv_a = pinv_p(a, rtol=rcond)
    if np.ndim(b) == 1 and np.ndim(g) > 1:  # a batch of matrices with one vector b
        shape = tuple(np.shape(g))
        return T.reshape(
            T.matmul(_mT(pinv_a), T.reshape(g, shape=shape + (1,))),
            shape=tuple(np.shape(a))[:-2] + (np.shape(a)[-2],),
        )
    return T.matmul(_mT(pinv_a), g)  # pinv(A)^T gX


lstsq_p = primitive(  # the minimum-norm least-squares solution x of min |A x - b|
    "lstsq",
    impl=_lstsq_impl,
    shape_rule=_lstsq_rule,
    kind="other",
    vjps=(_lstsq_vjp_a, _lstsq_vjp_b),
    torch_name="LinalgLstsqBackward0",
    saves=(0, 1),
    codegen="numpy",
)  # (NumPy between njit segments)


def eigh(a, UPLO: str = "L") -> EighResult:
    """numpy.linalg.eigh: (eigenvalues ascending, eigenvectors as columns) of symmetric a.

    Reads the symmetric part (a + a.T) / 2, as JAX does (and tracegrad's cholesky), so
    the gradient, symmetric, is the true one (PyTorch's and JAX's on symmetric input);
    NumPy reads one triangle, which agrees on symmetric input. UPLO picks the triangle
    LAPACK reads, so the eigenvectors' signs are NumPy's. The gradient is infinite where two eigenvalues are equal
    and a loss depends on their eigenvectors (which are then not unique), and only
    losses that do not depend on each eigenvector's sign have one.

    >>> import numpy as np, tracegrad as tg
    >>> w, v = tg.linalg.eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> w
    array([1., 3.])
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}{user_location_suffix()}")
    packed = eigh_p(_operand(a), lower=UPLO == "L")
    n = np.shape(packed)[-1]
    return EighResult(_row(packed, 0), _rows(packed, 1, n + 1))


def eigvalsh(a, UPLO: str = "L"):
    """numpy.linalg.eigvalsh: the eigenvalues of symmetric a (its symmetric part, as eigh),
    ascending; gradient V diag(g) V^T.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.eigvalsh(np.array([[2.0, 0.0], [0.0, 1.0]]))
    array([1., 2.])
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}{user_location_suffix()}")
    return eigvalsh_p(_operand(a), lower=UPLO == "L")


def qr(a, mode: str = "reduced"):
    """numpy.linalg.qr: (Q, R) for mode 'reduced' or 'complete', R alone for mode 'r'.

    Differentiable where PyTorch's is: not for mode='complete' with more rows than columns.

    >>> import numpy as np, tracegrad as tg
    >>> q, r = tg.linalg.qr(np.array([[3.0, 1.0], [4.0, 2.0]]))
    >>> np.round(np.abs(r), 6)
    array([[5. , 2.2],
           [0. , 0.4]])
    """
    if mode not in QR_MODES:
        raise ValueError(
            f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}{user_location_suffix()}"
        )
    a = _operand(a)
    packed = qr_p(a, mode="complete" if mode == "complete" else "reduced")
    m = np.shape(a)[-2]
    q, r = _rows(packed, 0, m), _mT(_rows(packed, m, np.shape(packed)[-2]))
    return r if mode == "r" else QRResult(q, r)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """numpy.linalg.svd: (U, S, Vh) with a = U @ diag(S) @ Vh, S descending; S alone when
    compute_uv=False (svdvals).

    Gradients assume distinct singular values (and full rank when a is not square), and
    need losses that do not depend on the singular vectors' signs; with full_matrices,
    U's and Vh's extra vectors get no gradient (PyTorch's rule: they are any basis).

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.svd(np.array([[3.0, 0.0], [0.0, -4.0]]), compute_uv=False)
    array([4., 3.])
    """
    a = _operand(a)
    if not compute_uv:
        return svdvals_p(a)
    packed = svd_p(a, full_matrices=bool(full_matrices))
    m, n = np.shape(a)[-2:]
    ku, kv = _svd_widths(m, n, bool(full_matrices))
    k = min(m, n)
    u = _cols(_rows(packed, 0, m), ku)
    s = _row(_cols(packed, k), m)
    vh = _mT(_cols(_rows(packed, m + 1, m + 1 + n), kv))
    return SVDResult(u, s, vh)


def svdvals(x):
    """numpy.linalg.svdvals: the singular values, descending; gradient U diag(g) Vh.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
    array([2., 1.])
    """
    return svdvals_p(_operand(x))


def pinv(a, rcond: Any = None, hermitian: bool = False, *, rtol: Any = None):
    """numpy.linalg.pinv: the pseudo-inverse; singular values <= rcond (or rtol) times the
    largest count as zero (default max(m, n) * eps). Gradient: PyTorch's pinv_backward.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.pinv(np.array([[2.0, 0.0], [0.0, 0.0]]))
    array([[0.5, 0. ],
           [0. , 0. ]])
    """
    tol = rtol if rtol is not None else rcond
    return pinv_p(
        _operand(a), atol=0.0, rtol=None if tol is None else float(tol), hermitian=bool(hermitian)
    )


def matrix_rank(a, tol: Any = None):
    """numpy.linalg.matrix_rank of matrices: the number of singular values above tol
    (default: largest * max(m, n) * eps). No gradient.

    >>> import numpy as np, tracegrad as tg
    >>> tg.linalg.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))
    array(1)
    """
    a = _operand(a)
    m, n = np.shape(a)[-2:]
    if min(m, n) == 0:
        return np.zeros(tuple(np.shape(a))[:-2], np.int64)
    s = svdvals_p(a)
    if tol is None:
        s_max = T.max_(s, axis=(np.ndim(s) - 1,), keepdims=True)
        tol = T.mul(s_max, max(m, n) * np.finfo(aval_of(s).dtype).eps)
    return T.sum_(
        T.astype(T.gt(s, tol), dtype=np.dtype(np.int64)), axis=(np.ndim(s) - 1,), keepdims=False
    )


def lstsq(a, b, rcond: Any = None):
    """numpy.linalg.lstsq: (x, residuals, rank, s) with x the minimum-norm minimizer of
    |a x - b|. Singular values <= rcond * the largest count as zero (default
    max(m, n) * eps). `residuals` (the squared residual norms) is given when m > n
    (NumPy gives it only when the rank is n: an empty array otherwise); x's gradient
    is PyTorch's linalg_lstsq_backward (through pinv).

    >>> import numpy as np, tracegrad as tg
    >>> x, *_ = tg.linalg.lstsq(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
    ...                         np.array([1.0, 2.0, 3.0]))
    >>> x
    array([1., 2.])
    """
    a, b = _operand(a), _operand(b)
    rcond = None if rcond is None else float(rcond)
    x = lstsq_p(a, b, rcond=rcond)
    m, n = np.shape(a)[-2:]
    if m > n:
        r = T.sub(T.matmul(a, x), b)
        residuals = T.sum_(
            T.mul(r, r),
            axis=(np.ndim(r) - 2,) if np.ndim(b) > 1 else (np.ndim(r) - 1,),
            keepdims=False,
        )
        if np.ndim(b) == 1:
            residuals = T.reshape(residuals, shape=tuple(np.shape(residuals)) + (1,))
    else:
        residuals = np.zeros((0,), dtype=aval_of(x).dtype)
    s = svdvals_p(a)
    tol = None
    if rcond is not None:
        tol = T.mul(T.max_(s, axis=(np.ndim(s) - 1,), keepdims=True), rcond)
    return x, residuals, matrix_rank(a, tol), s
