"""torch.linalg on eager tensors, and torch's top-level linear algebra names.

Every function applies a primitive of tracegrad/ops/linalg.py (the same
definition compiled mode traces), with PyTorch's argument conventions, node
names and error texts:

    >>> import tracegrad.eager as torch
    >>> a = torch.tensor([[4.0, 2.0], [2.0, 3.0]], requires_grad=True)
    >>> torch.linalg.cholesky(a).grad_fn.name()
    'LinalgCholeskyExBackward0'

Differences from PyTorch: `slogdet`'s sign has no grad_fn (PyTorch's shares the
logabsdet node); `cholesky_solve` is two triangular solves, so its grad_fn is
`LinalgSolveTriangularBackward0`, not `CholeskySolveBackward0`; `left=False`
solves and torch.linalg.solve's batch-of-vectors form add transposes/reshapes
around the solve node. eigh, qr and svd compute one packed tensor (ops/linalg.py),
so their factors' grad_fn are the slices of it (SelectBackward0/SliceBackward0,
whose next function is LinalgEighBackward0, ...); lstsq's residuals, rank and
singular_values are empty (PyTorch's default CPU driver 'gelsy' gives no
residuals or singular values either); its rank is computed.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from tracegrad.eager._tensor import Tensor, apply_op, tensor
from tracegrad.eager.errors import EagerNotImplementedError, shape_error
from tracegrad.ops import linalg as L
from tracegrad.ops import table as T

__all__ = [
    "LinAlgError",
    "cholesky",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "lstsq",
    "matrix_norm",
    "matrix_rank",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "vector_norm",
]


class LinAlgError(L.LinAlgError, RuntimeError):
    """torch.linalg.LinAlgError: a RuntimeError (as PyTorch's) and tracegrad's LinAlgError."""


_SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
_TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
_EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_QRResult = namedtuple("linalg_qr", ["Q", "R"])
_SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
_LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(x)


def _check_square(op: str, A: Tensor, name: str = "A") -> None:
    if A.ndim < 2:
        raise shape_error(op, f"{op}: The input tensor {name} must have at least 2 dimensions.", A)
    if A.shape[-1] != A.shape[-2]:
        raise shape_error(
            op,
            f"{op}: {name} must be batches of square matrices, but they are "
            f"{A.shape[-2]} by {A.shape[-1]} matrices",
            A,
        )


def _check_matrix(op: str, A: Tensor, name: str = "A") -> None:
    if A.ndim < 2:
        raise shape_error(op, f"{op}: The input tensor {name} must have at least 2 dimensions.", A)


_TORCH_TYPE_NAMES = {
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
    "float16": "Half",
    "float32": "Float",
    "float64": "Double",
}


def _torch_type_name(x: Tensor) -> str:
    """PyTorch's scalar type name in its messages (Long for int64, ...)."""
    return _TORCH_TYPE_NAMES.get(x._data.dtype.name, x._data.dtype.name.capitalize())


def _is_c(x: Tensor) -> bool:
    return x._data.dtype.kind == "c"


def _check_float(op: str, *tensors: Tensor) -> None:
    for x in tensors:
        if x._data.dtype.kind != "f":
            raise shape_error(
                op,
                f"{op}: Expected a floating point or complex tensor as input. "
                f"Got {_torch_type_name(x)}",
                x,
            )


def _apply(op: str, prim, args, attrs, failure: str, name: str | None = None) -> Tensor:
    """apply_op, with tracegrad's LinAlgError re-raised as PyTorch's (text and class)."""
    try:
        return apply_op(prim, args, attrs, name=name)
    except L.LinAlgError:
        raise LinAlgError(failure(args) if callable(failure) else failure) from None


def _not_positive_definite(op: str):
    def text(args) -> str:
        order = L._leading_minor(np.asarray(args[0]._data, dtype=np.float64))
        return (
            f"{op}: The factorization could not be completed because the input is not "
            f"positive-definite{order.replace(' positive definite)', ' positive-definite)')}."
        )

    return text


def _singular_pivot(args) -> str:
    """linalg.inv's text names the first zero pivot of the LU factorization."""
    from scipy.linalg import lapack

    a = np.asarray(args[0]._data, dtype=np.float64)
    for m in a.reshape((-1,) + a.shape[-2:]):
        info = lapack.dgetrf(m)[2]
        if info > 0:
            return (
                f"linalg.inv: The diagonal element {info} is zero, the inversion could not "
                "be completed because the input matrix is singular."
            )
    return "linalg.inv: The inversion could not be completed because the input matrix is singular."


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


# --------------------------------------------------------------- torch.linalg


def cholesky(A, *, upper: bool = False, out=None) -> Tensor:
    """torch.linalg.cholesky: L with A = L L^H (upper=True: L^H), one LinalgCholeskyExBackward0.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.cholesky(torch.tensor([[4.0, 2.0], [2.0, 2.0]]))
    tensor([[2., 0.],
            [1., 1.]])
    """
    A = _t(A)
    _no_out(out, "linalg.cholesky")
    _check_square("linalg.cholesky", A)
    _check_float("linalg.cholesky", A)
    return _apply(
        "linalg.cholesky",
        L.cholesky_p,
        (A,),
        {"upper": bool(upper)},
        _not_positive_definite("linalg.cholesky"),
    )


def solve(A, B, *, left: bool = True, out=None) -> Tensor:
    """torch.linalg.solve: X with A X = B (left=False: X A = B); LinalgSolveExBackward0.

    B is a vector when 1-D or when it has A's shape minus the last axis (PyTorch's rule).

    >>> import tracegrad.eager as torch
    >>> torch.linalg.solve(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.tensor([2.0, 2.0]))
    tensor([1.0000, 0.5000])
    """
    A, B = _t(A), _t(B)
    _no_out(out, "linalg.solve")
    _check_square("linalg.solve", A)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _mT(solve(_mT(A), _mT(B)))
    if _is_c(A) or _is_c(B):  # complex: tracegrad/ops/linalg_eig.py's solve_general
        from tracegrad.ops import linalg_eig as E

        vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
        return (
            E.solve_any(A, B)
            if B.ndim == 1 or not vector
            else E.solve_any(A, B.unsqueeze(-1)).squeeze(-1)
        )
    _check_float("linalg.solve", A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    rows = B.shape[-1] if vector else (B.shape[-2] if B.ndim >= 2 else -1)
    if rows != A.shape[-1]:
        shape_b = f"{B.shape[-1]}" if vector else f"{B.shape[-2]}x{B.shape[-1]}"
        raise shape_error(
            "linalg.solve",
            "linalg.solve: Incompatible shapes of A and B for the "
            f"equation {'Ax = b' if vector else 'AX = B'} "
            f"({A.shape[-2]}x{A.shape[-1]} and {shape_b})",
            A,
            B,
        )
    singular = "torch.linalg.solve: The solver failed because the input matrix is singular."
    if vector and B.ndim > 1:  # a batch of vectors: solve them as (..., n, 1)
        X = _apply("linalg.solve", L.solve_p, (A, B.unsqueeze(-1)), {}, singular)
        return X.squeeze(-1)
    return _apply("linalg.solve", L.solve_p, (A, B), {}, singular)


def inv(A, *, out=None) -> Tensor:
    """torch.linalg.inv (and torch.inverse): one LinalgInvExBackward0 node.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    A = _t(A)
    _no_out(out, "linalg.inv")
    _check_square("linalg.inv", A)
    if _is_c(A):  # complex: tracegrad/ops/linalg_eig.py
        from tracegrad.ops import linalg_eig as E

        return E.inv_general(A)
    _check_float("linalg.inv", A)
    return _apply("linalg.inv", L.inv_p, (A,), {}, _singular_pivot)


def det(A, *, out=None) -> Tensor:
    """torch.linalg.det (and torch.det): one LinalgDetBackward0 node.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.det(torch.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor(5.)
    """
    A = _t(A)
    _no_out(out, "linalg.det")
    _check_square("linalg.det", A)
    if _is_c(A):  # complex: tracegrad/ops/linalg_eig.py
        from tracegrad.ops import linalg_eig as E

        return _apply("linalg.det", E.det_general, (A,), {}, "linalg.det failed")
    _check_float("linalg.det", A)
    return _apply("linalg.det", L.det_p, (A,), {}, "linalg.det failed")


def slogdet(A, *, out=None):
    """torch.linalg.slogdet (and torch.slogdet): (sign, logabsdet); logabsdet's node is
    LinalgSlogdetBackward0 (the sign has no gradient and no grad_fn here).

    >>> import tracegrad.eager as torch
    >>> torch.linalg.slogdet(torch.tensor([[0.0, 2.0], [3.0, 0.0]])).sign
    tensor(-1.)
    """
    A = _t(A)
    _no_out(out, "linalg.slogdet")
    _check_square("linalg.slogdet", A)
    _check_float("linalg.slogdet", A)
    sign = apply_op(L.slogdet_sign_p, (A,), {})
    return _SlogdetResult(sign, apply_op(L.logabsdet_p, (A,), {}))


def solve_triangular(
    A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None
) -> Tensor:
    """torch.linalg.solve_triangular: X with A X = B (left=False: X A = B), A triangular.

    >>> import tracegrad.eager as torch
    >>> A = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> torch.linalg.solve_triangular(A, torch.tensor([[2.0], [3.0]]), upper=False)
    tensor([[1.],
            [2.]])
    """
    A, B = _t(A), _t(B)
    _no_out(out, "linalg.solve_triangular")
    _check_square("linalg.solve_triangular", A)
    _check_float("linalg.solve_triangular", A, B)
    if B.ndim < 2:
        raise shape_error(
            "linalg.solve_triangular",
            "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.",
            B,
        )
    if not left:  # X A = B  <=>  A^T X^T = B^T
        X = _triangular(A, _mT(B), lower=not upper, trans=True, unit=unitriangular)
        return _mT(X)
    return _triangular(A, B, lower=not upper, trans=False, unit=unitriangular)


def _triangular(A, B, lower: bool, trans: bool, unit: bool, name: str | None = None) -> Tensor:
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise shape_error(
            "linalg.solve_triangular",
            "linalg.solve_triangular: Incompatible "
            f"shapes of A and B for the equation AX = B ({n}x{n} and "
            f"{B.shape[-2]}x{B.shape[-1]})",
            A,
            B,
        )
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    if tuple(A.shape[:-2]) != batch:
        A = A.expand(*batch, n, n)
    if tuple(B.shape[:-2]) != batch:
        B = B.expand(*batch, *B.shape[-2:])
    return _apply(
        "linalg.solve_triangular",
        L.triangular_solve_p,
        (A, B),
        {"lower": lower, "trans": trans, "unit_diagonal": bool(unit)},
        "linalg.solve_triangular: The diagonal element is zero, the solve could not "
        "be completed because the input matrix is singular.",
        name=name,
    )


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """torch.linalg.vector_norm: one LinalgVectorNormBackward0 node.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.vector_norm(torch.tensor([3.0, 4.0]))
    tensor(5.)
    """
    from tracegrad.eager import torch_ops

    return torch_ops.norm(_t(x), p=ord, dim=dim, keepdim=keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """torch.linalg.matrix_norm for ord 'fro', 'nuc', 1, -1, 2, -2, inf, -inf.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.matrix_norm(torch.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    from tracegrad.eager import torch_ops

    A = _t(A) if dtype is None else _t(A).to(dtype)
    if A.ndim < 2:
        raise shape_error(
            "linalg.matrix_norm",
            "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.",
            A,
        )
    r, c = (d % A.ndim for d in dim)
    if ord == "fro":
        return torch_ops.norm(A, p=2, dim=(r, c), keepdim=keepdim)
    if ord in (1, -1, np.inf, -np.inf):
        along, across = (r, c) if ord in (1, -1) else (c, r)  # 1: max column sum
        sums = torch_ops.sum(torch_ops.abs(A), dim=along, keepdim=keepdim)
        if not keepdim and along < across:
            across -= 1
        pick = torch_ops.amax if ord > 0 else torch_ops.amin
        return pick(sums, dim=across, keepdim=keepdim)
    if ord in (2, -2, "nuc"):
        rest = [d for d in range(A.ndim) if d not in (r, c)]
        moved = A.permute(*rest, r, c)
        s = svdvals(moved)
        if ord == "nuc":
            res = torch_ops.sum(s, dim=-1)
        else:
            res = (torch_ops.amax if ord == 2 else torch_ops.amin)(s, dim=-1)
        if keepdim:
            for d in sorted((r, c)):
                res = res.unsqueeze(d)
        return res
    raise shape_error("linalg.matrix_norm", f"linalg.matrix_norm: Order {ord} not supported.", A)


def norm(A, ord=None, dim=None, keepdim: bool = False, *, out=None, dtype=None) -> Tensor:
    """torch.linalg.norm: a vector norm, or a matrix norm when ord is set for 2 dims.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.norm(torch.tensor([[3.0], [4.0]]))
    tensor(5.)
    """
    _no_out(out, "linalg.norm")
    A = _t(A)
    dims = (dim,) if isinstance(dim, int) else dim
    if ord is None:
        return vector_norm(A, 2, dim=dims, keepdim=keepdim, dtype=dtype)
    if dims is None:
        if A.ndim not in (1, 2):
            raise shape_error(
                "linalg.norm",
                "linalg.norm: If dim is not specified but ord is, "
                f"the input must be 1D or 2D. Got {A.ndim}D.",
                A,
            )
        dims = tuple(range(A.ndim))
    if len(dims) == 2:
        return matrix_norm(A, ord, dim=dims, keepdim=keepdim, dtype=dtype)
    return vector_norm(A, ord, dim=dims, keepdim=keepdim, dtype=dtype)


def eigh(A, UPLO: str = "L", *, out=None):
    """torch.linalg.eigh: (eigenvalues ascending, eigenvectors) of symmetric A; the gradient
    is PyTorch's (symmetric). Reads (A + A^T) / 2, as cholesky here: PyTorch reads the UPLO
    triangle, which agrees on symmetric input.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.eigh(torch.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    tensor([1., 3.])
    """
    A = _t(A)
    _no_out(out, "linalg.eigh")
    _check_eigh_operand("linalg.eigh", A, UPLO)
    packed = _apply(
        "linalg.eigh",
        L.eigh_p,
        (A,),
        {"lower": UPLO == "L"},
        "linalg.eigh: The algorithm failed to converge because the input matrix is "
        "ill-conditioned or has too many repeated eigenvalues.",
    )
    return _EighResult(packed[..., 0, :], packed[..., 1:, :])


def eigvalsh(A, UPLO: str = "L", *, out=None) -> Tensor:
    """torch.linalg.eigvalsh: the eigenvalues of symmetric A, ascending.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.eigvalsh(torch.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([1., 2.])
    """
    A = _t(A)
    _no_out(out, "linalg.eigvalsh")
    _check_eigh_operand("linalg.eigh", A, UPLO)
    return _apply(
        "linalg.eigvalsh",
        L.eigvalsh_p,
        (A,),
        {"lower": UPLO == "L"},
        "linalg.eigvalsh: The algorithm failed to converge because the input matrix "
        "is ill-conditioned or has too many repeated eigenvalues.",
    )


def _check_eigh_operand(op: str, A: Tensor, UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise shape_error(op, f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}", A)
    _check_square(op, A)
    if A._data.dtype.kind != "f":
        raise NotImplementedError(
            f"\"linalg_eigh_cpu\" not implemented for '{_torch_type_name(A)}'"
        )


def qr(A, mode: str = "reduced", *, out=None):
    """torch.linalg.qr: (Q, R) for mode 'reduced' (default) or 'complete'; mode 'r' gives an
    empty Q and R, whose backward raises (PyTorch's rule).

    >>> import tracegrad.eager as torch
    >>> Q, R = torch.linalg.qr(torch.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> R.abs()
    tensor([[5.0000, 2.2000],
            [0.0000, 0.4000]])
    """
    A = _t(A)
    _no_out(out, "linalg.qr")
    if mode not in L.QR_MODES:
        raise shape_error(
            "linalg.qr",
            f"qr received unrecognized mode '{mode}' but expected one "
            "of 'reduced' (default), 'r', or 'complete'",
            A,
        )
    _check_matrix("linalg.qr", A)
    _check_float("linalg.qr", A)
    packed = _apply("linalg.qr", L.qr_p, (A,), {"mode": mode}, "linalg.qr failed")
    m = A.shape[-2]
    R = _mT(packed[..., m:, :])
    if mode == "r":
        return _QRResult(tensor(np.zeros((0,), A._data.dtype)), R)
    return _QRResult(packed[..., :m, :], R)


def svd(A, full_matrices: bool = True, *, driver=None, out=None):
    """torch.linalg.svd: (U, S, Vh) with A = U diag(S) Vh, S descending. With
    full_matrices, the gradient ignores U's and Vh's vectors past min(m, n) (PyTorch's rule).

    >>> import tracegrad.eager as torch
    >>> torch.linalg.svd(torch.tensor([[3.0, 0.0], [0.0, -4.0]])).S
    tensor([4., 3.])
    """
    A = _t(A)
    _no_out(out, "linalg.svd")
    _check_matrix("linalg.svd", A)
    _check_float("linalg.svd", A)
    packed = _apply(
        "linalg.svd",
        L.svd_p,
        (A,),
        {"full_matrices": bool(full_matrices)},
        "linalg.svd: The algorithm failed to converge because the input matrix is "
        "ill-conditioned or has too many repeated singular values.",
    )
    m, n = A.shape[-2:]
    ku, kv = L._svd_widths(m, n, bool(full_matrices))
    k = min(m, n)
    return _SVDResult(packed[..., :m, :ku], packed[..., m, :k], _mT(packed[..., m + 1 :, :kv]))


def svdvals(A, *, driver=None, out=None) -> Tensor:
    """torch.linalg.svdvals: the singular values, descending (LinalgSvdBackward0).

    >>> import tracegrad.eager as torch
    >>> torch.linalg.svdvals(torch.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    A = _t(A)
    _no_out(out, "linalg.svdvals")
    _check_matrix("linalg.svd", A)
    _check_float("linalg.svd", A)
    return _apply(
        "linalg.svdvals",
        L.svdvals_p,
        (A,),
        {},
        "linalg.svd: The algorithm failed to converge because the input matrix is "
        "ill-conditioned or has too many repeated singular values.",
    )


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """torch.linalg.pinv: singular values <= max(atol, rtol * largest) count as zero
    (rtol defaults to max(m, n) * eps when atol is not given); LinalgPinvBackward0.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.pinv(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    A = _t(A)
    _no_out(out, "linalg.pinv")
    if A.ndim < 2 or A._data.dtype.kind != "f":
        raise shape_error(
            "linalg.pinv",
            f"linalg.pinv({_torch_type_name(A)}{{{list(A.shape)}}}): "
            "expected a "
            "tensor with 2 or more dimensions of float, double, cfloat or cdouble "
            "types",
            A,
        )
    attrs = {
        "atol": 0.0 if atol is None else float(atol),
        "rtol": None if rtol is None else float(rtol),
        "hermitian": bool(hermitian),
    }
    return _apply("linalg.pinv", L.pinv_p, (A,), attrs, "linalg.pinv failed")


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq: (solution, residuals, rank, singular_values); the solution is the
    minimum-norm least-squares one (LinalgLstsqBackward0). residuals and singular_values are
    empty, as with PyTorch's default CPU driver 'gelsy'.

    >>> import tracegrad.eager as torch
    >>> A = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> torch.linalg.lstsq(A, torch.tensor([[1.0], [2.0], [3.0]])).solution
    tensor([[1.],
            [2.]])
    """
    A, B = _t(A), _t(B)
    _check_matrix("torch.linalg.lstsq", A, "input")
    _check_float("torch.linalg.lstsq", A, B)
    vector = B.ndim == A.ndim - 1
    rows = B.shape[-1] if vector else B.shape[-2]
    if rows != A.shape[-2]:
        raise shape_error(
            "linalg.lstsq",
            f"torch.linalg.lstsq: input.size(-2) should match other.size({-1 if vector else -2})",
            A,
            B,
        )
    if vector and B.ndim > 1:  # a batch of vectors: solve them as (..., m, 1)
        X = _apply(
            "linalg.lstsq", L.lstsq_p, (A, B.unsqueeze(-1)), {"rcond": rcond}, "linalg.lstsq failed"
        ).squeeze(-1)
    else:
        X = _apply("linalg.lstsq", L.lstsq_p, (A, B), {"rcond": rcond}, "linalg.lstsq failed")
    empty = tensor(np.zeros((0,), A._data.dtype))
    rank = tensor(
        np.asarray(
            L.matrix_rank(
                A._data,
                None
                if rcond is None
                else rcond * np.max(L.svdvals(A._data), axis=-1, keepdims=True),
            )
        )
    )
    return _LstsqResult(X, empty, rank, empty)


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """torch.linalg.matrix_rank: the number of singular values above max(atol, rtol * largest).

    >>> import tracegrad.eager as torch
    >>> torch.linalg.matrix_rank(torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    A = _t(A)
    _check_matrix("linalg.matrix_rank", A)
    s = L.svdvals(A._data)
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = max(m, n) * np.finfo(s.dtype).eps if not atol else 0.0
    tol = np.maximum(
        0.0 if atol is None else atol,
        rtol * np.max(s, axis=-1, keepdims=True) if s.shape[-1] else 0.0,
    )
    return tensor(np.asarray(np.sum(s > tol, axis=-1), dtype=np.int64))


def _no_out(out, op: str) -> None:
    if out is not None:
        raise EagerNotImplementedError(f"tracegrad.eager: {op}(out=...) is not supported")


# ---------------------------------------------------- torch's top-level names


def cholesky_top(input, upper: bool = False, *, out=None) -> Tensor:
    """torch.cholesky (deprecated in PyTorch): one CholeskyBackward0 node."""
    A = _t(input)
    _no_out(out, "cholesky")
    _check_square("cholesky", A)
    return _apply(
        "cholesky",
        L.cholesky_p,
        (A,),
        {"upper": bool(upper)},
        _not_positive_definite("cholesky"),
        name="CholeskyBackward0",
    )


def cholesky_solve(input, input2, upper: bool = False, *, out=None) -> Tensor:
    """torch.cholesky_solve(B, L): X with A X = B for A = L L^T (upper: A = U^T U).

    Two triangular solves, so the grad_fn is LinalgSolveTriangularBackward0.

    >>> import tracegrad.eager as torch
    >>> L = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> torch.cholesky_solve(torch.tensor([[4.0], [3.0]]), L)
    tensor([[0.5000],
            [1.0000]])
    """
    B, L_ = _t(input), _t(input2)
    _no_out(out, "cholesky_solve")
    _check_square("cholesky_solve", L_)
    lower = not upper
    Y = _triangular(L_, B, lower=lower, trans=upper, unit=False)  # L Y = B (U^T Y = B)
    return _triangular(L_, Y, lower=lower, trans=lower, unit=False)  # L^T X = Y (U X = Y)


def triangular_solve(
    b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False
):
    """torch.triangular_solve(b, A) (deprecated in PyTorch): (solution, cloned_coefficient),
    the solution's node is TriangularSolveBackward0."""
    b, A = _t(b), _t(A)
    _check_square("triangular_solve", A)
    X = _triangular(
        A,
        b,
        lower=not upper,
        trans=bool(transpose),
        unit=unitriangular,
        name="TriangularSolveBackward0",
    )
    return _TriangularSolveResult(X, A.clone())


def logdet(input) -> Tensor:
    """torch.logdet: log det(A), nan where det(A) < 0 (PyTorch's WhereBackward0 node)."""
    sign, logabsdet = slogdet(input)
    return apply_op(T.where, (T.lt(sign._data, 0), np.nan, logabsdet), {})


_SvdTopResult = namedtuple("svd", ["U", "S", "V"])
_QRTopResult = namedtuple("qr", ["Q", "R"])


def svd_top(input, some: bool = True, compute_uv: bool = True, *, out=None):
    """torch.svd (deprecated in PyTorch): (U, S, V) with V, not Vh; compute_uv=False gives
    zero U and V, as PyTorch does."""
    _no_out(out, "svd")
    A = _t(input)
    if not compute_uv:
        m, n = A.shape[-2:]
        S = svdvals(A)
        zeros = np.zeros(tuple(A.shape[:-2]), A._data.dtype)
        return _SvdTopResult(
            tensor(np.zeros(zeros.shape + (m, m if not some else min(m, n)), A._data.dtype)),
            S,
            tensor(np.zeros(zeros.shape + (n, n if not some else min(m, n)), A._data.dtype)),
        )
    U, S, Vh = svd(A, full_matrices=not some)
    return _SvdTopResult(U, S, _mT(Vh))


def qr_top(input, some: bool = True, *, out=None):
    """torch.qr (deprecated in PyTorch): linalg.qr with mode 'reduced' (some) or 'complete'."""
    _no_out(out, "qr")
    Q, R = qr(input, mode="reduced" if some else "complete")
    return _QRTopResult(Q, R)


def pinverse(input, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


TOP_LEVEL = {
    "svd": svd_top,
    "qr": qr_top,
    "pinverse": pinverse,
    "cholesky": cholesky_top,
    "cholesky_solve": cholesky_solve,
    "triangular_solve": triangular_solve,
    "logdet": logdet,
    "det": det,
    "slogdet": slogdet,
    "inverse": inv,
}


def matrix_power(A: Tensor, n: int) -> Tensor:
    """A multiplied by itself n times by squaring (n = 0: the identity; n < 0: of A's
    inverse), as torch.linalg.matrix_power."""
    from tracegrad.eager.more_ops import matrix_power as _power

    return _power(A, n)


def multi_dot(tensors) -> Tensor:
    """The product of the matrices, left to right (a 1-d first / last operand is a row /
    column vector, as torch.linalg.multi_dot)."""
    from tracegrad.eager.torch_ops import matmul

    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product along dim (real tensors)."""
    from tracegrad.eager.torch_ops import sum as _sum

    return _sum(x * y, dim)


__all__ += ["matrix_power", "multi_dot", "vecdot"]
TOP_LEVEL["matrix_power"] = matrix_power


_EigResult = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])


def eig(A, *, out=None):
    """torch.linalg.eig: (eigenvalues, unit eigenvectors as columns) of a general square
    A, complex; the gradient is PyTorch's linalg_eig_backward (issue 26;
    tracegrad/ops/linalg_eig.py), including its error for a loss that depends on the
    eigenvectors' phases.

    >>> import tracegrad.eager as torch
    >>> torch.linalg.eig(torch.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues
    tensor([2.+0.j, 3.+0.j])
    """
    from tracegrad.ops import linalg_eig as E

    A = _t(A)
    _no_out(out, "linalg.eig")
    _check_square("linalg.eig", A)
    packed = _apply(
        "linalg.eig",
        E.eig_p,
        (A,),
        {},
        "linalg.eig: The algorithm failed to converge",
    )
    return _EigResult(packed[..., 0, :], packed[..., 1:, :])


def eigvals(A, *, out=None) -> Tensor:
    """torch.linalg.eigvals: the eigenvalues of a general square A (complex)."""
    return eig(A, out=out).eigenvalues


__all__ += ["eig", "eigvals"]
