"""LAPACK and triangular BLAS calls for generated kernels (cholesky, triangular_solve, ...).

The kernels call the OpenBLAS that NumPy ships (already loaded with numpy: no
SciPy import), found by symbol name like `tg_gemm` in intrinsics.py:
`llvmlite.binding.add_symbol` registers each function under a `tg_` name and
the generated code refers to the name, never to an address, so Numba can cache
the kernel. Numba's own np.linalg inside njit would compile for seconds per
kernel (perf/linalg_codegen_bench.py); these are plain external calls.

- `tg_potrf(n, a, offa)`: in place, the row-major lower Cholesky factor of the
  symmetric matrix whose lower triangle is at a[offa:]; returns LAPACK's info
  (0, or k > 0 when the leading minor of order k is not positive definite).
- `tg_trsm(lower, trans, unit, m, k, a, offa, lda, b, offb, ldb)`: in place,
  B := op(A)^-1 B with A (m, m) triangular and B (m, k), both row-major.
- `tg_trsv(lower, trans, unit, m, a, offa, lda, x, offx)`: the same for one
  contiguous vector x (OpenBLAS's trsm with k = 1 took ~0.1 ms at m = 256,
  trsv ~0.02 ms).
- `tg_trmm` / `tg_trmv`: the same arguments, B := op(A) B (x := op(A) x): a
  product with a triangular matrix, half a GEMM's flops.
- `tg_getrf(n, a, offa, ipiv, offp)` / `tg_getrs(n, k, a, offa, ipiv, offp, b, offb)`:
  LU with partial pivoting of the (n, n) column-major matrix at a[offa:] (pivots
  into the int64 ipiv[offp:]; returns info, > 0 for an exact zero pivot), and the
  solve A^T X = B with that factorization, B (n, k) column-major at b[offb:]. A
  row-major matrix is its transpose column-major, so factoring a row-major copy
  of A and solving with A^T solves A X = B.

- `tg_syevd(vectors, lower, n, a, offa, w, offw)`: the symmetric eigendecomposition
  of the row-major (n, n) matrix at a[offa:] (eigh, eigvalsh), LAPACKE allocating its
  workspace; returns info (> 0: no convergence).
- `tg_gesdd(vectors, m, n, a, offa, s, offs, u, offu, ldu, vt, offvt, ldvt)`: the
  (reduced) SVD of the row-major (m, n) matrix at a[offa:] (svd, svdvals), the same way.
- `tg_geqrf(m, n, 0, a, offa, lda, tau, offt)` / `tg_orgqr(m, ncols, k, a, offa, lda,
  tau, offt)`: Householder QR in place and Q's first ncols columns from it (qr).

Each intrinsic is one `_external` declaration: the C symbol (with ? for s or d),
the intrinsic's parameters, and the C arguments built from them, one argument
kind each (`_Int`, `_ld`, `_Pointer`, `_flag`, `_job`, constants). Adding a
routine is adding a declaration; `_register` links every declared symbol.

`AVAILABLE` is False when NumPy's OpenBLAS is not found (a NumPy built against
MKL or Accelerate): the emitters then leave these ops to their NumPy impl.
Importing this module imports numba; only generated modules (and the emitters,
to read AVAILABLE) import it.
"""

from __future__ import annotations

import ctypes
import inspect
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_ROW_MAJOR, _COL_MAJOR = 101, 102  # CBLAS/LAPACKE layouts
_NO_TRANS, _TRANS = 111, 112
_UPPER, _LOWER = 121, 122
_NON_UNIT, _UNIT = 131, 132
_LEFT = 141

_i64 = ir.IntType(64)

# ------------------------------------------------------------ argument kinds
# An external call is declared (see `_external`) as the C arguments it passes, each
# one of these kinds, built from the intrinsic's parameters by name. Every integer
# is 64-bit (NumPy's OpenBLAS is ILP64) except the CBLAS/LAPACKE enums (int) and
# LAPACK's job characters (char).


