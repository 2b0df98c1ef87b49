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

`AVAILABLE` is False when NumPy's OpenBLAS is not found (a NumPy built against
MKL or Accelerate): the emitters then leave these ops to their NumPy impl.
Importing this module imports numba; only generated modules (and the emitters,
to read AVAILABLE) import it.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_ROW_MAJOR, _COL_MAJOR = 101, 102       # CBLAS/LAPACKE layouts
_NO_TRANS, _TRANS = 111, 112
_UPPER, _LOWER = 121, 122
_NON_UNIT, _UNIT = 131, 132
_LEFT = 141

_SYMBOLS = {  # our name -> NumPy's OpenBLAS (ILP64: every integer is 64-bit)
    "tg_lapacke_{k}potrf": "scipy_LAPACKE_{k}potrf_work64_",
    "tg_cblas_{k}trsm": "scipy_cblas_{k}trsm64_",
    "tg_cblas_{k}trsv": "scipy_cblas_{k}trsv64_",
    "tg_cblas_{k}trmm": "scipy_cblas_{k}trmm64_",
    "tg_cblas_{k}trmv": "scipy_cblas_{k}trmv64_",
    "tg_lapacke_{k}getrf": "scipy_LAPACKE_{k}getrf_work64_",
    "tg_lapacke_{k}getrs": "scipy_LAPACKE_{k}getrs_work64_",
    "tg_lapacke_{k}getri": "scipy_LAPACKE_{k}getri_work64_",
    "tg_lapacke_{k}syevd": "scipy_LAPACKE_{k}syevd64_",  # (these two allocate their
    "tg_lapacke_{k}gesdd": "scipy_LAPACKE_{k}gesdd64_",  # own workspace)
    "tg_lapacke_{k}geqrf": "scipy_LAPACKE_{k}geqrf64_",
    "tg_lapacke_{k}orgqr": "scipy_LAPACKE_{k}orgqr64_",
}


def _numpy_openblas() -> ctypes.CDLL | None:
    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "libscipy_openblas64_*"))):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _register() -> bool:
    lib = _numpy_openblas()
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

# ---------------------------------------------------------------- intrinsics
# (defined only with numba importable; generated modules import them)

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_i32, _i64, _i8 = ir.IntType(32), ir.IntType(64), ir.IntType(8)


def _data_at(context, builder, arr_ty, arr, offset, offset_ty):
    """Pointer to arr[offset] (arr a 1-D array)."""
    ary = context.make_array(arr_ty)(context, builder, arr)
    return builder.gep(ary.data, [context.cast(builder, offset, offset_ty, types.intp)])


def _float_array(ty) -> bool:
    return isinstance(ty, types.Array) and ty.dtype in (types.float32, types.float64)


@intrinsic
def tg_potrf(typingctx, n, a, offa):
    """info of the in-place Cholesky of the (n, n) row-major matrix at a[offa:] (lower)."""
    if not _float_array(a):
        return None

    def codegen(context, builder, signature, args):
        vn, va, voff = args
        sa = signature.args
        dtype = sa[1].dtype
        fty = context.get_value_type(dtype)
        fnty = ir.FunctionType(_i64, [_i32, _i8, _i64, fty.as_pointer(), _i64])
        name = "tg_lapacke_spotrf" if dtype == types.float32 else "tg_lapacke_dpotrf"
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        ptr = builder.bitcast(_data_at(context, builder, sa[1], va, voff, sa[2]), fty.as_pointer())
        nn = context.cast(builder, vn, sa[0], types.int64)
        # A row-major lower triangle is the column-major upper one of the same memory:
        # LAPACK's 'U' factor U (U^T U = A) read row-major is L = U^T (L L^T = A).
        return builder.call(fn, (ir.Constant(_i32, _COL_MAJOR), ir.Constant(_i8, ord("U")),
                                 nn, ptr, builder.select(
                                     builder.icmp_signed(">", nn, ir.Constant(_i64, 1)), nn,
                                     ir.Constant(_i64, 1))))

    return types.int64(n, a, offa), codegen


