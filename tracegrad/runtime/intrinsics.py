"""Low-level Numba intrinsics the generated kernels import.

- `tg_gemm`: C = op(A) @ op(B) through CBLAS. It prefers the OpenBLAS that
  NumPy itself ships (already loaded with numpy, so no import cost), found by
  symbol name: `llvmlite.binding.add_symbol` registers it, and the generated
  code refers to the name, not an address, so Numba can cache it. Without
  it, it falls back to Numba's own C helper `numba_xxgemm` over SciPy's BLAS
  (importing scipy.linalg costs ~0.2 s). Either way it skips the layout
  dispatch that makes `np.dot` inside njit cost ~0.4 s of compile per signature.
- `tg_f64_from_bits` / `tg_f32_from_bits`: reinterpret an integer's bits as a
  float, which the exp approximation needs to build 2**n without a libm call.

Importing this module imports numba; only generated modules import it.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, _CBLAS_TRANS = 101, 111, 112


def _register_numpy_cblas() -> bool:
    """Make NumPy's bundled OpenBLAS cblas_?gemm callable by name from LLVM code."""
    import ctypes

    import llvmlite.binding as llvm

    from tracegrad.runtime.numpy_openblas import library

    lib = library()
    if lib is None:
        return False
    try:
        addresses = {
            f"tg_cblas_{kind}{routine}": ctypes.cast(
                getattr(lib, f"scipy_cblas_{kind}{routine}64_"), ctypes.c_void_p
            ).value
            for kind in "sd"
            for routine in ("gemm", "gemv")
        }
    except AttributeError:
        return False
    for name, address in addresses.items():
        llvm.add_symbol(name, address)
    return True


NUMPY_CBLAS = _register_numpy_cblas()
if not NUMPY_CBLAS:
    from numba.np.linalg import ensure_blas

    ensure_blas()  # SciPy's cython_blas must be importable for numba_xxgemm

_char = ir.IntType(8)
_void_p = ir.IntType(8).as_pointer()


@intrinsic
def tg_gemm(typingctx, transa, transb, m, n, k, a, offa, lda, b, offb, ldb, beta, c, offc, ldc):
    """Row-major C[m,n] = op(A)[m,k] @ op(B)[k,n] + beta*C; trans* are 0/1 (int).

    `a`, `b`, `c` are 1-D arrays and `off*` element offsets into them: the
    matrices start at a[offa], b[offb], c[offc]. The caller guarantees the
    leading dimensions `lda`, `ldb`, `ldc` fit their memory (row-major rows).
    """
    sig = types.void(transa, transb, m, n, k, a, offa, lda, b, offb, ldb, beta, c, offc, ldc)

    def codegen(context, builder, signature, all_args):
        sa = signature.args
        ta, tb, vm, vn, vk, va, voa, vlda, vb, vob, vldb, vbeta, vc, voc, vldc = all_args
        arr_a = _offset_view(context, builder, sa[5], va, voa, sa[6])
        arr_b = _offset_view(context, builder, sa[8], vb, vob, sa[9])
        arr_c = _offset_view(context, builder, sa[12], vc, voc, sa[13])
        signature = types.void(
            sa[0], sa[1], sa[2], sa[3], sa[4], sa[5], sa[7], sa[8], sa[10], sa[11], sa[12], sa[14]
        )
        args = (ta, tb, vm, vn, vk, va, vlda, vb, vldb, vbeta, vc, vldc)
        ta, tb, vm, vn, vk, va, vlda, vb, vldb, vbeta, vc, vldc = args
        dtype = signature.args[10].dtype
        intp_t = context.get_value_type(types.intp)
        if NUMPY_CBLAS:
            _call_numpy_cblas(context, builder, signature, args, arr_a, arr_b, arr_c, dtype)
            return context.get_dummy_value()
        fnty = ir.FunctionType(
            ir.IntType(32),
            [
                _char,
                _char,
                _char,
                intp_t,
                intp_t,
                intp_t,
                _void_p,
                _void_p,
                intp_t,
                _void_p,
                intp_t,
                _void_p,
                _void_p,
                intp_t,
            ],
        )
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        alpha = cgutils.alloca_once_value(builder, context.get_constant(dtype, 1.0))
        beta_val = context.cast(builder, vbeta, signature.args[9], dtype)
        beta_slot = cgutils.alloca_once_value(builder, beta_val)
        from numba.np.linalg import get_blas_kind

        kind = ir.Constant(_char, ord(get_blas_kind(dtype)))

        def flag(v, ty):
            v = context.cast(builder, v, ty, types.intp)
            is_t = builder.icmp_signed("!=", v, ir.Constant(intp_t, 0))
            return builder.select(is_t, ir.Constant(_char, ord("t")), ir.Constant(_char, ord("n")))

        def as_intp(v, ty):
            return context.cast(builder, v, ty, types.intp)

        # BLAS is column-major: row-major C = A@B is column-major C^T = B^T @ A^T.
        builder.call(
            fn,
            (
                kind,
                flag(tb, signature.args[1]),
                flag(ta, signature.args[0]),
                as_intp(vn, signature.args[3]),
                as_intp(vm, signature.args[2]),
                as_intp(vk, signature.args[4]),
                builder.bitcast(alpha, _void_p),
                builder.bitcast(arr_b.data, _void_p),
                as_intp(vldb, signature.args[8]),
                builder.bitcast(arr_a.data, _void_p),
                as_intp(vlda, signature.args[6]),
                builder.bitcast(beta_slot, _void_p),
                builder.bitcast(arr_c.data, _void_p),
                as_intp(vldc, signature.args[11]),
            ),
        )
        return context.get_dummy_value()

    return sig, codegen


