"""The rule table: every primitive tracegrad knows, one definition each.

Each entry holds its NumPy implementation, its shape/dtype rule, one
vector-Jacobian rule per input (written in tracegrad ops, so the rule works on
eager tensors, on tracers and on plain arrays), the PyTorch name of its eager
backward node, what that node saves, and its code generation.

For elementwise primitives `codegen` is a scalar expression template over the
operands `{0}`, `{1}`, ... (fast math helpers such as `tg_exp` live in
tracegrad.runtime.mathlib), or a callable `codegen(**attrs) -> template` when
the template depends on static attrs (clip, astype, full_like). The scalar
helpers the templates use are: tg_exp tg_log tg_log1p tg_sqrt tg_sin tg_cos tg_tanh
tg_sigmoid tg_relu tg_sign tg_pow tg_maximum tg_minimum tg_where tg_isfinite
(tests/ops/test_registry.py notices a new one). For structured
primitives `codegen` names a loop template in tracegrad.codegen that reads the
node's attrs.

Variadic primitives (concatenate, getitem, index_add_zeros) hold their vjps in
a `PerOperand` object: `prim.vjps[i]` is the rule for operand i, for any i.
Always index `prim.vjps[i]`; do not call len() on it.

Gradients returned by a rule may have the broadcast output shape; the autodiff
drivers sum them back to each input's shape (`sum_to_shape`), once, for all ops.

Adding an op: define it here (impl, shape_rule, vjps in tracegrad ops,
torch_name, saves, codegen), add a row to tests/ops/op_cases.py (the table
tests then check impl, vjp and grad-of-grad), and a NumPy-named function to
tracegrad/ops/api.py; structured kinds also need an emitter in tracegrad.codegen.
Shared shape/dtype machinery lives in tracegrad.ops.rulekit.
Families, in order: arithmetic, elementwise functions, comparisons and logic,
reductions, softmax family, shape ops, matmul, indexing.
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.ops.blas_threads import limited
from tracegrad.ops.core import (
    REGISTRY,
    Aval,
    DTypeError,
    OutOfRangeError,
    aval_of,
    op_error,
    primitive,
    promote,
)
from tracegrad.ops.parallel import elementwise_impl, fused_vjp
from tracegrad.ops.rulekit import (  # noqa: F401  (re-exported: drivers and tests use T.<name>)
    PerOperand,
    along_axis_shape,
    array_avals,
    as_aval,
    broadcast_shapes,
    comparison_rule,
    dtype_name,
    elementwise_rule,
    index_shape,
    is_static_scalar,
    kept_shape,
    literal,
    no_grad,
    normalize_axes,
    reduce_rule,
    returns_array,
    slice_length,
    spec_to_index,
)

# --------------------------------------------------------------- arithmetic
# jvp rules take (primals, tangents, out, **attrs), a None tangent being zero, and
# return the output's tangent (None: zero); the forward-mode pass (tracegrad/forward.py)
# broadcasts and casts it to the output. Elementwise ops without one use their vjp
# applied to the tangent (their Jacobian is diagonal): tracegrad.forward.jvp_rule.


def _plus(a, b):
    """a + b where None is zero (tangents)."""
    return b if a is None else a if b is None else add(a, b)


def _minus(a, b):
    return a if b is None else neg(b) if a is None else sub(a, b)


def _or_zeros(t, like):
    """A tangent, or zeros shaped like its primal."""
    return full_like(like, value=0) if t is None else t


def _linear_jvp(name):
    """The jvp of primitive `name`, linear in its first operand (the others are index
    arrays, without tangents): the op applied to the tangent."""

    def rule(primals, tangents, out, **attrs):
        t = tangents[0]
        return None if t is None else REGISTRY[name](t, *primals[1:], **attrs)

    rule.__name__ = f"{name}_jvp"
    return rule


def _mul_jvp(primals, tangents, out):
    (x, y), (tx, ty) = primals, tangents
    return _plus(None if tx is None else mul(tx, y), None if ty is None else mul(x, ty))


def _div_jvp(primals, tangents, out):
    (_, y), (tx, ty) = primals, tangents
    # d(x / y) = tx / y - ty * (x / y) / y
    return _minus(None if tx is None else div(tx, y), None if ty is None else div(mul(ty, out), y))


add = primitive(
    "add",
    impl=elementwise_impl(np.add),
    shape_rule=elementwise_rule("add"),
    kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: g),
    jvp=lambda primals, tangents, out: _plus(*tangents),
    torch_name="AddBackward0",
    saves=(),
    codegen="({0} + {1})",
)

sub = primitive(
    "sub",
    impl=elementwise_impl(np.subtract),
    shape_rule=elementwise_rule("sub", no_bool=True),
    kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: neg(g)),
    jvp=lambda primals, tangents, out: _minus(*tangents),
    # PyTorch: `1 - x` is rsub
    torch_name=lambda x, y: "RsubBackward1" if is_static_scalar(x) else "SubBackward0",
    torch_visible=lambda args: (1,) if isinstance(args[0], (int, float)) else None,
    saves=(),
    codegen="({0} - {1})",
)

mul = primitive(
    "mul",
    impl=elementwise_impl(np.multiply),
    shape_rule=elementwise_rule("mul"),
    kind="elementwise",
    vjps=(lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(g, x)),
    jvp=_mul_jvp,
    torch_name="MulBackward0",
    saves=(0, 1),
    codegen="({0} * {1})",
    # PyTorch keeps `other` only to differentiate `self`, and the reverse; a Python scalar
    # operand is kept as a wrapped tensor (so a second backward through `x * 2` raises)
    save_only_if_needed={0: 1, 1: 0},
    saves_scalars=True,
)

div = primitive(
    "div",
    impl=elementwise_impl(np.true_divide),
    shape_rule=elementwise_rule("div", float_out=True),
    kind="elementwise",
    vjps=(
        lambda g, out, x, y: div(g, y),
        # PyTorch's form: -g * ((x / y) / y), which overflows later than x / y**2
        lambda g, out, x, y: neg(mul(g, div(div(x, y), y))),
    ),
    jvp=_div_jvp,
    torch_name="DivBackward0",
    saves=(0, 1),
    codegen="({0} / {1})",
    save_only_if_needed={0: 1},
    saves_scalars=True,
)

neg = primitive(
    "neg",
    impl=elementwise_impl(np.negative),
    shape_rule=elementwise_rule("neg", no_bool=True),
    kind="elementwise",
    vjps=(lambda g, out, x: neg(g),),
    jvp=lambda primals, tangents, out: neg(tangents[0]),
    torch_name="NegBackward0",
    saves=(),
    codegen="(-{0})",
)


def _pow_vjp_base(g, out, x, y):
    if is_static_scalar(x):
        return None
    if is_static_scalar(y):
        if y == 0:  # PyTorch: zeros, not g * 0 * x**-1
            return full_like(g, value=0)
        if y == 2:  # x ** 1 is x exactly: skip a pow (NumPy's float64 pow(x, 1) is slow)
            return mul(g, mul(y, x))
        return mul(g, mul(y, pow_(x, y - 1)))
    # zero where y == 0 and x is 0 or nan (0 * x**-1 would be nan there; PyTorch masks
    # every y == 0, which gives the same first derivative but drops d/dy of this one:
    # the Hessian's mixed term at y == 0 is 1/x, as the other order gives)
    zero_pow = logical_and(eq(y, 0), logical_or(eq(x, 0), ne(x, x)))
    # the masked branch runs on x = 1 there, so its own derivative is finite: 0 * x**-2
    # gave nan in the second derivative (autograd's test_power_arg0 wants 0)
    safe_x = where(zero_pow, 1.0, x)
    return where(zero_pow, 0, mul(g, mul(y, pow_(safe_x, sub(y, 1)))))


def _pow_vjp_exponent(g, out, x, y):
    if is_static_scalar(y):
        return None
    if is_static_scalar(x):
        # log of a Python scalar stays a weak Python float (no float64 drift)
        log_x = math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
        if x != 0:
            return mul(g, mul(out, log_x))
        # 0 ** y: 0 for y >= 0; the masked branch multiplies by 0, not by -inf, so the
        # second derivative is 0 there, not nan (autograd's test_power_arg1_zero)
        positive = ge(y, 0)
        return where(positive, 0.0, mul(g, mul(out, where(positive, 0.0, log_x))))
    # PyTorch: where x == 0 and y >= 0 the gradient is 0, not nan (log runs on 1 there,
    # so the second derivative is finite too)
    at_zero = logical_and(eq(x, 0), ge(y, 0))
    return mul(g, where(at_zero, 0.0, mul(out, log(where(at_zero, 1.0, x)))))


def _pow_torch_name(x, y):
    if is_static_scalar(y):
        return "PowBackward0"
    return "PowBackward2" if is_static_scalar(x) else "PowBackward1"


pow_ = primitive(
    "pow",
    impl=elementwise_impl(np.power),
    shape_rule=elementwise_rule("pow"),
    kind="elementwise",
    vjps=(_pow_vjp_base, _pow_vjp_exponent),
    # x ** 2 keeps x only (so `y = x**2; y += 1; y.backward()` works); scalars are never saved
    torch_name=_pow_torch_name,
    saves=(0, 1),
    codegen="tg_pow({0}, {1})",
    # PowBackward1/2 (tensor exponent) also keep the result; PowBackward0 does not
    saves_by_call=lambda args: (0, 1, "out") if not isinstance(args[1], (int, float)) else (0,),
    torch_visible=lambda args: (
        (1,)
        if isinstance(args[0], (int, float))
        else (0,)
        if isinstance(args[1], (int, float))
        else None
    ),
)

# ------------------------------------------------------ elementwise functions


def _float_operand(impl):
    """Run a float function on int/bool arrays in float64: NumPy would pick float16 for
    bool/int8/uint8 (eager mode then gives PyTorch's float32, as for int64)."""

    def run(x):
        if type(x) is np.ndarray and x.dtype.kind in "biu":
            x = x.astype(np.float64)
        return impl(x)

    run.__name__ = getattr(impl, "__name__", "impl")
    return run


def _unary(
    name, impl, vjp, codegen, saves, torch_name=None, float_only=True, shape_rule=None, jvp=None
):
    impl = elementwise_impl(impl) if isinstance(impl, np.ufunc) else returns_array(impl)
    impl = _float_operand(impl) if float_only else impl
    return primitive(
        name,
        impl=impl,
        shape_rule=shape_rule or elementwise_rule(name, float_only=float_only),
        kind="elementwise",
        vjps=(vjp,),
        jvp=jvp,
        torch_name=torch_name or name.capitalize() + "Backward0",
        saves=saves,
        codegen=codegen,
    )


def _sigmoid_impl(x):
    if np.iscomplexobj(x):
        return np.asarray(1 / (1 + np.exp(-x)))
    # exp only of -|x|, so nothing overflows at |x| = 1e4 and tiny results keep their digits
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)