def _flag(context, builder, v, ty, if_set, if_not):
    v = context.cast(builder, v, ty, types.int64)
    return builder.select(builder.icmp_signed("!=", v, ir.Constant(_i64, 0)),
                          ir.Constant(_i32, if_set), ir.Constant(_i32, if_not))


def _matrix_call(routine: str):
    """An intrinsic (lower, trans, unit, m, k, a, offa, lda, b, offb, ldb) calling
    cblas_?<routine> (trsm or trmm) on the left side, row-major, alpha = 1."""
    def typer(typingctx, lower, trans, unit, m, k, a, offa, lda, b, offb, ldb):
        if not (_float_array(a) and _float_array(b) and a.dtype == b.dtype):
            return None

        def codegen(context, builder, signature, args):
            vlow, vtrans, vunit, vm, vk, va, voa, vlda, vb, vob, vldb = args
            sa = signature.args
            dtype = sa[5].dtype
            fty = context.get_value_type(dtype)
            ptr_t = fty.as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [_i32, _i32, _i32, _i32, _i32, _i64, _i64,
                                                   fty, ptr_t, _i64, ptr_t, _i64])
            kind = "s" if dtype == types.float32 else "d"
            fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_cblas_{kind}{routine}")

            def i64(v, ty):
                return context.cast(builder, v, ty, types.int64)

            pa = builder.bitcast(_data_at(context, builder, sa[5], va, voa, sa[6]), ptr_t)
            pb = builder.bitcast(_data_at(context, builder, sa[8], vb, vob, sa[9]), ptr_t)
            builder.call(fn, (ir.Constant(_i32, _ROW_MAJOR), ir.Constant(_i32, _LEFT),
                              _flag(context, builder, vlow, sa[0], _LOWER, _UPPER),
                              _flag(context, builder, vtrans, sa[1], _TRANS, _NO_TRANS),
                              _flag(context, builder, vunit, sa[2], _UNIT, _NON_UNIT),
                              i64(vm, sa[3]), i64(vk, sa[4]), context.get_constant(dtype, 1.0),
                              pa, i64(vlda, sa[7]), pb, i64(vldb, sa[10])))
            return context.get_dummy_value()

        return types.void(lower, trans, unit, m, k, a, offa, lda, b, offb, ldb), codegen
    typer.__name__ = typer.__qualname__ = f"tg_{routine}"  # Numba names the intrinsic by it
    return typer


def _vector_call(routine: str):
    """An intrinsic (lower, trans, unit, m, a, offa, lda, x, offx) calling
    cblas_?<routine> (trsv or trmv), row-major, on m contiguous elements of x."""
    def typer(typingctx, lower, trans, unit, m, a, offa, lda, x, offx):
        if not (_float_array(a) and _float_array(x) and a.dtype == x.dtype):
            return None

        def codegen(context, builder, signature, args):
            vlow, vtrans, vunit, vm, va, voa, vlda, vx, vox = args
            sa = signature.args
            dtype = sa[4].dtype
            ptr_t = context.get_value_type(dtype).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [_i32, _i32, _i32, _i32, _i64, ptr_t, _i64,
                                                   ptr_t, _i64])
            kind = "s" if dtype == types.float32 else "d"
            fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_cblas_{kind}{routine}")
            pa = builder.bitcast(_data_at(context, builder, sa[4], va, voa, sa[5]), ptr_t)
            px = builder.bitcast(_data_at(context, builder, sa[7], vx, vox, sa[8]), ptr_t)
            builder.call(fn, (ir.Constant(_i32, _ROW_MAJOR),
                              _flag(context, builder, vlow, sa[0], _LOWER, _UPPER),
                              _flag(context, builder, vtrans, sa[1], _TRANS, _NO_TRANS),
                              _flag(context, builder, vunit, sa[2], _UNIT, _NON_UNIT),
                              context.cast(builder, vm, sa[3], types.int64), pa,
                              context.cast(builder, vlda, sa[6], types.int64), px,
                              ir.Constant(_i64, 1)))
            return context.get_dummy_value()

        return types.void(lower, trans, unit, m, a, offa, lda, x, offx), codegen
    typer.__name__ = typer.__qualname__ = f"tg_{routine}"
    return typer


