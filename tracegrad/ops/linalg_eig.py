"""The general (non-symmetric) eigendecomposition: `eig` and `eigvals` (issue 26).

`eig` is one primitive whose output packs [w; V] into a complex (..., n + 1, n)
array (eigenvalues, then the unit-norm eigenvectors as columns; LAPACK geev's
through NumPy), always complex as in JAX and PyTorch. Its vjp rule is JAX's
convention (the transpose of the jvp): for the eigenvalues JAX's
dw = diag(V^-1 dA V), transposed to V^-T diag(gw) V^T; for the eigenvectors (which
JAX does not differentiate) the conjugate of PyTorch's linalg_eig_backward, so
eager mode, which conjugates around every node, gets PyTorch's gradient exactly.
A real A gets the real part. The eigenvectors are defined up to a phase each: a
loss that depends on the phases has no gradient, and eager backward raises
PyTorch's error for it (compiled code cannot check values).

`solve_general` is A^-1 B for real or complex square A (np.linalg.solve), which the
rule needs; its vjps (B: A^-T g; A: -(A^-T g) X^T) hold for complex values too.

    >>> import numpy as np
    >>> from tracegrad.ops import linalg_eig as E
    >>> w, v = E.eig(np.array([[2.0, 0.0], [0.0, 3.0]]))
    >>> w
    array([2.+0.j, 3.+0.j])
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from tracegrad.ops import blas_threads
from tracegrad.ops import table as T
from tracegrad.ops.complex_ops import complex_dtype, conj, real
from tracegrad.ops.core import Aval, DTypeError, aval_of, op_error, primitive
from tracegrad.ops.linalg import LinAlgError, _mT, _row, _rows, _square
from tracegrad.ops.rulekit import as_aval


def _eig_dtype(name: str, a: Aval) -> np.dtype:
    if a.dtype.kind in "biu":
        return np.dtype(np.complex128)
    if a.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise op_error(
            name, [a], f"expected float or complex matrices, got {a.dtype}", cls=DTypeError
        )
    return complex_dtype(a.dtype)


def _eig_rule(a):
    a = _square("eig", a)
    n = a.shape[-1]
    return Aval(tuple(a.shape[:-2]) + (n + 1, n), _eig_dtype("eig", a))


def _eig_impl(a):
    a = np.asarray(a)
    dtype = _eig_dtype("eig", Aval(a.shape, a.dtype))
    blas_threads.follow_load()
    try:
        w, v = np.linalg.eig(a.astype(np.float64) if a.dtype.kind in "biu" else a)
    except np.linalg.LinAlgError:
        raise LinAlgError("eig: the algorithm did not converge") from None
    return np.concatenate([w[..., None, :], v], axis=-2).astype(dtype)


def _eye(x, n: int) -> np.ndarray:
    """The identity in the real dtype of x (so complex64 stays complex64)."""
    dtype = np.dtype(aval_of(x).dtype)
    return np.eye(n, dtype=np.empty(0, dtype).real.dtype if dtype.kind in "fc" else None)


def _diag_embed(v):
    n = np.shape(v)[-1]
    return T.mul(T.reshape(v, shape=tuple(np.shape(v))[:-1] + (1, n)), _eye(v, n))


def _diagonal(x):
    n = np.shape(x)[-1]
    return T.sum_(T.mul(x, _eye(x, n)), axis=-1)


def _mH(x):
    return conj(_mT(x))


def _check_gauge(vh_gv) -> None:
    """PyTorch's check: the loss must not depend on the eigenvectors' phases."""
    if type(vh_gv) is not np.ndarray:
        return  # (traced or recorded values: no check)
    diag = np.diagonal(vh_gv, axis1=-2, axis2=-1)
    if np.any(np.abs(diag.imag) > 1e-5 * np.maximum(1.0, np.abs(diag))):
        raise RuntimeError(
            "linalg_eig_backward: The eigenvectors in the complex case are specified up to "
            "multiplication by e^{i phi}. The specified loss function depends on this "
            "quantity, so it is ill-defined."
        )


def _torch_eig_backward(gw, gv, w, v):
    """PyTorch's linalg_eig_backward: gA = V^-H (diag(gw) + (V^H gV - V^H V
    diag(Re diag(V^H gV))) / conj(E)) V^H, E_ij = w_j - w_i (1 on the diagonal)."""
    n = np.shape(w)[-1]
    eye = _eye(w, n)
    shape = tuple(np.shape(w))
    wc = conj(w)
    e_conj = T.add(
        T.sub(T.reshape(wc, shape=shape[:-1] + (1, n)), T.reshape(wc, shape=shape + (1,))), eye
    )
    vh_gv = T.matmul(_mH(v), gv)
    _check_gauge(vh_gv)
    re_diag = real(_diagonal(vh_gv))
    scaled = T.mul(v, T.reshape(re_diag, shape=tuple(np.shape(re_diag))[:-1] + (1, n)))
    inner = T.div(T.sub(vh_gv, T.matmul(_mH(v), scaled)), e_conj)
    inner = T.add(T.mul(inner, 1.0 - eye), _diag_embed(gw))  # the diagonal is gw
    return solve_general(_mH(v), T.matmul(inner, _mH(v)))


def _eig_vjp(g, out, a):
    n = np.shape(a)[-1]
    w, v = _row(out, 0), _rows(out, 1, n + 1)
    gw, gv = _row(g, 0), _rows(g, 1, n + 1)
    # JAX's convention is the conjugate of PyTorch's: conj(torch_rule(conj(g)))
    return conj(_torch_eig_backward(conj(gw), conj(gv), w, v))


eig_p = primitive(  # packed [w; V]: eigenvalues and unit eigenvectors of a general A
    "eig",
    impl=_eig_impl,
    shape_rule=_eig_rule,
    kind="other",
    vjps=(_eig_vjp,),
    torch_name="LinalgEigBackward0",
    saves=("out",),
    codegen="numpy",  # LAPACK geev through NumPy, between kernel segments
)


# --------------------------------------------------------------- solve_general


def _solve_rule(a, b):
    a, b = _square("solve_general", a), as_aval(b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise op_error("solve_general", [a, b], f"b must have {a.shape[-1]} rows")
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype.kind in "biu":
        dtype = np.dtype(np.float64)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + tuple(b.shape[-2:])
    return Aval(tuple(shape), np.dtype(dtype))


def _solve_impl(a, b):
    dtype = _solve_rule(aval_of(a), aval_of(b)).dtype
    try:
        return np.linalg.solve(np.asarray(a, dtype), np.asarray(b, dtype))
    except np.linalg.LinAlgError:
        raise LinAlgError("solve_general: the matrix is singular") from None


def _solve_vjp_b(g, out, a, b):
    return solve_general(_mT(a), g)


def _solve_vjp_a(g, out, a, b):
    return T.neg(T.matmul(solve_general(_mT(a), g), _mT(out)))


solve_general = primitive(  # A^-1 B for real or complex A (..., n, n), B (..., n, k)
    "solve_general",
    impl=_solve_impl,
    shape_rule=_solve_rule,
    kind="other",
    vjps=(_solve_vjp_a, _solve_vjp_b),
    torch_name="LinalgSolveExBackward0",
    saves=(0, "out"),
    codegen="numpy",
)


# ------------------------------------------------------------------ det_general


def _det_rule(a):
    a = _square("det_general", a)
    return Aval(tuple(a.shape[:-2]), _solve_rule(a, Aval(a.shape, a.dtype)).dtype)


def _det_impl(a):
    dtype = _det_rule(aval_of(a)).dtype
    blas_threads.follow_load()
    return np.asarray(np.linalg.det(np.asarray(a, dtype)), dtype)


def _det_vjp(g, out, a):
    # d det = det tr(A^-1 dA): the transpose is g det A^-T (holomorphic: no conjugates)
    n = np.shape(a)[-1]
    scale = T.reshape(T.mul(g, out), shape=tuple(np.shape(out)) + (1, 1))
    return T.mul(scale, _mT(solve_general(a, _eye(a, n))))


det_general = primitive(  # the determinant of real or complex square matrices
    "det_general",
    impl=_det_impl,
    shape_rule=_det_rule,
    kind="other",
    vjps=(_det_vjp,),
    torch_name="LinalgDetBackward0",
    saves=(0, "out"),
    codegen="numpy",
)


# ------------------------------------------------------------------- public


def inv_general(a):
    """A^-1 of real or complex square matrices (tracegrad.linalg.inv of complex A)."""
    n = np.shape(a)[-1]
    return solve_general(a, _eye(a, n))


def solve_any(a, b):
    """numpy.linalg.solve's rule (b is a vector when 1-D) for real or complex A."""
    if np.ndim(b) == 1:
        column = solve_general(a, T.reshape(b, shape=(np.shape(b)[0], 1)))
        return T.reshape(column, shape=tuple(np.shape(column))[:-1])
    return solve_general(a, b)


EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def eig(a):
    """numpy.linalg.eig: (eigenvalues, eigenvectors as columns), always complex.

    Differentiable in both (see the module docstring for the conventions)."""
    n = np.shape(a)[-1]
    packed = eig_p(a)
    return EigResult(_row(packed, 0), _rows(packed, 1, n + 1))


def eigvals(a):
    """numpy.linalg.eigvals: the eigenvalues (complex), with JAX's gradient."""
    return _row(eig_p(a), 0)