def _relu_impl(x):
    return np.array(x, copy=True) if np.asarray(x).dtype == np.bool_ else np.maximum(x, 0)


exp = _unary("exp", np.exp, lambda g, out, x: mul(g, out), "tg_exp({0})", ("out",))
log = _unary("log", np.log, lambda g, out, x: div(g, x), "tg_log({0})", (0,))
sqrt = _unary("sqrt", np.sqrt, lambda g, out, x: div(g, mul(2, out)), "tg_sqrt({0})", ("out",))


def _sin_vjp(g, out, x):
    fused = fused_vjp("sin_backward", g, x)  # large plain arrays: one pass, g * cos(x)
    return fused if fused is not None else mul(g, cos(x))


def _tanh_vjp(g, out, x):
    fused = fused_vjp("tanh_backward", g, out)  # large plain arrays: one pass
    return fused if fused is not None else mul(g, sub(1, mul(out, out)))


sin = _unary("sin", np.sin, _sin_vjp, "tg_sin({0})", (0,))
cos = _unary("cos", np.cos, lambda g, out, x: mul(g, neg(sin(x))), "tg_cos({0})", (0,))
tanh = _unary("tanh", np.tanh, _tanh_vjp, "tg_tanh({0})", ("out",))
sigmoid = _unary(
    "sigmoid",
    _sigmoid_impl,
    lambda g, out, x: mul(mul(g, sub(1, out)), out),
    "tg_sigmoid({0})",
    ("out",),
)


def _relu_vjp(g, out, x):
    return where(le(out, 0), 0, g)


relu = _unary("relu", _relu_impl, _relu_vjp, "tg_relu({0})", ("out",), float_only=False)


def _abs_vjp(g, out, x):
    if aval_of(x).dtype.kind != "c":
        return mul(g, sign(x))
    # |z| of complex z: JAX's g * conj(z) / |z|, 0 at z = 0 (PyTorch's is its conjugate);
    # |z| is recomputed: eager nodes keep only the operand
    size = abs_(x)
    return mul(g, div(REGISTRY["conj"](x), where(eq(size, 0), 1.0, size)))


def _abs_rule(x):
    shape_dtype = elementwise_rule("abs")(x)
    if shape_dtype.dtype.kind != "c":
        return shape_dtype
    return Aval(shape_dtype.shape, np.empty(0, shape_dtype.dtype).real.dtype)  # c64 -> f32


def _abs_jvp(primals, tangents, out):
    (x,), (t,) = primals, tangents
    if t is None:
        return None
    if aval_of(x).dtype.kind != "c":
        return mul(t, sign(x))
    # d|z| = Re(conj(z) dz) / |z| (0 at z = 0); a real tangent of a complex z counts too
    safe = where(eq(out, 0), 1.0, out)
    return div(REGISTRY["real"](mul(REGISTRY["conj"](x), t)), safe)


abs_ = _unary(
    "abs",
    np.abs,
    _abs_vjp,
    "abs({0})",
    (0,),
    float_only=False,
    shape_rule=_abs_rule,
    jvp=_abs_jvp,
)
# sign has a (zero) gradient in PyTorch: SignBackward0 exists and gives zeros
sign = _unary(
    "sign", np.sign, lambda g, out, x: full_like(g, value=0), "tg_sign({0})", (), float_only=False
)


def _maximum_vjp(first):
    # PyTorch splits the gradient evenly where x == y
    def rule(g, out, x, y):
        mine, other = (x, y) if first else (y, x)
        return where(gt(mine, other), g, where(eq(mine, other), mul(g, 0.5), 0))

    return rule


def _minimum_vjp(first):
    def rule(g, out, x, y):
        mine, other = (x, y) if first else (y, x)
        return where(lt(mine, other), g, where(eq(mine, other), mul(g, 0.5), 0))

    return rule


maximum = primitive(
    "maximum",
    impl=elementwise_impl(np.maximum),
    shape_rule=elementwise_rule("maximum"),
    kind="elementwise",
    vjps=(_maximum_vjp(True), _maximum_vjp(False)),
    torch_name="MaximumBackward0",
    saves=(0, 1),
    codegen="tg_maximum({0}, {1})",
)

minimum = primitive(
    "minimum",
    impl=elementwise_impl(np.minimum),
    shape_rule=elementwise_rule("minimum"),
    kind="elementwise",
    vjps=(_minimum_vjp(True), _minimum_vjp(False)),
    torch_name="MinimumBackward0",
    saves=(0, 1),
    codegen="tg_minimum({0}, {1})",
)


def _where_rule(cond, x, y):
    shape = broadcast_shapes("where", cond, x, y)
    if isinstance(cond, Aval) and cond.dtype != np.bool_:
        raise op_error(
            "where",
            array_avals(cond, x, y),
            f"condition must be bool, got {cond.dtype}",
            cls=DTypeError,
        )
    return Aval(shape, np.dtype(promote(x, y)))


_BOOL = np.dtype(np.bool_)


def _where_impl(cond, x, y):
    # checked here too: eager mode runs impl without the shape rule (PyTorch refuses too)
    if type(cond) is np.ndarray and cond.dtype is _BOOL:  # the common case, no conversion
        return np.where(cond, x, y)
    if np.asarray(cond).dtype != np.bool_:
        raise op_error(
            "where",
            [aval_of(v) for v in (cond, x, y) if isinstance(v, np.ndarray)],
            f"condition must be bool, got {np.asarray(cond).dtype}",
            cls=DTypeError,
        )
    return np.asarray(np.where(cond, x, y))


where = primitive(
    "where",
    impl=_where_impl,
    shape_rule=_where_rule,
    kind="elementwise",
    vjps=(no_grad, lambda g, out, c, x, y: where(c, g, 0), lambda g, out, c, x, y: where(c, 0, g)),
    jvp=lambda primals, tangents, out: (
        None
        if tangents[1] is None and tangents[2] is None
        else where(primals[0], _or_zeros(tangents[1], out), _or_zeros(tangents[2], out))
    ),
    torch_name="WhereBackward0",
    saves=(0,),
    codegen="tg_where({0}, {1}, {2})",
    torch_visible=lambda args: (1, 2),
)


def _clip_impl(x, lo=None, hi=None):
    if lo is None and hi is None:
        return np.array(x, copy=True)
    return np.asarray(np.clip(x, lo, hi))


def _clip_rule(x, lo=None, hi=None):
    x = as_aval(x)
    bounds = [b for b in (lo, hi) if b is not None]
    return Aval(x.shape, np.dtype(promote(x, *bounds)))


def _clip_vjp(g, out, x, lo=None, hi=None):
    # PyTorch: the gradient passes where lo <= x <= hi
    inside = None
    if lo is not None:
        inside = ge(x, lo)
    if hi is not None:
        below = le(x, hi)
        inside = below if inside is None else logical_and(inside, below)
    return g if inside is None else where(inside, g, 0)


def _clip_codegen(lo=None, hi=None):
    expr = "{0}"
    if lo is not None:
        expr = f"tg_maximum({expr}, {literal(lo)})"
    if hi is not None:
        expr = f"tg_minimum({expr}, {literal(hi)})"
    return expr


clip = primitive(
    "clip",
    impl=_clip_impl,
    shape_rule=_clip_rule,
    kind="elementwise",
    vjps=(_clip_vjp,),
    torch_name="ClampBackward1",
    saves=(0,),
    codegen=_clip_codegen,
)


def _astype_rule(x, dtype):
    return Aval(as_aval(x).shape, np.dtype(dtype))


def _astype_vjp(g, out, x, dtype):
    if is_static_scalar(x) or not np.issubdtype(aval_of(x).dtype, np.inexact):
        return None
    if aval_of(g).dtype.kind == "c" and aval_of(x).dtype.kind != "c":
        g = REGISTRY["real"](g)  # real -> complex: the transpose keeps the real part
    return astype(g, dtype=dtype_name(x))


def _astype_codegen(dtype):
    return "({0} != 0)" if np.dtype(dtype) == np.bool_ else f"np.{np.dtype(dtype).name}({{0}})"


def _astype_jvp(primals, tangents, out, dtype):
    if not np.issubdtype(np.dtype(dtype), np.inexact):
        return None
    t = tangents[0]
    if np.dtype(dtype).kind != "c" and t is not None and aval_of(t).dtype.kind == "c":
        t = REGISTRY["real"](t)  # complex -> real drops the imaginary part
    return astype(t, dtype=dtype)