tg_trsm = intrinsic(_matrix_call("trsm"))
tg_trmm = intrinsic(_matrix_call("trmm"))
tg_trsv = intrinsic(_vector_call("trsv"))
tg_trmv = intrinsic(_vector_call("trmv"))


def _ptr(context, builder, arr_ty, arr, offset, offset_ty, elem_ty):
    return builder.bitcast(_data_at(context, builder, arr_ty, arr, offset, offset_ty),
                           elem_ty.as_pointer())


@intrinsic
def tg_getrf(typingctx, n, a, offa, ipiv, offp):
    """info of the in-place LU of the (n, n) column-major matrix at a[offa:]."""
    if not (_float_array(a) and isinstance(ipiv, types.Array) and ipiv.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        vn, va, voa, vp, vop = args
        sa = signature.args
        dtype = sa[1].dtype
        fty = context.get_value_type(dtype)
        fnty = ir.FunctionType(_i64, [_i32, _i64, _i64, fty.as_pointer(), _i64,
                                      _i64.as_pointer()])
        kind = "s" if dtype == types.float32 else "d"
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_lapacke_{kind}getrf")
        nn = context.cast(builder, vn, sa[0], types.int64)
        lda = builder.select(builder.icmp_signed(">", nn, ir.Constant(_i64, 1)), nn,
                             ir.Constant(_i64, 1))
        return builder.call(fn, (ir.Constant(_i32, _COL_MAJOR), nn, nn,
                                 _ptr(context, builder, sa[1], va, voa, sa[2], fty), lda,
                                 _ptr(context, builder, sa[3], vp, vop, sa[4], _i64)))

    return types.int64(n, a, offa, ipiv, offp), codegen


@intrinsic
def tg_getrs(typingctx, n, k, a, offa, ipiv, offp, b, offb):
    """Solve A^T X = B in place (B (n, k) column-major at b[offb:]) with tg_getrf's
    factorization of the column-major A at a[offa:]; returns info."""
    if not (_float_array(a) and _float_array(b) and a.dtype == b.dtype
            and isinstance(ipiv, types.Array) and ipiv.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        vn, vk, va, voa, vp, vop, vb, vob = args
        sa = signature.args
        dtype = sa[2].dtype
        fty = context.get_value_type(dtype)
        fnty = ir.FunctionType(_i64, [_i32, _i8, _i64, _i64, fty.as_pointer(), _i64,
                                      _i64.as_pointer(), fty.as_pointer(), _i64])
        kind = "s" if dtype == types.float32 else "d"
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_lapacke_{kind}getrs")
        nn = context.cast(builder, vn, sa[0], types.int64)
        ld = builder.select(builder.icmp_signed(">", nn, ir.Constant(_i64, 1)), nn,
                            ir.Constant(_i64, 1))
        return builder.call(fn, (ir.Constant(_i32, _COL_MAJOR), ir.Constant(_i8, ord("T")), nn,
                                 context.cast(builder, vk, sa[1], types.int64),
                                 _ptr(context, builder, sa[2], va, voa, sa[3], fty), ld,
                                 _ptr(context, builder, sa[4], vp, vop, sa[5], _i64),
                                 _ptr(context, builder, sa[6], vb, vob, sa[7], fty), ld))

    return types.int64(n, k, a, offa, ipiv, offp, b, offb), codegen


@intrinsic
def tg_getri(typingctx, n, a, offa, ipiv, offp, work, offw, lwork):
    """In place, the inverse of the column-major matrix whose tg_getrf factorization
    is at a[offa:] (work: lwork >= n elements); returns info."""
    if not (_float_array(a) and _float_array(work) and a.dtype == work.dtype
            and isinstance(ipiv, types.Array) and ipiv.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        vn, va, voa, vp, vop, vw, vow, vl = args
        sa = signature.args
        dtype = sa[1].dtype
        fty = context.get_value_type(dtype)
        fnty = ir.FunctionType(_i64, [_i32, _i64, fty.as_pointer(), _i64, _i64.as_pointer(),
                                      fty.as_pointer(), _i64])
        kind = "s" if dtype == types.float32 else "d"
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_lapacke_{kind}getri")
        nn = context.cast(builder, vn, sa[0], types.int64)
        ld = builder.select(builder.icmp_signed(">", nn, ir.Constant(_i64, 1)), nn,
                            ir.Constant(_i64, 1))
        return builder.call(fn, (ir.Constant(_i32, _COL_MAJOR), nn,
                                 _ptr(context, builder, sa[1], va, voa, sa[2], fty), ld,
                                 _ptr(context, builder, sa[3], vp, vop, sa[4], _i64),
                                 _ptr(context, builder, sa[5], vw, vow, sa[6], fty),
                                 context.cast(builder, vl, sa[7], types.int64)))

    return types.int64(n, a, offa, ipiv, offp, work, offw, lwork), codegen


@intrinsic
def tg_syevd(typingctx, vectors, lower, n, a, offa, w, offw):
    """info of the symmetric eigendecomposition of the (n, n) matrix whose lower triangle
    is at a[offa:] row-major: eigenvalues ascending into w[offw:], and with `vectors` the
    eigenvectors over a. `lower`: LAPACK reads that lower triangle (row-major layout:
    eigenvectors as columns); else the same memory as a column-major upper triangle, as
    NumPy's UPLO='U' (eigenvectors as rows: the caller transposes)."""
    if not (_float_array(a) and _float_array(w) and a.dtype == w.dtype):
        return None

    def codegen(context, builder, signature, args):
        vvec, vlow, vn, va, voa, vw, vow = args
        sa = signature.args
        dtype = sa[3].dtype
        fty = context.get_value_type(dtype)
        fnty = ir.FunctionType(_i64, [_i32, _i8, _i8, _i64, fty.as_pointer(), _i64,
                                      fty.as_pointer()])
        kind = "s" if dtype == types.float32 else "d"
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_lapacke_{kind}syevd")
        nn = context.cast(builder, vn, sa[2], types.int64)
        lda = builder.select(builder.icmp_signed(">", nn, ir.Constant(_i64, 1)), nn,
                             ir.Constant(_i64, 1))

        def char(v, ty, if_set, if_not):
            v = context.cast(builder, v, ty, types.int64)
            return builder.select(builder.icmp_signed("!=", v, ir.Constant(_i64, 0)),
                                  ir.Constant(_i8, ord(if_set)), ir.Constant(_i8, ord(if_not)))

        low = builder.icmp_signed("!=", context.cast(builder, vlow, sa[1], types.int64),
                                  ir.Constant(_i64, 0))
        layout = builder.select(low, ir.Constant(_i32, _ROW_MAJOR), ir.Constant(_i32, _COL_MAJOR))
        return builder.call(fn, (layout, char(vvec, sa[0], "V", "N"),
                                 char(vlow, sa[1], "L", "U"), nn,
                                 _ptr(context, builder, sa[3], va, voa, sa[4], fty), lda,
                                 _ptr(context, builder, sa[5], vw, vow, sa[6], fty)))

    return types.int64(vectors, lower, n, a, offa, w, offw), codegen


@intrinsic
def tg_gesdd(typingctx, vectors, m, n, a, offa, s, offs, u, offu, ldu, vt, offvt, ldvt):
    """info of the SVD of the (m, n) row-major matrix at a[offa:] (destroyed): singular
    values descending into s[offs:], and with `vectors` the reduced U (m, k) and Vt (k, n)
    row-major at u[offu:] (row stride ldu) and vt[offvt:] (ldvt); LAPACKE's gesdd."""
    if not all(_float_array(x) for x in (a, s, u, vt)) or len({x.dtype for x in (a, s, u, vt)}) > 1:
        return None

    def codegen(context, builder, signature, args):
        vvec, vm, vn, va, voa, vs, vos, vu, vou, vldu, vvt, vovt, vldvt = args
        sa = signature.args
        dtype = sa[3].dtype
        fty = context.get_value_type(dtype)
        ptr_t = fty.as_pointer()
        fnty = ir.FunctionType(_i64, [_i32, _i8, _i64, _i64, ptr_t, _i64, ptr_t, ptr_t, _i64,
                                      ptr_t, _i64])
        kind = "s" if dtype == types.float32 else "d"
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"tg_lapacke_{kind}gesdd")

        def i64(v, ty):
            return context.cast(builder, v, ty, types.int64)

        def at_least_1(v):
            return builder.select(builder.icmp_signed(">", v, ir.Constant(_i64, 1)), v,
                                  ir.Constant(_i64, 1))

        jobz = builder.select(builder.icmp_signed("!=", i64(vvec, sa[0]), ir.Constant(_i64, 0)),
                              ir.Constant(_i8, ord("S")), ir.Constant(_i8, ord("N")))
        nn = i64(vn, sa[2])
        return builder.call(fn, (ir.Constant(_i32, _ROW_MAJOR), jobz, i64(vm, sa[1]), nn,
                                 _ptr(context, builder, sa[3], va, voa, sa[4], fty), at_least_1(nn),
                                 _ptr(context, builder, sa[5], vs, vos, sa[6], fty),
                                 _ptr(context, builder, sa[7], vu, vou, sa[8], fty),
                                 at_least_1(i64(vldu, sa[9])),
                                 _ptr(context, builder, sa[10], vvt, vovt, sa[11], fty),
                                 at_least_1(i64(vldvt, sa[12]))))

    return types.int64(vectors, m, n, a, offa, s, offs, u, offu, ldu, vt, offvt, ldvt), codegen


def _qr_call(routine: str):
    """An intrinsic (m, ncols, k, a, offa, lda, tau, offt) -> info: LAPACKE's geqrf (QR of
    the row-major (m, ncols) matrix at a[offa:], in place; k ignored) or orgqr (the
    first ncols columns of Q from k reflectors), row-major, allocating their workspace."""
    def typer(typingctx, m, ncols, k, a, offa, lda, tau, offt):
        if not (_float_array(a) and _float_array(tau) and a.dtype == tau.dtype):
            return None

        def codegen(context, builder, signature, args):
            vm, vc, vk, va, voa, vlda, vt, vot = args
            sa = signature.args
            dtype = sa[3].dtype
            fty = context.get_value_type(dtype)
            ptr_t = fty.as_pointer()
            sizes = [context.cast(builder, v, ty, types.int64)
                     for v, ty in ((vm, sa[0]), (vc, sa[1]), (vk, sa[2]))]
            if routine == "geqrf":
                sizes = sizes[:2]
            fnty = ir.FunctionType(_i64, [_i32] + [_i64] * len(sizes) + [ptr_t, _i64, ptr_t])
            kind = "s" if dtype == types.float32 else "d"
            fn = cgutils.get_or_insert_function(builder.module, fnty,
                                                f"tg_lapacke_{kind}{routine}")
            lda = context.cast(builder, vlda, sa[5], types.int64)
            lda = builder.select(builder.icmp_signed(">", lda, ir.Constant(_i64, 1)), lda,
                                 ir.Constant(_i64, 1))
            return builder.call(fn, [ir.Constant(_i32, _ROW_MAJOR)] + sizes + [
                _ptr(context, builder, sa[3], va, voa, sa[4], fty), lda,
                _ptr(context, builder, sa[6], vt, vot, sa[7], fty)])

        return types.int64(m, ncols, k, a, offa, lda, tau, offt), codegen
    typer.__name__ = typer.__qualname__ = f"tg_{routine}"
    return typer


tg_geqrf = intrinsic(_qr_call("geqrf"))
tg_orgqr = intrinsic(_qr_call("orgqr"))


# ------------------------------------------------------------- shared loops
# Compiled once (and cached on disk by Numba), called by every kernel: as loops
# inlined in each kernel they cost ~0.2 s of Numba compile per cholesky node.

from numba import njit


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
