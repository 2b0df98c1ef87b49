"""Complex numbers in the rule table: real, imag, conj, complex (issue 26).

The vjp rules of every primitive follow JAX's convention: a rule is the
*transpose* (not the conjugate transpose) of the op's linear map, so for a
holomorphic op it is `g * f'(z)` -- the very rules the real-valued table
already has. The non-holomorphic ops below transpose the real-linear maps
z -> Re z, z -> Im z, z -> conj z and (x, y) -> x + iy (JAX's `real_p`,
`imag_p`, `conj_p`, `complex_p` rules). PyTorch's convention (eager mode's
`z.grad`) is the conjugate of these, and tracegrad.eager gets it by conjugating
complex gradients on the way into and out of each node (eager/graph.py), so
there is still one rule per op.

    >>> import numpy as np
    >>> from tracegrad.ops import complex_ops as C
    >>> z = np.array([1 + 2j])
    >>> C.real(z), C.imag(z), C.conj(z)
    (array([1.]), array([2.]), array([1.-2.j]))
    >>> C.make_complex(np.array([1.0]), np.array([3.0]))
    array([1.+3.j])
"""

from __future__ import annotations

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY, Aval, DTypeError, op_error, primitive
from tracegrad.ops.rulekit import array_avals, as_aval, broadcast_shapes, returns_array


def is_complex(value) -> bool:
    """Whether `value` (an array, tracer, tensor, Aval or dtype) is complex."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return isinstance(value, complex)
    if isinstance(value, Aval):
        return value.dtype.kind == "c"
    np_dtype = getattr(value, "np_dtype", None)  # eager tensors: their NumPy dtype
    return np.dtype(np_dtype if np_dtype is not None else T.aval_of(value).dtype).kind == "c"


def real_dtype(dtype) -> np.dtype:
    """complex64 -> float32, complex128 -> float64; real dtypes stay."""
    dtype = np.dtype(dtype)
    return np.empty(0, dtype).real.dtype if dtype.kind == "c" else dtype


def complex_dtype(dtype) -> np.dtype:
    """float32 -> complex64, other real dtypes -> complex128; complex stays."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    return np.dtype(np.complex64) if dtype in (np.float32, np.float16) else np.dtype(np.complex128)


def _part_rule(name):
    def rule(x):
        x = as_aval(x)
        return Aval(x.shape, real_dtype(x.dtype))

    rule.__name__ = f"{name}_rule"
    return rule


def _real_vjp(g, out, x):
    # Re is real-linear; its transpose puts g back as the real part (JAX: complex(t, 0))
    return T.astype(g, dtype=np.dtype(T.aval_of(x).dtype).name) if is_complex(x) else g


def _imag_vjp(g, out, x):
    if not is_complex(x):
        return None  # Im of a real array is 0: no gradient
    # JAX: complex(0, -t)
    return T.mul(T.astype(g, dtype=np.dtype(T.aval_of(x).dtype).name), -1j)


def _conj_vjp(g, out, x):
    return conj(g) if is_complex(x) else g


def _real_jvp(primals, tangents, out):
    return real(tangents[0])


def _imag_jvp(primals, tangents, out):
    return imag(tangents[0])


def _conj_jvp(primals, tangents, out):
    return conj(tangents[0])


real = primitive(
    "real",
    impl=returns_array(lambda x: np.array(np.real(x))),
    shape_rule=_part_rule("real"),
    kind="elementwise",
    vjps=(_real_vjp,),
    jvp=_real_jvp,
    torch_name="RealBackward0",
    saves=(),
    codegen="({0}).real",
)

imag = primitive(
    "imag",
    impl=returns_array(lambda x: np.array(np.imag(x))),
    shape_rule=_part_rule("imag"),
    kind="elementwise",
    vjps=(_imag_vjp,),
    jvp=_imag_jvp,
    torch_name="ImagBackward0",
    saves=(),
    codegen="({0}).imag",
)

conj = primitive(
    "conj",
    impl=returns_array(np.conjugate),
    shape_rule=lambda x: as_aval(x),
    kind="elementwise",
    vjps=(_conj_vjp,),
    jvp=_conj_jvp,
    torch_name="ConjBackward0",
    saves=(),
    codegen="({0}).conjugate()",
)


def _complex_rule(x, y):
    x, y = as_aval(x), as_aval(y)
    shape = broadcast_shapes("complex", x, y)
    for a in (x, y):
        if a.dtype.kind not in "biuf":
            raise op_error(
                "complex",
                array_avals(x, y),
                f"expected real operands, got {a.dtype}",
                cls=DTypeError,
            )
    both = np.result_type(x.dtype, y.dtype)
    return Aval(shape, complex_dtype(both if both.kind == "f" else np.float64))


def _complex_impl(x, y):
    dtype = _complex_rule(T.aval_of(x), T.aval_of(y)).dtype
    out = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)), dtype)
    out.real, out.imag = x, y
    return out


def _complex_jvp(primals, tangents, out):
    tx, ty = tangents
    dtype = np.dtype(T.aval_of(out).dtype).name
    if tx is None and ty is None:
        return None
    if ty is None:
        return T.astype(tx, dtype=dtype)
    if tx is None:
        return T.mul(T.astype(ty, dtype=dtype), 1j)
    return make_complex(tx, ty)


make_complex = primitive(  # x + iy from real x, y (torch.complex, lax.complex)
    "complex",
    impl=_complex_impl,
    shape_rule=_complex_rule,
    kind="elementwise",
    # JAX: [real(t), imag(neg(t))]
    vjps=(lambda g, out, x, y: real(g), lambda g, out, x, y: REGISTRY["neg"](imag(g))),
    jvp=_complex_jvp,
    torch_name="ComplexBackward0",
    saves=(),
    codegen="complex({0}, {1})",
)