astype = primitive(
    "astype",
    impl=lambda x, dtype: np.array(x, dtype=dtype, copy=True),
    shape_rule=_astype_rule,
    kind="elementwise",
    vjps=(_astype_vjp,),
    jvp=_astype_jvp,
    torch_name="ToCopyBackward0",
    saves=(),
    codegen=_astype_codegen,
)


def _full_like_rule(x, value, dtype=None):
    x = as_aval(x)
    return Aval(x.shape, np.dtype(dtype) if dtype is not None else x.dtype)


def _full_like_codegen(value, dtype=None):
    return literal(bool(value)) if dtype == "bool" else literal(value)


full_like = primitive(
    "full_like",
    impl=lambda x, value, dtype=None: np.full(
        np.shape(x), value, dtype=dtype or np.asarray(x).dtype
    ),
    shape_rule=_full_like_rule,
    kind="elementwise",
    nondiff=True,
    vjps=(no_grad,),
    torch_name="FullLikeBackward0",
    saves=(),
    codegen=_full_like_codegen,
)

# ----------------------------------------------- comparisons and logic (no gradient)


def _nondiff(name, impl, codegen, arity=2):
    return primitive(
        name,
        impl=returns_array(impl),
        shape_rule=comparison_rule(name),
        kind="elementwise",
        nondiff=True,
        vjps=(no_grad,) * arity,
        torch_name=None,
        saves=(),
        codegen=codegen,
    )


gt = _nondiff("gt", np.greater, "({0} > {1})")
lt = _nondiff("lt", np.less, "({0} < {1})")
ge = _nondiff("ge", np.greater_equal, "({0} >= {1})")
le = _nondiff("le", np.less_equal, "({0} <= {1})")
eq = _nondiff("eq", np.equal, "({0} == {1})")
ne = _nondiff("ne", np.not_equal, "({0} != {1})")
logical_and = _nondiff("logical_and", np.logical_and, "({0} and {1})")
logical_or = _nondiff("logical_or", np.logical_or, "({0} or {1})")
logical_not = _nondiff("logical_not", np.logical_not, "(not {0})", arity=1)
isfinite = _nondiff("isfinite", np.isfinite, "tg_isfinite({0})", arity=1)

# --------------------------------------------------------------- reductions


def _keep(v, x, axis, keepdims):
    """Reshape a reduction's result (or cotangent) so it broadcasts against x."""
    if keepdims or np.ndim(v) == 0:  # a 0-d value already broadcasts against anything
        return v
    return reshape(v, shape=kept_shape(np.shape(x), axis))


def _reduced_count(x, axis) -> int:
    shape = np.shape(x)
    axes = range(len(shape)) if axis is None else normalize_axes("reduce", aval_of(x), axis)
    return int(np.prod([shape[i] for i in axes], dtype=np.int64))


def _sum_vjp(g, out, x, axis=None, keepdims=False):
    # Put the reduced axes back as size-1 dims, then broadcast.
    return broadcast_to(_keep(g, x, axis, keepdims), shape=tuple(np.shape(x)))


def _mean_vjp(g, out, x, axis=None, keepdims=False):
    return div(_sum_vjp(g, out, x, axis, keepdims), _reduced_count(x, axis))


def _extremum_vjp(g, out, x, axis=None, keepdims=False):
    # Spread the gradient evenly among the ties (PyTorch's evenly_distribute_backward)
    at_extremum = astype(eq(x, _keep(out, x, axis, keepdims)), dtype=dtype_name(g))
    ties = sum_(at_extremum, axis=axis, keepdims=True)
    return mul(div(_keep(g, x, axis, keepdims), ties), at_extremum)


def _var_vjp(g, out, x, axis=None, keepdims=False, ddof=0):
    centered = sub(x, mean(x, axis=axis, keepdims=True))
    if aval_of(x).dtype.kind == "c":  # var = mean |x - m|^2: JAX's g * 2 conj(x - m) / dof
        centered = REGISTRY["conj"](centered)
    dof = _reduced_count(x, axis) - ddof
    scale = 2.0 / dof if dof > 0 else math.inf  # PyTorch: nan gradient when N <= ddof
    return mul(_keep(g, x, axis, keepdims), mul(centered, scale))


def _extremum_jvp(primals, tangents, out, axis=None, keepdims=False):
    # the mean of the tangents at the ties (the transpose of _extremum_vjp)
    (x,), (t,) = primals, tangents
    at_extremum = astype(eq(x, _keep(out, x, axis, keepdims)), dtype=dtype_name(t))
    ties = sum_(at_extremum, axis=axis, keepdims=keepdims)
    return div(sum_(mul(t, at_extremum), axis=axis, keepdims=keepdims), ties)


def _var_jvp(primals, tangents, out, axis=None, keepdims=False, ddof=0):
    (x,), (t,) = primals, tangents
    centered = sub(x, mean(x, axis=axis, keepdims=True))
    dof = _reduced_count(x, axis) - ddof
    scale = 2.0 / dof if dof > 0 else math.inf
    if aval_of(x).dtype.kind == "c":  # d var = 2 Re(conj(x - m) t) / dof
        product = REGISTRY["real"](mul(REGISTRY["conj"](centered), t))
        return mul(sum_(product, axis=axis, keepdims=keepdims), scale)
    return mul(sum_(mul(centered, t), axis=axis, keepdims=keepdims), scale)


def _logsumexp_jvp(primals, tangents, out, axis=None, keepdims=False):
    (x,), (t,) = primals, tangents
    return sum_(mul(t, exp(sub(x, _keep(out, x, axis, keepdims)))), axis=axis, keepdims=keepdims)


def _logsumexp_impl(x, axis=None, keepdims=False):
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf rows give -inf, not nan
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return np.asarray(total if keepdims else np.squeeze(total, axis=axis))


def _logsumexp_vjp(g, out, x, axis=None, keepdims=False):
    # PyTorch's form. At |x| ~ 1e4, float32 rounds `out` by ~1e-3 and the gradient keeps
    # ~4 digits: that is the input's own conditioning (|x| * eps), and the joint graph
    # shares `x - out` with the forward (tests/passes/test_joint_graphs.py)
    return mul(_keep(g, x, axis, keepdims), exp(sub(x, _keep(out, x, axis, keepdims))))


def _by_axis(full: str, with_axis: str):
    return lambda x, axis=None, keepdims=False, **_: full if axis is None else with_axis