class _CallSite:
    """One call being generated: the intrinsic's arguments by parameter name, and
    each C argument built once (a size used twice is cast once, as written by hand)."""

    def __init__(self, context, builder, params, signature, values):
        self.context, self.builder = context, builder
        self.args = {p: (v, ty) for p, v, ty in zip(params, values, signature.args, strict=True)}
        self.dtype = next(ty.dtype for ty in signature.args if _float_array(ty))
        self._built: dict = {}

    def build(self, kind) -> ir.Value:
        if kind not in self._built:
            self._built[kind] = kind.build(self)
        return self._built[kind]

    def int64(self, param: str) -> ir.Value:
        value, ty = self.args[param]
        return self.context.cast(self.builder, value, ty, types.int64)


@dataclass(frozen=True)
class _Const:
    """A constant: a layout or side enum (32 bits), a job character (8), an increment (64)."""

    bits: int
    value: int

    def llvm_type(self, site):
        return ir.IntType(self.bits)

    def build(self, site):
        return ir.Constant(ir.IntType(self.bits), self.value)


@dataclass(frozen=True)
class _Int:
    """An integer parameter (a size, a leading dimension, lwork) as int64; with
    at_least_1, max(param, 1): LAPACKE rejects a leading dimension of 0, even for
    an empty matrix (see `_ld`)."""

    param: str
    at_least_1: bool = False

    def llvm_type(self, site):
        return _i64

    def build(self, site):
        if not self.at_least_1:
            return site.int64(self.param)
        v = site.build(_Int(self.param))
        one = ir.Constant(_i64, 1)
        return site.builder.select(site.builder.icmp_signed(">", v, one), v, one)


@dataclass(frozen=True)
class _Choice:
    """if_set when the (bool or int) parameter is nonzero, else if_not: a CBLAS enum
    (32 bits) or a LAPACK job character (8)."""

    param: str
    bits: int
    if_set: int
    if_not: int

    def llvm_type(self, site):
        return ir.IntType(self.bits)

    def build(self, site):
        t = ir.IntType(self.bits)
        is_set = site.builder.icmp_signed("!=", site.build(_Int(self.param)), ir.Constant(_i64, 0))
        return site.builder.select(is_set, ir.Constant(t, self.if_set), ir.Constant(t, self.if_not))


@dataclass(frozen=True)
class _One:
    """The scalar 1 in the arrays' dtype (alpha of trsm/trmm)."""

    def llvm_type(self, site):
        return site.context.get_value_type(site.dtype)

    def build(self, site):
        return site.context.get_constant(site.dtype, 1.0)


@dataclass(frozen=True)
class _Pointer:
    """&array[offset] of a 1-D array parameter: float32/float64 (one dtype per call,
    which picks the s or d routine), or int64 for LU pivots."""

    array: str
    offset: str
    pivots: bool = False

    def accepts(self, ty) -> bool:
        if self.pivots:
            return isinstance(ty, types.Array) and ty.dtype == types.int64
        return _float_array(ty)

    def llvm_type(self, site):
        return site.context.get_value_type(site.args[self.array][1].dtype).as_pointer()

    def build(self, site):
        (arr, arr_ty), (off, off_ty) = site.args[self.array], site.args[self.offset]
        context, builder = site.context, site.builder
        ary = context.make_array(arr_ty)(context, builder, arr)
        at = builder.gep(ary.data, [context.cast(builder, off, off_ty, types.intp)])
        return builder.bitcast(at, self.llvm_type(site))


def _float_array(ty) -> bool:
    return isinstance(ty, types.Array) and ty.dtype in (types.float32, types.float64)


def _ld(param: str) -> _Int:
    """A leading dimension: the parameter, at least 1."""
    return _Int(param, at_least_1=True)


def _enum(value: int) -> _Const:
    return _Const(32, value)


def _char(c: str) -> _Const:
    return _Const(8, ord(c))


def _flag(param: str, if_set: int, if_not: int) -> _Choice:
    return _Choice(param, 32, if_set, if_not)


def _job(param: str, if_set: str, if_not: str) -> _Choice:
    return _Choice(param, 8, ord(if_set), ord(if_not))


# ------------------------------------------------------------ the one factory

_SYMBOLS: dict[str, str] = {}  # our LLVM name -> NumPy's OpenBLAS symbol ({k}: s or d)