class _Ptr:
    """Just a data pointer, standing in for an array struct."""

    def __init__(self, data):
        self.data = data


def _offset_view(context, builder, arr_ty, arr, offset, offset_ty):
    ary = context.make_array(arr_ty)(context, builder, arr)
    off = context.cast(builder, offset, offset_ty, types.intp)
    return _Ptr(builder.gep(ary.data, [off]))


def _call_numpy_cblas(context, builder, signature, args, arr_a, arr_b, arr_c, dtype):
    ta, tb, vm, vn, vk, va, vlda, vb, vldb, vbeta, vc, vldc = args
    i32, i64 = ir.IntType(32), ir.IntType(64)
    fty = context.get_value_type(dtype)
    ptr = fty.as_pointer()
    fnty = ir.FunctionType(
        ir.VoidType(), [i32, i32, i32, i64, i64, i64, fty, ptr, i64, ptr, i64, fty, ptr, i64]
    )
    name = "tg_cblas_sgemm" if dtype == types.float32 else "tg_cblas_dgemm"
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)

    def flag(v, ty):
        v = context.cast(builder, v, ty, types.intp)
        is_t = builder.icmp_signed("!=", v, ir.Constant(v.type, 0))
        return builder.select(
            is_t, ir.Constant(i32, _CBLAS_TRANS), ir.Constant(i32, _CBLAS_NO_TRANS)
        )

    def i(v, ty):
        return context.cast(builder, v, ty, types.int64)

    sa = signature.args
    one, alpha = ir.Constant(i64, 1), context.get_constant(dtype, 1.0)
    beta = context.cast(builder, vbeta, sa[9], dtype)
    a_ptr, b_ptr, c_ptr = (builder.bitcast(x.data, ptr) for x in (arr_a, arr_b, arr_c))
    m, n, k = i(vm, sa[2]), i(vn, sa[3]), i(vk, sa[4])
    lda, ldb, ldc = i(vlda, sa[6]), i(vldb, sa[8]), i(vldc, sa[11])
    # A matrix-vector product (n == 1) through gemv: OpenBLAS's gemm with one column
    # took 3x numpy's `X @ w` (28 against 9 us for 1000 x 50, float64)
    gemv = cgutils.get_or_insert_function(
        builder.module,
        ir.FunctionType(
            ir.VoidType(), [i32, i32, i64, i64, fty, ptr, i64, ptr, i64, fty, ptr, i64]
        ),
        "tg_cblas_sgemv" if dtype == types.float32 else "tg_cblas_dgemv",
    )
    is_vector = builder.icmp_signed("==", n, one)
    with builder.if_else(is_vector) as (then, otherwise):
        with then:
            # C[:, 0] = op(A) @ B[:, 0]; op(A) is A (m x k, row-major) or A.T (A is k x m)
            a_is_t = builder.icmp_signed("!=", i(ta, sa[0]), ir.Constant(i64, 0))
            rows = builder.select(a_is_t, k, m)
            cols = builder.select(a_is_t, m, k)
            # B's column: stride ldb when B is k x 1, 1 when op(B) = B.T (B is 1 x k)
            b_is_t = builder.icmp_signed("!=", i(tb, sa[1]), ir.Constant(i64, 0))
            incx = builder.select(b_is_t, one, ldb)
            builder.call(
                gemv,
                (
                    ir.Constant(i32, _CBLAS_ROW_MAJOR),
                    flag(ta, sa[0]),
                    rows,
                    cols,
                    alpha,
                    a_ptr,
                    lda,
                    b_ptr,
                    incx,
                    beta,
                    c_ptr,
                    ldc,
                ),
            )
        with otherwise:
            builder.call(
                fn,
                (
                    ir.Constant(i32, _CBLAS_ROW_MAJOR),
                    flag(ta, sa[0]),
                    flag(tb, sa[1]),
                    m,
                    n,
                    k,
                    alpha,
                    a_ptr,
                    lda,
                    b_ptr,
                    ldb,
                    beta,
                    c_ptr,
                    ldc,
                ),
            )