def _sum_impl(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:  # np.sum on an ndarray is exactly this reduce, minus a wrapper
        return np.asarray(np.add.reduce(x, axis=axis, keepdims=keepdims))
    return np.asarray(np.sum(x, axis=axis, keepdims=keepdims))


sum_ = primitive(
    "sum",
    impl=_sum_impl,
    shape_rule=reduce_rule("sum"),
    kind="reduction",
    vjps=(_sum_vjp,),
    jvp=lambda primals, tangents, out, **attrs: sum_(tangents[0], **attrs),
    torch_name=_by_axis("SumBackward0", "SumBackward1"),
    saves=(),
    codegen="reduce_sum",
)

mean = primitive(
    "mean",
    impl=lambda x, axis=None, keepdims=False: np.asarray(np.mean(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("mean"),
    kind="reduction",
    vjps=(_mean_vjp,),
    jvp=lambda primals, tangents, out, **attrs: mean(tangents[0], **attrs),
    torch_name=_by_axis("MeanBackward0", "MeanBackward1"),
    saves=(),
    codegen="reduce_mean",
)

max_ = primitive(
    "max",
    impl=lambda x, axis=None, keepdims=False: np.asarray(np.max(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("max"),
    kind="reduction",
    vjps=(_extremum_vjp,),
    jvp=_extremum_jvp,
    torch_name=_by_axis("MaxBackward1", "MaxBackward0"),
    saves=(0, "out"),
    codegen="reduce_max",
)

min_ = primitive(
    "min",
    impl=lambda x, axis=None, keepdims=False: np.asarray(np.min(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("min"),
    kind="reduction",
    vjps=(_extremum_vjp,),
    jvp=_extremum_jvp,
    torch_name=_by_axis("MinBackward1", "MinBackward0"),
    saves=(0, "out"),
    codegen="reduce_min",
)

argmax = primitive(
    "argmax",
    impl=lambda x, axis=None, keepdims=False: np.asarray(
        np.argmax(x, axis=axis, keepdims=keepdims)
    ),
    shape_rule=reduce_rule("argmax", single_axis=True),
    kind="reduction",
    nondiff=True,
    vjps=(no_grad,),
    torch_name=None,
    saves=(),
    codegen="reduce_argmax",
)

argmin = primitive(
    "argmin",
    impl=lambda x, axis=None, keepdims=False: np.asarray(
        np.argmin(x, axis=axis, keepdims=keepdims)
    ),
    shape_rule=reduce_rule("argmin", single_axis=True),
    kind="reduction",
    nondiff=True,
    vjps=(no_grad,),
    torch_name=None,
    saves=(),
    codegen="reduce_argmin",
)

var = primitive(
    "var",
    impl=lambda x, axis=None, keepdims=False, ddof=0: np.asarray(
        np.var(x, axis=axis, keepdims=keepdims, ddof=ddof)
    ),
    shape_rule=reduce_rule("var"),
    kind="reduction",
    vjps=(_var_vjp,),
    jvp=_var_jvp,
    torch_name="VarBackward0",
    saves=(0,),
    codegen="reduce_var",
)

logsumexp = primitive(
    "logsumexp",
    impl=_logsumexp_impl,
    shape_rule=reduce_rule("logsumexp", "mean", float_only=True),
    kind="reduction",
    vjps=(_logsumexp_vjp,),
    jvp=_logsumexp_jvp,
    torch_name="LogsumexpBackward0",
    saves=(0, "out"),
    codegen="reduce_logsumexp",
)

# ------------------------------------------------------------ softmax family


def _softmax_impl(x, axis):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return np.asarray(shifted / np.sum(shifted, axis=axis, keepdims=True))


def _log_softmax_impl(x, axis):
    if type(x) is np.ndarray:  # np.max/np.sum on an ndarray are exactly these reduces
        shifted = x - np.maximum.reduce(x, axis=axis, keepdims=True)
        return np.asarray(
            shifted - np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))
        )
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return np.asarray(shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True)))


def _softmax_rule(name):
    def rule(x, axis):
        x = as_aval(x)
        if not np.issubdtype(x.dtype, np.floating):
            raise op_error(
                name, [x], f"expected a floating-point operand, got {x.dtype}", cls=DTypeError
            )
        if not isinstance(axis, (int, np.integer)):
            raise op_error(name, [x], f"axis must be an int, got {axis!r}")
        normalize_axes(name, x, axis)
        return x

    return rule


softmax = primitive(
    "softmax",
    impl=_softmax_impl,
    shape_rule=_softmax_rule("softmax"),
    kind="other",
    vjps=(lambda g, out, x, axis: mul(out, sub(g, sum_(mul(g, out), axis=axis, keepdims=True))),),
    # the Jacobian is symmetric: the jvp is the vjp applied to the tangent
    jvp=lambda primals, tangents, out, axis: mul(
        out, sub(tangents[0], sum_(mul(tangents[0], out), axis=axis, keepdims=True))
    ),
    torch_name="SoftmaxBackward0",
    saves=("out",),
    codegen="softmax",
)

log_softmax = primitive(
    "log_softmax",
    impl=_log_softmax_impl,
    shape_rule=_softmax_rule("log_softmax"),
    kind="other",
    vjps=(lambda g, out, x, axis: sub(g, mul(exp(out), sum_(g, axis=axis, keepdims=True))),),
    jvp=lambda primals, tangents, out, axis: sub(
        tangents[0], sum_(mul(tangents[0], exp(out)), axis=axis, keepdims=True)
    ),
    torch_name="LogSoftmaxBackward0",
    saves=("out",),
    codegen="log_softmax",
)

# --------------------------------------------------------------- shape ops


def _reshape_rule(x, shape):
    x = as_aval(x)
    shape = tuple(shape)
    if any(d < 0 for d in shape) or (
        int(np.prod(shape, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64))
    ):
        raise op_error("reshape", [x], f"cannot reshape to {shape}")
    return Aval(shape, x.dtype)


reshape = primitive(
    "reshape",
    impl=lambda x, shape: np.reshape(x, shape),
    shape_rule=_reshape_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: reshape(g, shape=tuple(np.shape(x))),),
    jvp=lambda primals, tangents, out, shape: reshape(tangents[0], shape=shape),
    torch_name="ViewBackward0",
    saves=(),
    codegen="reshape",
)


def _broadcast_to_rule(x, shape):
    x = as_aval(x)
    shape = tuple(shape)
    try:
        ok = len(shape) >= x.ndim and tuple(np.broadcast_shapes(x.shape, shape)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise op_error("broadcast_to", [x], f"cannot broadcast to {shape}")
    return Aval(shape, x.dtype)


broadcast_to = primitive(
    "broadcast_to",
    impl=lambda x, shape: np.broadcast_to(x, shape),
    shape_rule=_broadcast_to_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: g,),  # the driver sums g back to x's shape
    jvp=lambda primals, tangents, out, shape: broadcast_to(tangents[0], shape=shape),
    torch_name="ExpandBackward0",
    saves=(),
    codegen="broadcast",
)


def _transpose_rule(x, axes):
    x = as_aval(x)
    if sorted(axes) != list(range(x.ndim)):
        raise op_error(
            "transpose", [x], f"axes {tuple(axes)} are not a permutation of the {x.ndim} axes"
        )
    return Aval(tuple(x.shape[a] for a in axes), x.dtype)


def _transpose_torch_name(x, axes):
    moved = [i for i, a in enumerate(axes) if i != a]
    return "TransposeBackward0" if len(moved) == 2 and np.ndim(x) > 2 else "PermuteBackward0"


def _transpose_impl(x, axes):
    # np.transpose calls this method on an ndarray (minus the wrapper)
    return x.transpose(axes) if type(x) is np.ndarray else np.transpose(x, axes)


transpose = primitive(
    "transpose",
    impl=_transpose_impl,
    shape_rule=_transpose_rule,
    kind="shape",
    vjps=(lambda g, out, x, axes: transpose(g, axes=tuple(int(i) for i in np.argsort(axes))),),
    jvp=lambda primals, tangents, out, axes: transpose(tangents[0], axes=axes),
    torch_name=_transpose_torch_name,
    saves=(),
    codegen="transpose",
)


def _concatenate_rule(*xs, axis):
    xs = [as_aval(x) for x in xs]
    if not xs:
        raise op_error("concatenate", [], "needs at least one array")
    first = xs[0]
    if first.ndim == 0:
        raise op_error("concatenate", xs, "zero-dimensional arrays cannot be concatenated")
    ax = normalize_axes("concatenate", first, axis)[0]
    for x in xs[1:]:
        if x.ndim != first.ndim or any(
            a != b for i, (a, b) in enumerate(zip(x.shape, first.shape, strict=True)) if i != ax
        ):
            raise op_error("concatenate", xs, f"shapes must match except along axis {axis}")
    shape = list(first.shape)
    shape[ax] = sum(x.shape[ax] for x in xs)
    return Aval(tuple(shape), np.dtype(promote(*xs)))


def _concatenate_vjp(i, g, out, *xs, axis):
    ndim = np.ndim(xs[0])
    ax = axis % ndim
    start = sum(np.shape(x)[ax] for x in xs[:i])
    stop = start + np.shape(xs[i])[ax]
    spec = tuple(
        ("slice", start, stop, 1) if d == ax else ("slice", 0, n, 1)
        for d, n in enumerate(np.shape(out))
    )
    return getitem(g, spec=spec)


def _concatenate_vjps(needed, g, out, *xs, axis):
    """Every operand's slice of g, with a running offset (linear in len(xs))."""
    ax = axis % np.ndim(xs[0])
    shape = np.shape(out)
    results = []
    start = 0
    for i, x in enumerate(xs):
        stop = start + np.shape(x)[ax]
        if needed[i]:
            spec = tuple(
                ("slice", start, stop, 1) if d == ax else ("slice", 0, n, 1)
                for d, n in enumerate(shape)
            )
            results.append(getitem(g, spec=spec))
        else:
            results.append(None)
        start = stop
    return results


concatenate = primitive(
    "concatenate",
    impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
    shape_rule=_concatenate_rule,
    kind="shape",
    vjps=PerOperand(_concatenate_vjp, batch=_concatenate_vjps),
    jvp=lambda primals, tangents, out, axis: concatenate(
        *[_or_zeros(t, x) for x, t in zip(primals, tangents, strict=True)], axis=axis
    ),
    torch_name="CatBackward0",
    saves=(),
    codegen="concatenate",
)

# ------------------------------------------------------------------- matmul


def _matmul_rule(x, y):
    x, y = as_aval(x), as_aval(y)
    if x.ndim == 0 or y.ndim == 0:
        raise op_error("matmul", [x, y], "both operands must have at least one dimension")
    if x.dtype == np.bool_ or y.dtype == np.bool_:
        raise op_error("matmul", [x, y], "not supported for bool operands", cls=DTypeError)
    k1 = x.shape[-1]
    k2 = y.shape[-2] if y.ndim >= 2 else y.shape[0]
    if k1 != k2:
        raise op_error("matmul", [x, y], f"inner dimensions differ ({k1} vs {k2})")
    xb = x.shape[:-2] if x.ndim >= 2 else ()
    yb = y.shape[:-2] if y.ndim >= 2 else ()
    try:
        batch = tuple(np.broadcast_shapes(xb, yb))
    except ValueError:  # name the real operands, not just their batch parts
        raise op_error(
            "matmul", [x, y], f"batch dimensions {xb} and {yb} cannot be broadcast together"
        ) from None
    core = (x.shape[-2],) if x.ndim >= 2 else ()
    core += (y.shape[-1],) if y.ndim >= 2 else ()
    return Aval(batch + core, np.dtype(promote(x, y)))


def _swap_last(v):
    nd = np.ndim(v)
    return transpose(v, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _as_matrices(g, x, y):
    """g with the axes that 1-D operands drop put back as size 1 (x (k,) is a row, y a column)."""
    if type(x) is np.ndarray and type(y) is np.ndarray and x.ndim != 1 and y.ndim != 1:
        return g  # no 1-D operand: nothing to put back (the common case, without np.shape)
    shape = tuple(np.shape(g))
    if np.ndim(x) == 1:
        shape = shape[:-1] + (1,) + shape[-1:] if np.ndim(y) != 1 else shape + (1,)
    if np.ndim(y) == 1:
        shape = shape + (1,)
    return g if shape == tuple(np.shape(g)) else reshape(g, shape=shape)


def _matmul_vjp_x(g, out, x, y):
    if type(x) is np.ndarray and type(y) is np.ndarray and x.ndim == 2 and y.ndim == 2:
        return matmul(g, transpose(y, axes=(1, 0)))
    y2 = reshape(y, shape=np.shape(y) + (1,)) if np.ndim(y) == 1 else y
    gx = matmul(_as_matrices(g, x, y), _swap_last(y2))  # (..., n, k)
    if np.ndim(x) == 1:  # drop the promoted row; the driver sums any batch dims
        gx = reshape(gx, shape=np.shape(gx)[:-2] + np.shape(gx)[-1:])
    return gx


def _matmul_vjp_y(g, out, x, y):
    if type(x) is np.ndarray and type(y) is np.ndarray and x.ndim == 2 and y.ndim == 2:
        return matmul(transpose(x, axes=(1, 0)), g)
    if np.ndim(y) == 2 and np.ndim(x) >= 3:
        # sum over the batch of x[b]^T g[b] is one GEMM over the stacked rows: one call
        # with a b-times-longer K, where the batched product made b calls and a sum
        rows = int(np.prod(np.shape(x)[:-1]))
        return matmul(
            transpose(reshape(x, shape=(rows, np.shape(x)[-1])), axes=(1, 0)),
            reshape(g, shape=(rows, np.shape(g)[-1])),
        )
    x2 = reshape(x, shape=(1,) + np.shape(x)) if np.ndim(x) == 1 else x
    gy = matmul(_swap_last(x2), _as_matrices(g, x, y))  # (..., k, m)
    if np.ndim(y) == 1:
        gy = reshape(gy, shape=np.shape(gy)[:-1])
    return gy


def _matmul_torch_name(x, y):
    nx = x.ndim if type(x) is np.ndarray else np.ndim(x)
    ny = y.ndim if type(y) is np.ndarray else np.ndim(y)
    if nx == 1 and ny == 1:
        return "DotBackward0"
    if nx == 2 and ny == 1:
        return "MvBackward0"
    if nx == 1 and ny == 2:
        return "SqueezeBackward4"
    if nx == 2 and ny == 2:
        return "MmBackward0"
    if nx == 2 and ny >= 3:
        return "CloneBackward0"
    return "UnsafeViewBackward0"


def _matmul_jvp(primals, tangents, out):
    (x, y), (tx, ty) = primals, tangents
    return _plus(None if tx is None else matmul(tx, y), None if ty is None else matmul(x, ty))


matmul = primitive(
    "matmul",
    impl=returns_array(limited(np.matmul)),
    shape_rule=_matmul_rule,
    kind="matmul",
    vjps=(_matmul_vjp_x, _matmul_vjp_y),
    jvp=_matmul_jvp,
    torch_name=_matmul_torch_name,
    saves=(0, 1),
    save_only_if_needed={0: 1, 1: 0},
    codegen="matmul",
)


def _addmm_rule(bias, mat1, mat2):
    bias, mat1, mat2 = as_aval(bias), as_aval(mat1), as_aval(mat2)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise op_error("addmm", [bias, mat1, mat2], "mat1 and mat2 must be matrices")
    out = _matmul_rule(mat1, mat2)
    try:
        np.broadcast_shapes(bias.shape, out.shape)
    except ValueError:
        raise op_error(
            "addmm",
            [bias, mat1, mat2],
            f"bias of shape {bias.shape} cannot be broadcast to {out.shape}",
        ) from None
    if np.broadcast_shapes(bias.shape, out.shape) != out.shape:
        raise op_error(
            "addmm",
            [bias, mat1, mat2],
            f"bias of shape {bias.shape} cannot be broadcast to {out.shape}",
        )
    return Aval(out.shape, np.dtype(promote(bias, out)))


_limited_matmul = limited(np.matmul)  # BLAS threads: at most the idle CPUs, for the call


def _addmm_impl(bias, mat1, mat2):
    out = _limited_matmul(mat1, mat2)
    if np.result_type(out, bias) == out.dtype:
        return np.add(out, bias, out=out)  # out is fresh: add the bias in place
    return np.add(out, bias)


addmm = primitive(  # bias + mat1 @ mat2: nn.Linear's one node, as in PyTorch
    "addmm",
    impl=_addmm_impl,
    shape_rule=_addmm_rule,
    kind="matmul",
    vjps=(
        lambda g, out, bias, mat1, mat2: g,  # the driver sums it to bias's shape
        lambda g, out, bias, mat1, mat2: matmul(g, transpose(mat2, axes=(1, 0))),
        lambda g, out, bias, mat1, mat2: matmul(transpose(mat1, axes=(1, 0)), g),
    ),
    jvp=lambda primals, tangents, out: _plus(
        tangents[0], _matmul_jvp(primals[1:], tangents[1:], out)
    ),
    torch_name="AddmmBackward0",
    saves=(1, 2),
    codegen="addmm",
)


# ----------------------------------------------------------------- indexing
# getitem(x, *index_arrays, spec): `spec` is a static tuple with one entry per
# axis of x (int, ("slice", start, stop, step), None, ("array", k)); see
# rulekit.spec_to_index. tracegrad.ops.indexing builds it from a NumPy index.
# Its vjp scatters with index_add_zeros, whose own vjp is getitem again.
def _getitem_rule(x, *arrays, spec):
    x = as_aval(x)
    arrays = [as_aval(a) for a in arrays]
    return Aval(index_shape("getitem", x, spec, arrays), x.dtype)


def _getitem_vjp(i, g, out, x, *arrays, spec):
    if i > 0:
        return None  # index arrays get no gradient
    return index_add_zeros(g, *arrays, spec=spec, shape=tuple(np.shape(x)))


def _getitem_torch_name(x, *arrays, spec):
    if arrays:
        return "IndexBackward0"
    # PyTorch applies entries left to right and skips full slices; the last one names the node
    name = None
    for e, n in zip(spec, _consumed_sizes(x, spec), strict=True):
        if e is None:
            name = "UnsqueezeBackward0"
        elif isinstance(e, (int, np.integer)):
            name = "SelectBackward0"
        elif e[1:] != (0, n, 1):
            name = "SliceBackward0"
    if name is None:
        name = "SliceBackward0" if len(spec) == 1 else "AliasBackward0"
    return name


def _consumed_sizes(x, spec):
    shape, dim, sizes = np.shape(x), 0, []
    for e in spec:
        sizes.append(None if e is None else shape[dim])
        dim += e is not None
    return sizes


def _check_in_range(name, idx, size, axis, operands):
    """Index arrays are data: in compiled code they are first seen at run time."""
    idx = np.asarray(idx)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx[(idx < -size) | (idx >= size)].flat[0]
        raise op_error(
            name,
            [aval_of(o) for o in operands],
            f"index {bad} is out of range for axis {axis} with size {size}",
            cls=OutOfRangeError,
        )


def _check_spec_arrays(name, shape, spec, arrays, operands):
    dim = 0
    for e in spec:
        if e is None:
            continue
        if isinstance(e, tuple) and e[0] == "array":
            _check_in_range(name, arrays[e[1]], shape[dim], dim, operands)
        dim += 1


def _getitem_impl(x, *arrays, spec):
    if arrays:
        _check_spec_arrays("getitem", np.shape(x), spec, arrays, (x,) + arrays)
    return np.array(x[spec_to_index(spec, arrays)])


getitem = primitive(
    "getitem",
    impl=_getitem_impl,
    shape_rule=_getitem_rule,
    kind="index",
    vjps=PerOperand(_getitem_vjp),
    torch_name=_getitem_torch_name,
    saves=(),
    torch_visible=lambda args: (0,),
    jvp=_linear_jvp("getitem"),
    codegen="getitem",
)


def _index_add_impl(g, *arrays, spec, shape):
    if arrays:
        _check_spec_arrays("index_add_zeros", shape, spec, arrays, (g,) + arrays)
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    index = spec_to_index(spec, arrays)
    if arrays:
        np.add.at(out, index, g)  # repeated indices accumulate
    else:
        out[index] = g  # basic indexing never repeats an element
    return out


def _index_add_rule(g, *arrays, spec, shape):
    g = as_aval(g)
    arrays = [as_aval(a) for a in arrays]
    expected = index_shape("index_add_zeros", Aval(tuple(shape), g.dtype), spec, arrays)
    if tuple(g.shape) != expected:
        raise op_error(
            "index_add_zeros",
            [g] + arrays,
            f"values have shape {g.shape}, the index selects {expected}",
        )
    return Aval(tuple(shape), g.dtype)


def _index_add_vjp(i, gg, out, g, *arrays, spec, shape):
    return getitem(gg, *arrays, spec=spec) if i == 0 else None


index_add_zeros = primitive(
    "index_add_zeros",
    impl=_index_add_impl,
    shape_rule=_index_add_rule,
    kind="index",
    vjps=PerOperand(_index_add_vjp),
    jvp=_linear_jvp("index_add_zeros"),
    torch_name=lambda g, *arrays, spec, shape: (
        "IndexPutBackward0" if arrays else "SliceBackwardBackward0"
    ),
    torch_visible=lambda args: (0,),
    saves=(),
    codegen="index_add_zeros",
)


def _take_along_axis_rule(x, idx, axis):
    shape, _ = along_axis_shape("take_along_axis", x, idx, axis)
    return Aval(shape, as_aval(x).dtype)


def _take_along_axis_vjp(g, out, x, idx, axis):
    # scatter into x's shape, widened to the broadcast batch; the driver sums the rest
    full = list(np.shape(out))
    full[axis % len(full)] = np.shape(x)[axis]
    return put_along_axis_add(g, idx, axis=axis, shape=tuple(full))


def _same_batch(x, idx, ax):
    """True when x and idx agree on every dim but `ax` (the common case: no broadcasting)."""
    if type(x) is np.ndarray and type(idx) is np.ndarray:  # same test, without np.shape/issubdtype
        xs, js = x.shape, idx.shape
        return (
            len(xs) == len(js)
            and idx.dtype.kind in "iu"
            and xs[:ax] == js[:ax]
            and xs[ax + 1 :] == js[ax + 1 :]
        )
    xs, js = np.shape(x), np.shape(idx)
    return (
        len(xs) == len(js)
        and np.issubdtype(np.asarray(idx).dtype, np.integer)
        and xs[:ax] == js[:ax]
        and xs[ax + 1 :] == js[ax + 1 :]
    )


def _same_batch_index(shape, idx, ax):
    """NumPy's own take/put_along_axis index (as _make_along_axis_idx builds it), for an
    integer ndarray idx already checked by _same_batch: skips NumPy's wrapper checks."""
    ones = (1,) * len(shape)
    return tuple(
        idx if d == ax else np.arange(n).reshape(ones[:d] + (-1,) + ones[d + 1 :])
        for d, n in enumerate(shape)
    )


def _take_along_axis_impl(x, idx, axis):
    ax = axis % max(np.ndim(x), 1)
    if _same_batch(x, idx, ax):  # fast path: skip the broadcast bookkeeping
        _check_in_range("take_along_axis", idx, np.shape(x)[ax], ax, (x, idx))
        if type(x) is np.ndarray and type(idx) is np.ndarray:
            return x[_same_batch_index(x.shape, idx, ax)]
        return np.take_along_axis(x, idx, ax)
    # broadcast the non-axis dims explicitly, so impl and shape rule agree
    shape, ax = along_axis_shape("take_along_axis", aval_of(x), aval_of(idx), axis)
    _check_in_range("take_along_axis", idx, np.shape(x)[ax], ax, (x, idx))
    x_shape = shape[:ax] + (np.shape(x)[ax],) + shape[ax + 1 :]
    return np.take_along_axis(np.broadcast_to(x, x_shape), np.broadcast_to(idx, shape), ax)


take_along_axis = primitive(
    "take_along_axis",
    impl=_take_along_axis_impl,
    shape_rule=_take_along_axis_rule,
    kind="index",
    vjps=(_take_along_axis_vjp, no_grad),
    torch_name="GatherBackward0",
    saves=(1,),
    torch_visible=lambda args: (0,),
    jvp=_linear_jvp("take_along_axis"),
    codegen="take_along_axis",
)


def _along_axis_index(idx, axis, shape):
    """The NumPy fancy index that addresses `shape` at idx along `axis`."""
    ax = axis % len(shape)
    idx = np.broadcast_to(idx, shape[:ax] + (np.shape(idx)[ax],) + shape[ax + 1 :])
    grids = list(np.ogrid[tuple(slice(n) for n in idx.shape)])
    grids[ax] = idx
    return tuple(grids)


def _put_along_axis_add_impl(g, idx, axis, shape):
    _check_in_range("put_along_axis_add", idx, shape[axis], axis % len(shape), (g, idx))
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    ax = axis % len(shape)
    if np.shape(idx)[ax] == 1 and _same_batch(out, idx, ax) and np.shape(g) == np.shape(idx):
        # one index per row cannot collide, so a plain put is an add into zeros
        if type(idx) is np.ndarray:
            out[_same_batch_index(out.shape, idx, ax)] = g  # what np.put_along_axis does
        else:
            np.put_along_axis(out, idx, g, ax)
        return out
    np.add.at(out, _along_axis_index(idx, axis, tuple(shape)), g)
    return out


def _put_along_axis_add_rule(g, idx, axis, shape):
    g = as_aval(g)
    expected, _ = along_axis_shape("put_along_axis_add", Aval(tuple(shape), g.dtype), idx, axis)
    if tuple(g.shape) != expected:
        raise op_error(
            "put_along_axis_add",
            [g, as_aval(idx)],
            f"values have shape {g.shape}, expected {expected}",
        )
    return Aval(tuple(shape), g.dtype)


put_along_axis_add = primitive(
    "put_along_axis_add",
    impl=_put_along_axis_add_impl,
    shape_rule=_put_along_axis_add_rule,
    kind="index",
    vjps=(lambda gg, out, g, idx, axis, shape: take_along_axis(gg, idx, axis=axis), no_grad),
    jvp=_linear_jvp("put_along_axis_add"),
    torch_name="ScatterAddBackward0",
    saves=(1,),
    codegen="put_along_axis_add",
    torch_visible=lambda args: (0,),
)

# --------------------------------------------------------------- nll_loss
# -logp[i, target[i]], reduced: PyTorch's one NllLossBackward0 node of cross_entropy.

_NLL_REDUCTIONS = ("mean", "sum", "none")


def _nll_loss_rule(logp, target, reduction):
    logp, target = as_aval(logp), as_aval(target)
    if reduction not in _NLL_REDUCTIONS:
        raise op_error(
            "nll_loss",
            [logp, target],
            f"reduction must be one of {_NLL_REDUCTIONS}, got {reduction!r}",
        )
    if logp.ndim != 2 or target.ndim != 1 or logp.shape[0] != target.shape[0]:
        raise op_error(
            "nll_loss", [logp, target], "expects log-probabilities (N, C) and class indices (N,)"
        )
    if logp.dtype.kind != "f" or target.dtype.kind not in "iu":
        raise op_error(
            "nll_loss",
            [logp, target],
            "expects float log-probabilities and integer class indices",
            cls=DTypeError,
        )
    return Aval((logp.shape[0],) if reduction == "none" else (), logp.dtype)


def _nll_loss_impl(logp, target, reduction):
    n, c = np.shape(logp)
    _check_in_range("nll_loss", target, c, 1, (logp, target))
    picked = np.asarray(logp)[np.arange(n), target]
    if reduction == "none":
        return np.negative(picked)
    total = -picked.sum()
    return np.asarray(total / n if reduction == "mean" else total, dtype=picked.dtype)


def _nll_loss_vjp(g, out, logp, target, reduction):
    n, c = logp.shape
    if reduction == "none":
        per_row = neg(g)
    else:
        per_row = broadcast_to(mul(g, -1.0 / n) if reduction == "mean" else neg(g), shape=(n,))
    return put_along_axis_add(
        reshape(per_row, shape=(n, 1)), reshape(target, shape=(n, 1)), axis=1, shape=(n, c)
    )


nll_loss = primitive(
    "nll_loss",
    impl=_nll_loss_impl,
    shape_rule=_nll_loss_rule,
    kind="index",
    vjps=(_nll_loss_vjp, no_grad),
    torch_name="NllLossBackward0",
    saves=(1,),
    jvp=_linear_jvp("nll_loss"),
    codegen="nll_loss",
)

# ------------------------------------------------- NumPy coverage (issue 13)
# Primitives only where a composite of the ops above would be wrong or slow:
# log1p/expm1 (cancellation near 0), the inverse trig functions (no composite is
# exact at the domain edges), floor and remainder, cumsum, the first-order linear
# recurrence `linrec` (cumprod and prod are composites of it, so their gradients
# need no division and stay exact at zeros), and argsort (sort is
# take_along_axis(x, argsort(x))). The rest of NumPy's names are composites in
# tracegrad/ops/api.py.


def _one_minus_x2(x):
    # (1 - x)(1 + x): exact to the last bits near |x| = 1, where 1 - x*x is not
    return mul(sub(1, x), add(1, x))


log1p = _unary(
    "log1p",
    np.log1p,
    lambda g, out, x: div(g, add(x, 1)),
    "tg_log1p({0})",
    (0,),
    torch_name="Log1PBackward0",
)
expm1 = _unary(
    "expm1",
    np.expm1,
    lambda g, out, x: mul(g, add(out, 1)),
    "np.expm1({0})",
    ("out",),
    torch_name="Expm1Backward0",
)
# at |x| = 1 the gradient is +-inf, as in JAX and PyTorch
arcsin = _unary(
    "arcsin",
    np.arcsin,
    lambda g, out, x: div(g, sqrt(_one_minus_x2(x))),
    "np.arcsin({0})",
    (0,),
    torch_name="AsinBackward0",
)
arccos = _unary(
    "arccos",
    np.arccos,
    lambda g, out, x: neg(div(g, sqrt(_one_minus_x2(x)))),
    "np.arccos({0})",
    (0,),
    torch_name="AcosBackward0",
)
arctan = _unary(
    "arctan",
    np.arctan,
    lambda g, out, x: div(g, add(1, mul(x, x))),
    "np.arctan({0})",
    (0,),
    torch_name="AtanBackward0",
)
# floor's gradient is zero almost everywhere (PyTorch's FloorBackward0 gives zeros)
floor = _unary("floor", np.floor, lambda g, out, x: full_like(g, value=0), "np.floor({0})", ())


def _atan2_denominator(y, x):
    return add(mul(x, x), mul(y, y))


arctan2 = primitive(  # arctan2(y, x); at (0, 0) both gradients are nan, as in JAX
    "arctan2",
    impl=returns_array(lambda y, x: np.arctan2(*_float_pair(y, x))),
    shape_rule=elementwise_rule("arctan2", float_only=True),
    kind="elementwise",
    vjps=(
        lambda g, out, y, x: mul(g, div(x, _atan2_denominator(y, x))),
        lambda g, out, y, x: neg(mul(g, div(y, _atan2_denominator(y, x)))),
    ),
    torch_name="Atan2Backward0",
    saves=(0, 1),
    codegen="np.arctan2({0}, {1})",
)


def _float_pair(a, b):
    """Int/bool array operands of a float-only binary function, as float64."""

    def conv(v):
        return v.astype(np.float64) if type(v) is np.ndarray and v.dtype.kind in "biu" else v

    return conv(a), conv(b)


def _remainder_vjp_y(g, out, x, y):
    if is_static_scalar(y):
        return None
    # x % y = x - q y for the integer q that NumPy's divmod used: q = (x - x % y) / y
    # rounded, not floor(x / y) (1 % 0.1 is 1 - 9 * 0.1, while floor(1 / 0.1) rounds to 10).
    # x % y is recomputed, not read from `out`: eager nodes keep only the operands
    return neg(mul(g, floor(add(div(sub(x, remainder(x, y)), y), 0.5))))


remainder = primitive(  # x % y with the sign of y (NumPy's and Python's %)
    "remainder",
    impl=returns_array(np.remainder),
    shape_rule=elementwise_rule("remainder", no_bool=True),
    kind="elementwise",
    vjps=(lambda g, out, x, y: None if is_static_scalar(x) else g, _remainder_vjp_y),
    torch_name="RemainderBackward0",
    saves=(0, 1),
    codegen="np.remainder({0}, {1})",
)


def _scan_rule(name, float_only=False):
    def rule(x, axis, reverse=False):
        x = as_aval(x)
        normalize_axes(name, x, axis)
        if float_only and not np.issubdtype(x.dtype, np.floating):
            raise op_error(
                name, [x], f"expected a floating-point operand, got {x.dtype}", cls=DTypeError
            )
        dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.cumsum(np.ones(1, x.dtype)).dtype)
        return Aval(tuple(x.shape), np.dtype(dtype))

    return rule


def _flip_axis(x, axis):
    index = [slice(None)] * np.ndim(x)
    index[axis] = slice(None, None, -1)
    return x[tuple(index)]


def _cumsum_impl(x, axis, reverse=False):
    x = np.asarray(x)
    if not reverse:
        return np.asarray(np.cumsum(x, axis=axis))
    return np.ascontiguousarray(_flip_axis(np.cumsum(_flip_axis(x, axis), axis=axis), axis))


cumsum = primitive(  # running sum along one axis (from the end when reverse)
    "cumsum",
    impl=_cumsum_impl,
    shape_rule=_scan_rule("cumsum"),
    kind="other",
    vjps=(lambda g, out, x, axis, reverse=False: cumsum(g, axis=axis, reverse=not reverse),),
    jvp=_linear_jvp("cumsum"),
    torch_name="CumsumBackward0",
    saves=(),
    codegen="cumsum",
)


def _linrec_rule(a, b, axis, reverse=False):
    a, b = as_aval(a), as_aval(b)
    if tuple(a.shape) != tuple(b.shape):
        raise op_error("linrec", [a, b], "coefficients and inputs must have the same shape")
    normalize_axes("linrec", a, axis)
    dtype = np.dtype(promote(a, b))
    if dtype == np.bool_:
        raise op_error("linrec", [a, b], "not supported for bool operands", cls=DTypeError)
    return Aval(tuple(a.shape), dtype)


def _linrec_impl(a, b, axis, reverse=False):
    dtype = np.result_type(a, b)
    a = np.moveaxis(np.asarray(a, dtype=dtype), axis, 0)
    b = np.moveaxis(np.asarray(b, dtype=dtype), axis, 0)
    if not reverse and len(b) and not a[0].any() and not b[1:].any():
        # cumprod's pattern (a_0 = 0, b zero after the start): NumPy's own running product
        # does the same multiplications in the same order, without the Python loop
        started = np.concatenate([b[:1], a[1:]])
        return np.ascontiguousarray(np.moveaxis(np.cumprod(started, axis=0), 0, axis))
    out = np.empty(b.shape, dtype)
    h = np.zeros(b.shape[1:], dtype)
    steps = range(len(b) - 1, -1, -1) if reverse else range(len(b))
    for t in steps:
        h = a[t] * h + b[t]
        out[t] = h
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def _shift(v, axis, toward_end):
    """v moved one step along `axis` (toward the end or the start), zero-filled."""
    shape = tuple(np.shape(v))
    ax = axis % len(shape)
    n = shape[ax]

    def spec(start, stop):
        return tuple(
            ("slice", start, stop, 1) if d == ax else ("slice", 0, m, 1)
            for d, m in enumerate(shape)
        )

    if n <= 1:
        return full_like(v, value=0)
    if toward_end:  # out[t] = v[t - 1], out[0] = 0
        kept = getitem(v, spec=spec(0, n - 1))
        return concatenate(full_like(getitem(v, spec=spec(0, 1)), value=0), kept, axis=ax)
    kept = getitem(v, spec=spec(1, n))  # out[t] = v[t + 1], out[n - 1] = 0
    return concatenate(kept, full_like(getitem(v, spec=spec(0, 1)), value=0), axis=ax)


def _linrec_vjp_b(g, out, a, b, axis, reverse=False):
    # h_t = a_t h_{t-1} + b_t  =>  gb_t = g_t + a_{t+1} gb_{t+1}: the same recurrence
    # run the other way, with the coefficients shifted by one step
    return linrec(_shift(a, axis, toward_end=reverse), g, axis=axis, reverse=not reverse)


def _linrec_vjp_a(g, out, a, b, axis, reverse=False):
    gb = _linrec_vjp_b(g, out, a, b, axis, reverse)
    return mul(gb, _shift(out, axis, toward_end=not reverse))  # ga_t = gb_t h_{t-1}


def _linrec_jvp(primals, tangents, out, axis, reverse=False):
    # dh_t = a_t dh_{t-1} + (da_t h_{t-1} + db_t): the same recurrence, driven by the tangents
    (a, _), (ta, tb) = primals, tangents
    drive = _plus(None if ta is None else mul(ta, _shift(out, axis, toward_end=not reverse)), tb)
    return linrec(a, drive, axis=axis, reverse=reverse)


linrec = primitive(  # h_t = a_t * h_{t-1} + b_t along `axis`, h_{-1} = 0 (from the end if reverse)
    "linrec",
    impl=_linrec_impl,
    shape_rule=_linrec_rule,
    kind="other",
    vjps=(_linrec_vjp_a, _linrec_vjp_b),
    jvp=_linrec_jvp,
    torch_name="LinrecBackward0",
    saves=(0, "out"),
    codegen="linrec",
)


def _argsort_rule(x, axis):
    x = as_aval(x)
    normalize_axes("argsort", x, axis)
    return Aval(tuple(x.shape), np.dtype(np.int64))


argsort = primitive(  # stable, NaNs last (NumPy's order); sort is take_along_axis of it
    "argsort",
    impl=lambda x, axis: np.asarray(np.argsort(x, axis=axis, kind="stable"), dtype=np.int64),
    shape_rule=_argsort_rule,
    kind="other",
    nondiff=True,
    vjps=(no_grad,),
    torch_name=None,
    saves=(),
    codegen="argsort",
)

# ------------------------------------------- ops that PyTorch's eager surface needs
# (torch.erf / nn.GELU, clamp with tensor bounds, linalg.vector_norm, diagonal).
# They run between kernel segments in compiled mode (codegen="numpy").


def _erf_impl(x):
    from scipy.special import erf as _scipy_erf

    return np.asarray(_scipy_erf(x))


erf = primitive(
    "erf",
    impl=_erf_impl,
    shape_rule=elementwise_rule("erf", float_only=True),
    kind="other",
    vjps=(lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), 2.0 / math.sqrt(math.pi))),),
    torch_name="ErfBackward0",
    saves=(0,),
    codegen="numpy",
)


