"""Low-level Numba intrinsics the generated kernels import.

- `tg_gemm`: C = op(A) @ op(B) through the BLAS that SciPy ships, called the way
  Numba's own `np.dot` does (its C helper `numba_xxgemm`), but without the
  layout dispatch that makes `np.dot` cost ~0.4 s of compile per signature.
- `tg_f64_from_bits` / `tg_f32_from_bits`: reinterpret an integer's bits as a
  float, which the exp approximation needs to build 2**n without a libm call.

Importing this module imports numba; only generated modules import it.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import ensure_blas, get_blas_kind

ensure_blas()  # SciPy's cython_blas must be importable for numba_xxgemm

_char = ir.IntType(8)
_void_p = ir.IntType(8).as_pointer()


@intrinsic
def tg_gemm(typingctx, transa, transb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """Row-major C[m,n] = op(A)[m,k] @ op(B)[k,n] + beta*C; trans* are 0/1 (int).

    `a`, `b`, `c` are arrays (any view); only their data pointers are used, so
    the caller guarantees the leading dimensions `lda`, `ldb`, `ldc` match
    their memory (row-major, C-contiguous rows).
    """
    sig = types.void(transa, transb, m, n, k, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        ta, tb, vm, vn, vk, va, vlda, vb, vldb, vbeta, vc, vldc = args
        arr_a = context.make_array(signature.args[5])(context, builder, va)
        arr_b = context.make_array(signature.args[7])(context, builder, vb)
        arr_c = context.make_array(signature.args[10])(context, builder, vc)
        dtype = signature.args[10].dtype
        intp_t = context.get_value_type(types.intp)
        fnty = ir.FunctionType(ir.IntType(32), [
            _char, _char, _char, intp_t, intp_t, intp_t, _void_p, _void_p, intp_t,
            _void_p, intp_t, _void_p, _void_p, intp_t])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        alpha = cgutils.alloca_once_value(builder, context.get_constant(dtype, 1.0))
        beta_val = context.cast(builder, vbeta, signature.args[9], dtype)
        beta_slot = cgutils.alloca_once_value(builder, beta_val)
        kind = ir.Constant(_char, ord(get_blas_kind(dtype)))

        def flag(v, ty):
            v = context.cast(builder, v, ty, types.intp)
            is_t = builder.icmp_signed("!=", v, ir.Constant(intp_t, 0))
            return builder.select(is_t, ir.Constant(_char, ord("t")), ir.Constant(_char, ord("n")))

        def as_intp(v, ty):
            return context.cast(builder, v, ty, types.intp)

        # BLAS is column-major: row-major C = A@B is column-major C^T = B^T @ A^T.
        builder.call(fn, (
            kind, flag(tb, signature.args[1]), flag(ta, signature.args[0]),
            as_intp(vn, signature.args[3]), as_intp(vm, signature.args[2]),
            as_intp(vk, signature.args[4]),
            builder.bitcast(alpha, _void_p), builder.bitcast(arr_b.data, _void_p),
            as_intp(vldb, signature.args[8]),
            builder.bitcast(arr_a.data, _void_p), as_intp(vlda, signature.args[6]),
            builder.bitcast(beta_slot, _void_p), builder.bitcast(arr_c.data, _void_p),
            as_intp(vldc, signature.args[11])))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def tg_f64_from_bits(typingctx, bits):
    """The float64 whose bit pattern is the int64 `bits`."""
    sig = types.float64(types.int64)

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