@intrinsic
def tg_f64_from_bits(typingctx, bits):
    """The float64 whose bit pattern is the int64 `bits`."""

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.bitcast(v, ir.DoubleType())

    return types.float64(bits), codegen


@intrinsic
def tg_f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the int32 `bits`."""

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.bitcast(v, ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def tg_flat(typingctx, arr):
    """A C-contiguous array of any ndim seen as 1-D (a view; cheaper to compile
    than `arr.reshape(n)`, which carries shape checks)."""
    if not isinstance(arr, types.Array) or arr.layout != "C":
        return None
    ret = types.Array(arr.dtype, 1, "C", readonly=not arr.mutable)

    def codegen(context, builder, signature, args):
        from numba.core.imputils import impl_ret_borrowed
        from numba.np.arrayobj import populate_array

        src = context.make_array(signature.args[0])(context, builder, args[0])
        dst = context.make_array(ret)(context, builder)
        itemsize = context.get_constant(
            types.intp, context.get_abi_sizeof(context.get_data_type(arr.dtype))
        )
        populate_array(
            dst,
            data=src.data,
            shape=[src.nitems],
            strides=[itemsize],
            itemsize=itemsize,
            meminfo=src.meminfo,
            parent=src.parent,
        )
        return impl_ret_borrowed(context, builder, ret, dst._getvalue())

    return ret(arr), codegen


@intrinsic
def tg_bits_from_f64(typingctx, value):
    """The int64 holding the bit pattern of the float64 `value`."""

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.float64)
        return builder.bitcast(v, ir.IntType(64))

    return types.int64(value), codegen


# Exact-order arithmetic for the math helpers. The helpers are inlined into
# kernels compiled with fast-math ('reassoc', 'arcp', ...), which lets LLVM
# regroup `(x - k*hi) - k*lo` or `p * s1 * s2`; these intrinsics emit the
# operations WITHOUT fast-math flags, so their order (and rounding) is kept,
# while staying plain vectorizable instructions.


@intrinsic
def tg_cw2(typingctx, x, k, c1, c2):
    """(x - k*c1) - k*c2 in float64, in exactly this order (Cody-Waite)."""

    def codegen(context, builder, signature, args):
        vals = [
            context.cast(builder, v, t, types.float64)
            for v, t in zip(args, signature.args, strict=True)
        ]
        x_, k_, a, b = vals
        return builder.fsub(builder.fsub(x_, builder.fmul(k_, a)), builder.fmul(k_, b))

    return types.float64(x, k, c1, c2), codegen


@intrinsic
def tg_cw3(typingctx, x, k, c1, c2, c3):
    """((x - k*c1) - k*c2) - k*c3 in float64, in exactly this order."""

    def codegen(context, builder, signature, args):
        vals = [
            context.cast(builder, v, t, types.float64)
            for v, t in zip(args, signature.args, strict=True)
        ]
        x_, k_, a, b, c = vals
        r = builder.fsub(x_, builder.fmul(k_, a))
        r = builder.fsub(r, builder.fmul(k_, b))
        return builder.fsub(r, builder.fmul(k_, c))

    return types.float64(x, k, c1, c2, c3), codegen


@intrinsic
def tg_scale2(typingctx, p, k1, k2):
    """p * 2**k1 * 2**k2 (float64; k1, k2 in the normal exponent range), left
    to right, so a result near overflow or in the subnormals rounds once."""

    def codegen(context, builder, signature, args):
        p_ = context.cast(builder, args[0], signature.args[0], types.float64)
        i64 = ir.IntType(64)
        out = p_
        for v, t in zip(args[1:], signature.args[1:], strict=True):
            k = context.cast(builder, v, t, types.int64)
            bits = builder.shl(builder.add(k, ir.Constant(i64, 1023)), ir.Constant(i64, 52))
            out = builder.fmul(out, builder.bitcast(bits, ir.DoubleType()))
        return out

    return types.float64(p, k1, k2), codegen


def tg_noinline(dispatcher):
    """Mark a compiled njit function `noinline` for LLVM, so the callers that
    share it (outlined loops, called many times) keep ONE copy instead of
    each call site re-optimizing an inlined copy. Call it right after the
    function's (eager, explicit-signature) compilation, before any caller
    compiles. Harmless on a function loaded from Numba's cache."""
    for cres in dispatcher.overloads.values():
        try:
            module = cres.library._final_module
            fn = module.get_function(cres.fndesc.llvm_func_name)
            fn.add_function_attribute("noinline")
        except Exception:  # a cache-loaded library: nothing to link, nothing to do
            pass
    return dispatcher