def _external(symbol: str, params: str, args: tuple, *, returns_info: bool, doc: str):
    """The intrinsic tg_<routine>(*params) calling `symbol` of NumPy's OpenBLAS on `args`.

    `symbol` is the C name with ? for the dtype letter ("LAPACKE_?potrf_work" is
    scipy_LAPACKE_spotrf_work64_ for float32 arrays, ..._dpotrf_... for float64); the
    kernel refers to it as tg_lapacke_?potrf (the _work suffix dropped), registered
    by `_register`. The intrinsic types only when its float arrays share a float
    dtype (and pivot arrays are int64), and returns LAPACK's info (int64) with
    `returns_info`, else nothing.
    """
    names = params.split()
    named = {getattr(a, f) for a in args for f in ("param", "array", "offset") if hasattr(a, f)}
    if not named <= set(names):
        raise ValueError(
            f"{symbol}: arguments read undeclared parameters "
            f"{sorted(named - set(names))} (parameters: {params})"
        )
    family, rest = symbol.split("_?")
    routine = rest.split("_")[0]
    ours = f"tg_{family.lower()}_{{k}}{routine}"
    _SYMBOLS[ours] = f"scipy_{symbol.replace('?', '{k}')}64_"
    pointers = [a for a in args if isinstance(a, _Pointer)]
    restype = types.int64 if returns_info else types.void

    def typer(typingctx, *arg_types):
        if len(arg_types) != len(names):
            return None
        bound = dict(zip(names, arg_types, strict=True))
        if not all(p.accepts(bound[p.array]) for p in pointers):
            return None
        if len({bound[p.array].dtype for p in pointers if not p.pivots}) != 1:
            return None

        def codegen(context, builder, signature, values):
            site = _CallSite(context, builder, names, signature, values)
            fnty = ir.FunctionType(
                _i64 if returns_info else ir.VoidType(), [a.llvm_type(site) for a in args]
            )
            name = ours.format(k="s" if site.dtype == types.float32 else "d")
            fn = cgutils.get_or_insert_function(builder.module, fnty, name)
            info = builder.call(fn, [site.build(a) for a in args])
            return info if returns_info else context.get_dummy_value()

        return restype(*arg_types), codegen

    # Numba names the intrinsic by __name__ and binds call arguments by the signature.
    typer.__name__ = typer.__qualname__ = f"tg_{routine}"
    typer.__doc__ = doc
    typer.__signature__ = inspect.Signature(
        [
            inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for p in ("typingctx", *names)
        ]
    )
    return intrinsic(typer)


# ------------------------------------------------------------ the routines
# Row-major and column-major are each other's transposes: LAPACK sees the memory of
# a row-major matrix as its transpose, which the argument choices below rely on.

tg_potrf = _external(
    # A row-major lower triangle is the column-major upper one of the same memory:
    # LAPACK's 'U' factor U (U^T U = A) read row-major is L = U^T (L L^T = A).
    "LAPACKE_?potrf_work",
    "n a offa",
    returns_info=True,
    args=(_enum(_COL_MAJOR), _char("U"), _Int("n"), _Pointer("a", "offa"), _ld("n")),
    doc="info of the in-place Cholesky of the (n, n) row-major matrix at a[offa:] (lower).",
)

_TRIANGLE = (
    _flag("lower", _LOWER, _UPPER),
    _flag("trans", _TRANS, _NO_TRANS),
    _flag("unit", _UNIT, _NON_UNIT),
)
_MATRIX_PARAMS = "lower trans unit m k a offa lda b offb ldb"
_MATRIX_ARGS = (
    _enum(_ROW_MAJOR),
    _enum(_LEFT),
    *_TRIANGLE,
    _Int("m"),
    _Int("k"),
    _One(),
    _Pointer("a", "offa"),
    _Int("lda"),
    _Pointer("b", "offb"),
    _Int("ldb"),
)
tg_trsm = _external(
    "cblas_?trsm",
    _MATRIX_PARAMS,
    _MATRIX_ARGS,
    returns_info=False,
    doc="B := op(A)^-1 B in place, A (m, m) triangular, B (m, k), row-major.",
)
tg_trmm = _external(
    "cblas_?trmm",
    _MATRIX_PARAMS,
    _MATRIX_ARGS,
    returns_info=False,
    doc="B := op(A) B in place, A (m, m) triangular, B (m, k), row-major.",
)