def _clamp_impl(x, lo, hi, has_lo, has_hi):
    out = x
    if has_lo:
        out = np.maximum(out, lo)
    if has_hi:
        out = np.minimum(out, hi)
    return np.array(out, copy=True) if out is x else np.asarray(out)


def _clamp_rule(x, lo, hi, has_lo, has_hi):
    ops = [x] + [b for b, has in ((lo, has_lo), (hi, has_hi)) if has]
    return Aval(broadcast_shapes("clamp", *ops), np.dtype(promote(*ops)))


def _clamp_vjp_self(g, out, x, lo, hi, has_lo, has_hi):
    # PyTorch's clamp_backward: the gradient passes where min <= x <= max
    inside = None
    if has_lo:
        inside = ge(x, lo)
    if has_hi:
        below = le(x, hi)
        inside = below if inside is None else logical_and(inside, below)
    return where(inside, g, 0)


def _clamp_vjp_min(g, out, x, lo, hi, has_lo, has_hi):
    # clamp_backward_min_max: min gets it where x < min (and min < max when both are given)
    mask = lt(x, lo)
    if has_hi:
        mask = logical_and(mask, lt(lo, hi))
    return where(mask, g, 0)


def _clamp_vjp_max(g, out, x, lo, hi, has_lo, has_hi):
    mask = gt(x, hi)
    if has_lo:
        mask = logical_or(mask, lt(hi, lo))
    return where(mask, g, 0)