@intrinsic
def tg_view(typingctx, arr, offset, shape):
    """A C-contiguous array of `shape` viewing `arr[offset:]` (a 1-D C array),
    sharing its memory. Kernels carve all their outputs out of one allocation
    per dtype this way: one `np.empty` signature to compile instead of one per
    output rank, and one allocation per call."""
    if not (
        isinstance(arr, types.Array)
        and arr.ndim == 1
        and arr.layout == "C"
        and isinstance(shape, types.BaseTuple)
    ):
        return None
    ndim = len(shape)
    ret = types.Array(arr.dtype, ndim, "C")

    def codegen(context, builder, signature, args):
        from numba.core.imputils import impl_ret_borrowed
        from numba.np.arrayobj import populate_array

        src = context.make_array(signature.args[0])(context, builder, args[0])
        off = context.cast(builder, args[1], signature.args[1], types.intp)
        dims = [
            context.cast(builder, v, t, types.intp)
            for v, t in zip(
                cgutils.unpack_tuple(builder, args[2], ndim), signature.args[2], strict=True
            )
        ]
        itemsize = context.get_constant(
            types.intp, context.get_abi_sizeof(context.get_data_type(arr.dtype))
        )
        strides, step = [], itemsize
        for d in reversed(dims):
            strides.append(step)
            step = builder.mul(step, d)
        dst = context.make_array(ret)(context, builder)
        populate_array(
            dst,
            data=builder.gep(src.data, [off]),
            shape=dims,
            strides=list(reversed(strides)),
            itemsize=itemsize,
            meminfo=src.meminfo,
            parent=None,
        )
        return impl_ret_borrowed(context, builder, ret, dst._getvalue())

    return ret(arr, offset, shape), codegen


# float32 twins of the helpers above, for the native float32 math helpers.


@intrinsic
def tg_bits_from_f32(typingctx, value):
    """The int32 holding the bit pattern of the float32 `value`."""

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.float32)
        return builder.bitcast(v, ir.IntType(32))

    return types.int32(value), codegen


@intrinsic
def tg_cw2_f32(typingctx, x, k, c1, c2):
    """(x - k*c1) - k*c2 in float32, in exactly this order (Cody-Waite)."""

    def codegen(context, builder, signature, args):
        vals = [
            context.cast(builder, v, t, types.float32)
            for v, t in zip(args, signature.args, strict=True)
        ]
        x_, k_, a, b = vals
        return builder.fsub(builder.fsub(x_, builder.fmul(k_, a)), builder.fmul(k_, b))

    return types.float32(x, k, c1, c2), codegen


@intrinsic
def tg_scale2_f32(typingctx, p, k1, k2):
    """p * 2**k1 * 2**k2 in float32 (k1, k2 in the normal exponent range), left
    to right, so a result near overflow or in the subnormals rounds once."""

    def codegen(context, builder, signature, args):
        out = context.cast(builder, args[0], signature.args[0], types.float32)
        i32 = ir.IntType(32)
        for v, t in zip(args[1:], signature.args[1:], strict=True):
            k = context.cast(builder, v, t, types.int32)
            bits = builder.shl(builder.add(k, ir.Constant(i32, 127)), ir.Constant(i32, 23))
            out = builder.fmul(out, builder.bitcast(bits, ir.FloatType()))
        return out

    return types.float32(p, k1, k2), codegen