_VECTOR_PARAMS = "lower trans unit m a offa lda x offx"
_VECTOR_ARGS = (
    _enum(_ROW_MAJOR),
    *_TRIANGLE,
    _Int("m"),
    _Pointer("a", "offa"),
    _Int("lda"),
    _Pointer("x", "offx"),
    _Const(64, 1),
)
tg_trsv = _external(
    "cblas_?trsv",
    _VECTOR_PARAMS,
    _VECTOR_ARGS,
    returns_info=False,
    doc="x := op(A)^-1 x in place, A (m, m) triangular row-major, x contiguous.",
)
tg_trmv = _external(
    "cblas_?trmv",
    _VECTOR_PARAMS,
    _VECTOR_ARGS,
    returns_info=False,
    doc="x := op(A) x in place, A (m, m) triangular row-major, x contiguous.",
)

_PIVOTS = _Pointer("ipiv", "offp", pivots=True)
tg_getrf = _external(
    "LAPACKE_?getrf_work",
    "n a offa ipiv offp",
    returns_info=True,
    args=(_enum(_COL_MAJOR), _Int("n"), _Int("n"), _Pointer("a", "offa"), _ld("n"), _PIVOTS),
    doc="info of the in-place LU of the (n, n) column-major matrix at a[offa:].",
)
tg_getrs = _external(
    "LAPACKE_?getrs_work",
    "n k a offa ipiv offp b offb",
    returns_info=True,
    args=(
        _enum(_COL_MAJOR),
        _char("T"),
        _Int("n"),
        _Int("k"),
        _Pointer("a", "offa"),
        _ld("n"),
        _PIVOTS,
        _Pointer("b", "offb"),
        _ld("n"),
    ),
    doc="Solve A^T X = B in place (B (n, k) column-major at b[offb:]) with tg_getrf's "
    "factorization of the column-major A at a[offa:]; returns info.",
)
tg_getri = _external(
    "LAPACKE_?getri_work",
    "n a offa ipiv offp work offw lwork",
    returns_info=True,
    args=(
        _enum(_COL_MAJOR),
        _Int("n"),
        _Pointer("a", "offa"),
        _ld("n"),
        _PIVOTS,
        _Pointer("work", "offw"),
        _Int("lwork"),
    ),
    doc="In place, the inverse of the column-major matrix whose tg_getrf factorization "
    "is at a[offa:] (work: lwork >= n elements); returns info.",
)

# syevd, gesdd, geqrf and orgqr: LAPACKE's high-level calls, which allocate their workspace
tg_syevd = _external(
    "LAPACKE_?syevd",
    "vectors lower n a offa w offw",
    returns_info=True,
    args=(
        _flag("lower", _ROW_MAJOR, _COL_MAJOR),
        _job("vectors", "V", "N"),
        _job("lower", "L", "U"),
        _Int("n"),
        _Pointer("a", "offa"),
        _ld("n"),
        _Pointer("w", "offw"),
    ),
    doc="info of the symmetric eigendecomposition of the (n, n) matrix whose lower "
    "triangle is at a[offa:] row-major: eigenvalues ascending into w[offw:], and with "
    "`vectors` the eigenvectors over a. `lower`: LAPACK reads that lower triangle "
    "(row-major layout: eigenvectors as columns); else the same memory as a "
    "column-major upper triangle, as NumPy's UPLO='U' (eigenvectors as rows: the "
    "caller transposes).",
)
tg_gesdd = _external(
    "LAPACKE_?gesdd",
    "vectors m n a offa s offs u offu ldu vt offvt ldvt",
    returns_info=True,
    args=(
        _enum(_ROW_MAJOR),
        _job("vectors", "S", "N"),
        _Int("m"),
        _Int("n"),
        _Pointer("a", "offa"),
        _ld("n"),
        _Pointer("s", "offs"),
        _Pointer("u", "offu"),
        _ld("ldu"),
        _Pointer("vt", "offvt"),
        _ld("ldvt"),
    ),
    doc="info of the SVD of the (m, n) row-major matrix at a[offa:] (destroyed): singular "
    "values descending into s[offs:], and with `vectors` the reduced U (m, k) and Vt "
    "(k, n) row-major at u[offu:] (row stride ldu) and vt[offvt:] (ldvt).",
)