clamp_tensor = primitive(
    "clamp_tensor",
    impl=_clamp_impl,
    shape_rule=_clamp_rule,
    kind="other",
    vjps=(_clamp_vjp_self, _clamp_vjp_min, _clamp_vjp_max),
    torch_name="ClampBackward0",
    saves=(0, 1, 2),
    codegen="numpy",
)


def _vector_norm_impl(x, ord, axis, keepdims):
    a = np.abs(x)
    if ord == np.inf:
        out = np.max(a, axis=axis, keepdims=keepdims)
    elif ord == -np.inf:
        out = np.min(a, axis=axis, keepdims=keepdims)
    elif ord == 0:
        out = np.sum(a != 0, axis=axis, keepdims=keepdims).astype(x.dtype)
    elif ord == 1:
        out = np.sum(a, axis=axis, keepdims=keepdims)
    elif ord == 2:
        out = np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
    else:
        out = np.sum(a**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return np.asarray(out, dtype=x.dtype)


def _vector_norm_rule(x, ord, axis, keepdims):
    x = as_aval(x)
    shape = (
        kept_shape(tuple(x.shape), axis)
        if keepdims
        else tuple(n for k, n in enumerate(x.shape) if axis is not None and k not in axis)
    )
    return Aval(shape, x.dtype)


def _vector_norm_vjp(g, out, x, ord, axis, keepdims):
    """PyTorch's linalg_vector_norm_backward."""
    gk = _keep(g, x, axis, keepdims)
    nk = _keep(out, x, axis, keepdims)
    if ord == 0:
        return full_like(x, value=0)
    if ord == 1:
        return mul(sign(x), gk)
    if ord in (np.inf, -np.inf):
        mask = astype(eq(abs_(x), nk), dtype=dtype_name(g))
        count = sum_(mask, axis=axis, keepdims=True)
        return mul(sign(x), mul(div(gk, count), mask))
    if ord == 2:
        return mul(x, where(eq(nk, 0), 0, div(gk, nk)))
    scale = where(eq(nk, 0), 0, div(gk, pow_(nk, ord - 1)))
    return mul(mul(x, pow_(abs_(x), ord - 2)), scale)


vector_norm = primitive(
    "vector_norm",
    impl=_vector_norm_impl,
    shape_rule=_vector_norm_rule,
    kind="other",
    vjps=(_vector_norm_vjp,),
    torch_name="LinalgVectorNormBackward0",
    saves=(0, "out"),
    codegen="numpy",
)


def diagonal_view(x: np.ndarray, offset: int, axis1: int, axis2: int) -> np.ndarray:
    """A writable view of x's diagonal, diagonal last (NumPy's own view is read-only)."""
    n1, n2 = x.shape[axis1], x.shape[axis2]
    length = max(min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2), 0)
    rest = [k for k in range(x.ndim) if k not in (axis1, axis2)]
    shape = tuple(x.shape[k] for k in rest) + (length,)
    if length == 0:
        return np.zeros(shape, x.dtype)
    idx = [slice(None)] * x.ndim
    if offset >= 0:
        idx[axis2] = slice(offset, None)
    else:
        idx[axis1] = slice(-offset, None)
    start = x[tuple(idx)]  # a view whose first element is the diagonal's first
    strides = tuple(x.strides[k] for k in rest) + (x.strides[axis1] + x.strides[axis2],)
    return np.lib.stride_tricks.as_strided(
        start, shape=shape, strides=strides, writeable=bool(x.flags.writeable)
    )


def _diag_scatter_impl(g, offset, axis1, axis2, shape):
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    diagonal_view(out, offset, axis1, axis2)[...] = g
    return out


def _diagonal_rule(x, offset, axis1, axis2):
    x = as_aval(x)
    return Aval(diagonal_view(np.empty(x.shape, np.bool_), offset, axis1, axis2).shape, x.dtype)


def _view_and_scatter(
    name: str, scatter_name: str, impl, shape_rule, scatter_impl, size_attr: str, torch_name: str
):
    """A view primitive and its transpose, `scatter_name`: the cotangent scattered into
    zeros of the operand's shape. Each one's vjp is the other. The scatter takes the
    view's attrs plus `size_attr`, the operand's "shape" (or "length", 1-D)."""

    def view_vjp(g, out, x, **attrs):
        size = tuple(np.shape(x)) if size_attr == "shape" else int(np.shape(x)[0])
        return scatter(g, **attrs, **{size_attr: size})

    def scatter_vjp(gg, out, g, **attrs):
        return view(gg, **{k: v for k, v in attrs.items() if k != size_attr})

    def scatter_rule(g, **attrs):
        size = attrs[size_attr]
        return Aval(tuple(size) if size_attr == "shape" else (int(size),), as_aval(g).dtype)

    view = primitive(
        name,
        impl=impl,
        shape_rule=shape_rule,
        kind="shape",  # eager: a view of its operand
        vjps=(view_vjp,),
        torch_name=torch_name,
        saves=(),
        codegen="numpy",
    )
    scatter = primitive(
        scatter_name,
        impl=scatter_impl,
        shape_rule=scatter_rule,
        kind="other",
        vjps=(scatter_vjp,),
        torch_name=torch_name.replace("Backward0", "BackwardBackward0"),
        saves=(),
        codegen="numpy",
    )
    return view, scatter