_QR_PARAMS = "m ncols k a offa lda tau offt"  # (the same for both: the emitter's one shape)
_QR_ARRAYS = (_Pointer("a", "offa"), _ld("lda"), _Pointer("tau", "offt"))
tg_geqrf = _external(
    "LAPACKE_?geqrf",
    _QR_PARAMS,
    returns_info=True,
    args=(_enum(_ROW_MAJOR), _Int("m"), _Int("ncols"), *_QR_ARRAYS),
    doc="info of the Householder QR of the row-major (m, ncols) matrix at a[offa:], in "
    "place (reflectors below R, their scales into tau[offt:]); k is ignored.",
)
tg_orgqr = _external(
    "LAPACKE_?orgqr",
    _QR_PARAMS,
    returns_info=True,
    args=(_enum(_ROW_MAJOR), _Int("m"), _Int("ncols"), _Int("k"), *_QR_ARRAYS),
    doc="info of forming, in place at a[offa:], the first ncols columns of Q from "
    "tg_geqrf's k reflectors there.",
)


# ------------------------------------------------------------ linking


def _register() -> bool:
    """Give LLVM every declared routine's address under our name, both dtypes."""
    from tracegrad.runtime.numpy_openblas import library

    lib = library()
    if lib is None:
        return False
    addresses = {}
    try:
        for ours, theirs in _SYMBOLS.items():
            for k in "sd":
                fn = getattr(lib, theirs.format(k=k))
                addresses[ours.format(k=k)] = ctypes.cast(fn, ctypes.c_void_p).value
    except AttributeError:
        return False
    import llvmlite.binding as llvm

    for name, address in addresses.items():
        llvm.add_symbol(name, address)
    return True


AVAILABLE = _register()


# ------------------------------------------------------------- shared loops
# Compiled once (and cached on disk by Numba), called by every kernel: as loops
# inlined in each kernel they cost ~0.2 s of Numba compile per cholesky node.


@njit(cache=True, nogil=True)
def tg_sym_lower(src, soff, rs, cs, dst, doff, n):
    """dst[doff:] (n, n) row-major := the lower triangle of (S + S^T) / 2, zeros
    above, where S[i, j] = src[soff + i*rs + j*cs]; True when that part is finite."""
    finite = True
    for i in range(n):
        for j in range(i + 1):
            s = (src[soff + i * rs + j * cs] + src[soff + j * rs + i * cs]) * 0.5
            finite &= np.isfinite(s)
            dst[doff + i * n + j] = s
        for j in range(i + 1, n):
            dst[doff + i * n + j] = 0.0
    return finite


@njit(cache=True, nogil=True)
def tg_lower_finite(a, off, n):
    """Is every element of the lower triangle of the (n, n) row-major a[off:] finite?"""
    for i in range(n):
        for j in range(i + 1):
            if not np.isfinite(a[off + i * n + j]):
                return False
    return True


@njit(cache=True, nogil=True)
def tg_lu_slogdet(lu, off, ipiv, poff, n, info):
    """(sign, log|det|) from tg_getrf's factorization at lu[off:] and its pivots, as
    NumPy's slogdet computes them: (0, -inf) when a pivot is exactly zero (info > 0)."""
    if info > 0:
        return 0.0, -np.inf
    sign = 1.0
    logdet = 0.0
    for i in range(n):
        u = lu[off + i * n + i]
        if ipiv[poff + i] != i + 1:
            sign = -sign
        if u < 0:
            sign = -sign
        logdet += np.log(abs(u))
    return sign, logdet


@njit(cache=True, nogil=True)
def tg_copy2d(src, soff, s0, s1, dst, doff, d0, d1, n0, n1):
    """dst[doff + i*d0 + j*d1] = src[soff + i*s0 + j*s1] for i < n0, j < n1 (the
    operand copies around LAPACK calls: one shared loop, not one per call site)."""
    for i in range(n0):
        for j in range(n1):
            dst[doff + i * d0 + j * d1] = src[soff + i * s0 + j * s1]


@njit(cache=True, nogil=True)
def tg_qr_r_transposed(src, soff, lda, dst, doff, n, kq):
    """dst[doff:] (n, kq) row-major := R^T, R (kq, n) the upper triangle of geqrf's
    row-major result at src[soff:] (row stride lda); rows of R past min(m, n) are zero."""
    for i in range(n):
        for j in range(kq):
            dst[doff + i * kq + j] = src[soff + j * lda + i] if j <= i else 0.0