diagonal, diagonal_scatter_zeros = _view_and_scatter(
    "diagonal",
    "diagonal_scatter_zeros",
    lambda x, offset, axis1, axis2: diagonal_view(np.asarray(x), offset, axis1, axis2),
    _diagonal_rule,
    _diag_scatter_impl,
    "shape",
    "DiagonalBackward0",
)


# ------------------------------------------------- windows and strided views (eager: views)


def _strided_view(x: np.ndarray, shape, byte_strides, distinct: bool) -> np.ndarray:
    """A view of x's memory; writable only where no two elements share memory
    (`distinct`: PyTorch's in-place ops on such views are ill-defined, so writing raises
    a clear error instead)."""
    return np.lib.stride_tricks.as_strided(
        x,
        shape=tuple(shape),
        strides=tuple(byte_strides),
        writeable=bool(x.flags.writeable and distinct),
    )


def _element_offsets(shape, strides) -> np.ndarray:
    """Every element's offset (in the strides' unit), in the view's C order."""
    offsets = np.zeros(tuple(shape), dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, strides, strict=True)):
        axis = [1] * len(shape)
        axis[k] = n
        offsets = offsets + (np.arange(n, dtype=np.int64) * s).reshape(axis)
    return offsets


def _unfold_shape(shape, dimension: int, size: int, step: int) -> tuple[int, ...]:
    out = list(shape)
    out[dimension] = (shape[dimension] - size) // step + 1
    return (*out, size)


def _unfold_impl(x, dimension: int, size: int, step: int) -> np.ndarray:
    x = np.asarray(x)
    strides = list(x.strides)
    strides[dimension] *= step
    shape = _unfold_shape(x.shape, dimension, size, step)
    distinct = step >= size or shape[dimension] <= 1  # windows that do not overlap
    return _strided_view(x, shape, (*strides, x.strides[dimension]), distinct)


def _unfold_backward_impl(g, dimension: int, size: int, step: int, shape):
    """The windows summed back into an array of `shape` (overlaps add up)."""
    g = np.asarray(g)
    out = np.zeros(tuple(shape), dtype=g.dtype)
    count = g.shape[dimension]
    for k in range(size):  # window offset k: elements k, k+step, ... along `dimension`
        index = [slice(None)] * out.ndim
        index[dimension] = slice(k, k + step * (count - 1) + 1, step)
        out[tuple(index)] += np.take(g, k, axis=-1)
    return out


unfold, unfold_backward = _view_and_scatter(  # a view, as PyTorch's Tensor.unfold
    "unfold",
    "unfold_backward",
    _unfold_impl,
    lambda x, dimension, size, step: Aval(
        _unfold_shape(as_aval(x).shape, dimension, size, step), as_aval(x).dtype
    ),
    _unfold_backward_impl,
    "shape",
    "UnfoldBackward0",
)


def _as_strided_impl(x, size, stride, offset: int) -> np.ndarray:
    """PyTorch's as_strided over a 1-D contiguous operand (strides in elements)."""
    x = np.asarray(x)
    item = x.strides[0] if x.ndim else x.itemsize
    distinct = np.unique(_element_offsets(size, stride)).size == math.prod(size)
    return _strided_view(x[offset:], size, tuple(s * item for s in stride), distinct)


def _as_strided_backward_impl(g, size, stride, offset: int, length: int):
    """Each element's gradient added into the operand's flat storage (repeats add up)."""
    g = np.asarray(g)
    out = np.zeros(length, dtype=g.dtype)
    np.add.at(out, offset + _element_offsets(size, stride), g)
    return out


as_strided, as_strided_backward = _view_and_scatter(  # of the flattened operand
    "as_strided",
    "as_strided_backward",
    _as_strided_impl,
    lambda x, size, stride, offset: Aval(tuple(size), as_aval(x).dtype),
    _as_strided_backward_impl,
    "length",
    "AsStridedBackward0",
)


# ------------------------------------------------------------ the AD drivers' helper


def sum_to_shape(g, shape):
    """Undo broadcasting: sum `g` down to `shape`. Used once, by the AD drivers."""
    shape = tuple(shape)
    gshape = g.shape if type(g) is np.ndarray else tuple(np.shape(g))
    if gshape == shape:
        return g
    if len(gshape) < len(shape):  # a cotangent smaller than its operand: widen it first
        return broadcast_to(g, shape=shape)
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and gshape[i + lead] != 1
    )
    if type(g) is np.ndarray:  # eager backward on arrays: NumPy directly, same result
        return np.add.reduce(g, axis=axes).reshape(shape) if axes else g.reshape(shape)
    if axes:
        g = sum_(g, axis=axes, keepdims=False)
    if (g.shape if type(g) is np.ndarray else tuple(np.shape(g))) != shape:
        g = reshape(g, shape=shape)
    return g


# cholesky, triangular_solve, solve, inv, det, slogdet live in linalg.py (issue 14)
# real, imag, conj, complex (x + iy) live in complex_ops.py (issue 26)
from tracegrad.ops import complex_ops as _complex_ops  # noqa: E402,F401

# the discrete Fourier transform (fft) and NumPy's fft namespace live in fourier.py
from tracegrad.ops import fourier as _fourier  # noqa: E402,F401
from tracegrad.ops import linalg as _linalg  # noqa: E402,F401

# eig and eigvals of general matrices live in linalg_eig.py
from tracegrad.ops import linalg_eig as _linalg_eig  # noqa: E402,F401

# threefry2x32 (random bits), erfinv, gammaln, digamma, polygamma live in special.py (issue 26)
from tracegrad.ops import special as _special  # noqa: E402,F401
