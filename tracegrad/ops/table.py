"""The rule table: every primitive tracegrad knows, one definition each.

Each entry holds its NumPy implementation, its shape/dtype rule, one
vector-Jacobian rule per input (written in tracegrad ops, so the rule works on
eager tensors, on tracers and on plain arrays), the PyTorch name of its eager
backward node, what that node saves, and its code generation.

For elementwise primitives `codegen` is a scalar expression template over the
operands `{0}`, `{1}`, ... (fast math helpers such as `tg_exp` live in
tracegrad.codegen.mathlib), or a callable `codegen(**attrs) -> template` when
the template depends on static attrs (clip, astype, full_like). The scalar
helpers the templates use are: tg_exp tg_log tg_sqrt tg_sin tg_cos tg_tanh
tg_sigmoid tg_relu tg_sign tg_pow tg_maximum tg_minimum tg_where tg_isfinite
(tests/ops/test_registry.py notices a new one). For structured
primitives `codegen` names a loop template in tracegrad.codegen that reads the
node's attrs.

Variadic primitives (concatenate, getitem, index_add_zeros) hold their vjps in
a `PerOperand` object: `prim.vjps[i]` is the rule for operand i, for any i.
Always index `prim.vjps[i]`; do not call len() on it.

Gradients returned by a rule may have the broadcast output shape; the autodiff
drivers sum them back to each input's shape (`sum_to_shape`), once, for all ops.

Families, in order: arithmetic, elementwise functions, comparisons and logic,
reductions, softmax family, shape ops, matmul, indexing.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from tracegrad.ops.core import (Aval, DTypeError, ShapeError, TracegradError, aval_of,  # noqa: F401
                                op_error, primitive, promote)

# ------------------------------------------------------------------ helpers


def _aval(v) -> Aval:
    return v if isinstance(v, Aval) else aval_of(v)


def _avals(*vs):
    """The operands that are arrays (Python scalars are left out of error texts)."""
    return [v for v in vs if isinstance(v, Aval)]


def is_static_scalar(v) -> bool:
    """A Python (or NumPy) scalar operand: static, weakly typed, never differentiated."""
    return isinstance(v, (int, float, np.generic)) and not isinstance(v, np.ndarray)


def dtype_name(v) -> str:
    """The NumPy dtype name of any value kind ("float32", ...), for `astype` attrs."""
    return np.dtype(aval_of(v).dtype).name


def _as_array(fn):
    """Wrap a NumPy function so 0-d results are ndarrays, not NumPy scalars."""
    def impl(*args, **attrs):
        return np.asarray(fn(*args, **attrs))
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def broadcast_shapes(name, *avals):
    shapes = [a.shape if isinstance(a, Aval) else () for a in avals]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise op_error(name, _avals(*avals), "shapes cannot be broadcast together") from None


def elementwise_rule(name, float_only=False, no_bool=False, float_out=False):
    """Broadcast shapes, promote dtypes (Python scalars are weak).

    float_only: int/bool operands are a DTypeError (exp, log, ...).
    no_bool: bool operands are a DTypeError (sub, neg, as in NumPy/PyTorch).
    float_out: int operands give float64, as NumPy's true_divide does.
    """
    def rule(*avals, **attrs):
        shape = broadcast_shapes(name, *avals)
        dtype = promote(*avals)
        if float_only and not np.issubdtype(dtype, np.floating):
            raise op_error(name, _avals(*avals),
                           f"expected floating-point operands, got {dtype}", cls=DTypeError)
        if no_bool and dtype == np.bool_:
            raise op_error(name, _avals(*avals), "not supported for bool operands", cls=DTypeError)
        if float_out and not np.issubdtype(dtype, np.floating):
            dtype = np.dtype(np.float64)
        return Aval(shape, np.dtype(dtype))
    return rule


def comparison_rule(name):
    def rule(*avals, **attrs):
        return Aval(broadcast_shapes(name, *avals), np.dtype(bool))
    return rule


class PerOperand:
    """The vjps of a variadic primitive: `vjps[i]` is `rule(i, g, out, *operands, **attrs)`."""

    def __init__(self, rule):
        self.rule = rule

    def __getitem__(self, i: int):
        return functools.partial(self.rule, i)

    def __repr__(self) -> str:
        return f"PerOperand({self.rule.__name__})"


def _no_grad(*_args, **_attrs):
    return None


# --------------------------------------------------------------- arithmetic

add = primitive(
    "add", impl=_as_array(np.add), shape_rule=elementwise_rule("add"), kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: g),
    torch_name="AddBackward0", saves=(), codegen="({0} + {1})")

sub = primitive(
    "sub", impl=_as_array(np.subtract), shape_rule=elementwise_rule("sub", no_bool=True),
    kind="elementwise",
    vjps=(lambda g, out, x, y: g, lambda g, out, x, y: neg(g)),
    # PyTorch: `1 - x` is rsub
    torch_name=lambda x, y: "RsubBackward1" if is_static_scalar(x) else "SubBackward0",
    saves=(), codegen="({0} - {1})")

mul = primitive(
    "mul", impl=_as_array(np.multiply), shape_rule=elementwise_rule("mul"), kind="elementwise",
    vjps=(lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(g, x)),
    torch_name="MulBackward0", saves=(0, 1), codegen="({0} * {1})")

div = primitive(
    "div", impl=_as_array(np.true_divide), shape_rule=elementwise_rule("div", float_out=True),
    kind="elementwise",
    vjps=(lambda g, out, x, y: div(g, y),
          # PyTorch's form: -g * ((x / y) / y), which overflows later than x / y**2
          lambda g, out, x, y: neg(mul(g, div(div(x, y), y)))),
    torch_name="DivBackward0", saves=(0, 1), codegen="({0} / {1})")

neg = primitive(
    "neg", impl=_as_array(np.negative), shape_rule=elementwise_rule("neg", no_bool=True),
    kind="elementwise",
    vjps=(lambda g, out, x: neg(g),),
    torch_name="NegBackward0", saves=(), codegen="(-{0})")


def _pow_vjp_base(g, out, x, y):
    if is_static_scalar(x):
        return None
    if is_static_scalar(y):
        if y == 0:  # PyTorch: zeros, not g * 0 * x**-1
            return full_like(g, value=0)
        return mul(g, mul(y, pow_(x, y - 1)))
    return mul(g, mul(y, pow_(x, sub(y, 1))))


def _pow_vjp_exponent(g, out, x, y):
    if is_static_scalar(y):
        return None
    if is_static_scalar(x):
        # log of a Python scalar stays a weak Python float (no float64 drift)
        log_x = math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
        grad = mul(g, mul(out, log_x))
        return where(ge(y, 0), 0.0, grad) if x == 0 else grad
    # PyTorch: where x == 0 and y >= 0 the gradient is 0, not nan
    at_zero = logical_and(eq(x, 0), ge(y, 0))
    return mul(g, where(at_zero, 0.0, mul(out, log(x))))


def _pow_torch_name(x, y):
    if is_static_scalar(y):
        return "PowBackward0"
    return "PowBackward2" if is_static_scalar(x) else "PowBackward1"


pow_ = primitive(
    "pow", impl=_as_array(np.power), shape_rule=elementwise_rule("pow"), kind="elementwise",
    vjps=(_pow_vjp_base, _pow_vjp_exponent),
    # x ** 2 keeps x only (so `y = x**2; y += 1; y.backward()` works); scalars are never saved
    torch_name=_pow_torch_name, saves=(0, 1), codegen="tg_pow({0}, {1})")

# ------------------------------------------------------ elementwise functions


def _unary(name, impl, vjp, codegen, saves, torch_name=None, float_only=True):
    return primitive(
        name, impl=_as_array(impl), shape_rule=elementwise_rule(name, float_only=float_only),
        kind="elementwise", vjps=(vjp,),
        torch_name=torch_name or name.capitalize() + "Backward0", saves=saves, codegen=codegen)


def _sigmoid_impl(x):
    # exp only of -|x|, so nothing overflows at |x| = 1e4 and tiny results keep their digits
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)


def _relu_impl(x):
    return np.maximum(x, 0) if x.dtype != np.bool_ else x.copy()


exp = _unary("exp", np.exp, lambda g, out, x: mul(g, out), "tg_exp({0})", ("out",))
log = _unary("log", np.log, lambda g, out, x: div(g, x), "tg_log({0})", (0,))
sqrt = _unary("sqrt", np.sqrt, lambda g, out, x: div(g, mul(2, out)), "tg_sqrt({0})", ("out",))
sin = _unary("sin", np.sin, lambda g, out, x: mul(g, cos(x)), "tg_sin({0})", (0,))
cos = _unary("cos", np.cos, lambda g, out, x: mul(g, neg(sin(x))), "tg_cos({0})", (0,))
tanh = _unary("tanh", np.tanh, lambda g, out, x: mul(g, sub(1, mul(out, out))),
              "tg_tanh({0})", ("out",))
sigmoid = _unary("sigmoid", _sigmoid_impl, lambda g, out, x: mul(mul(g, sub(1, out)), out),
                 "tg_sigmoid({0})", ("out",))
relu = _unary("relu", _relu_impl, lambda g, out, x: where(le(out, 0), 0, g),
              "tg_relu({0})", ("out",), float_only=False)
abs_ = _unary("abs", np.abs, lambda g, out, x: mul(g, sign(x)), "abs({0})", (0,),
              float_only=False)
# sign has a (zero) gradient in PyTorch: SignBackward0 exists and gives zeros
sign = _unary("sign", np.sign, lambda g, out, x: full_like(g, value=0), "tg_sign({0})", (),
              float_only=False)


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
    "maximum", impl=_as_array(np.maximum), shape_rule=elementwise_rule("maximum"),
    kind="elementwise", vjps=(_maximum_vjp(True), _maximum_vjp(False)),
    torch_name="MaximumBackward0", saves=(0, 1), codegen="tg_maximum({0}, {1})")

minimum = primitive(
    "minimum", impl=_as_array(np.minimum), shape_rule=elementwise_rule("minimum"),
    kind="elementwise", vjps=(_minimum_vjp(True), _minimum_vjp(False)),
    torch_name="MinimumBackward0", saves=(0, 1), codegen="tg_minimum({0}, {1})")


def _where_rule(cond, x, y):
    shape = broadcast_shapes("where", cond, x, y)
    if isinstance(cond, Aval) and cond.dtype != np.bool_:
        raise op_error("where", _avals(cond, x, y),
                       f"condition must be bool, got {cond.dtype}", cls=DTypeError)
    return Aval(shape, np.dtype(promote(x, y)))


where = primitive(
    "where", impl=_as_array(np.where), shape_rule=_where_rule, kind="elementwise",
    vjps=(_no_grad,
          lambda g, out, c, x, y: where(c, g, 0),
          lambda g, out, c, x, y: where(c, 0, g)),
    torch_name="WhereBackward0", saves=(0,), codegen="tg_where({0}, {1}, {2})")


def _clip_impl(x, lo=None, hi=None):
    if lo is None and hi is None:
        return np.array(x, copy=True)
    return np.asarray(np.clip(x, lo, hi))


def _clip_rule(x, lo=None, hi=None):
    x = _aval(x)
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


def literal(value) -> str:
    """A Python literal for a static scalar in generated code (inf and nan spelled via np)."""
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def _clip_codegen(lo=None, hi=None):
    expr = "{0}"
    if lo is not None:
        expr = f"tg_maximum({expr}, {literal(lo)})"
    if hi is not None:
        expr = f"tg_minimum({expr}, {literal(hi)})"
    return expr


clip = primitive(
    "clip", impl=_clip_impl, shape_rule=_clip_rule, kind="elementwise",
    vjps=(_clip_vjp,), torch_name="ClampBackward1", saves=(0,), codegen=_clip_codegen)


def _astype_rule(x, dtype):
    return Aval(_aval(x).shape, np.dtype(dtype))


def _astype_vjp(g, out, x, dtype):
    if is_static_scalar(x) or not np.issubdtype(aval_of(x).dtype, np.floating):
        return None
    return astype(g, dtype=dtype_name(x))


def _astype_codegen(dtype):
    return "({0} != 0)" if np.dtype(dtype) == np.bool_ else f"np.{np.dtype(dtype).name}({{0}})"


astype = primitive(
    "astype", impl=lambda x, dtype: np.array(x, dtype=dtype, copy=True),
    shape_rule=_astype_rule, kind="elementwise",
    vjps=(_astype_vjp,), torch_name="ToCopyBackward0", saves=(), codegen=_astype_codegen)


def _full_like_rule(x, value, dtype=None):
    x = _aval(x)
    return Aval(x.shape, np.dtype(dtype) if dtype is not None else x.dtype)


def _full_like_codegen(value, dtype=None):
    return literal(bool(value)) if dtype == "bool" else literal(value)


full_like = primitive(
    "full_like",
    impl=lambda x, value, dtype=None: np.full(np.shape(x), value,
                                              dtype=dtype or np.asarray(x).dtype),
    shape_rule=_full_like_rule, kind="elementwise", nondiff=True,
    vjps=(_no_grad,), torch_name="FullLikeBackward0", saves=(), codegen=_full_like_codegen)

# ----------------------------------------------- comparisons and logic (no gradient)


def _nondiff(name, impl, codegen, arity=2):
    return primitive(
        name, impl=_as_array(impl), shape_rule=comparison_rule(name), kind="elementwise",
        nondiff=True, vjps=(_no_grad,) * arity, torch_name=None, saves=(), codegen=codegen)


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


def normalize_axes(name, aval, axis) -> tuple:
    """`axis` (None, int or tuple) as a sorted tuple of non-negative axes."""
    aval = _aval(aval)
    if axis is None:
        return tuple(range(aval.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -aval.ndim <= a < aval.ndim:
            raise op_error(name, [aval], f"axis {a} is out of range for {aval.ndim}-d input")
        out.append(int(a) % aval.ndim)
    if len(set(out)) != len(out):
        raise op_error(name, [aval], f"repeated axis in {axis}")
    return tuple(sorted(out))


_norm_axis = normalize_axes  # old name


@functools.lru_cache(maxsize=None)
def _reduced_dtype(fn_name: str, dtype: np.dtype) -> np.dtype:
    """What NumPy's reduction returns for this dtype (sum of bool -> int64, mean of int -> f64)."""
    sample = np.ones(2, dtype=dtype)
    return np.asarray(getattr(np, fn_name)(sample)).dtype


def reduce_rule(name, numpy_name=None, float_only=False, single_axis=False):
    def rule(x, axis=None, keepdims=False, **_):
        x = _aval(x)
        if float_only and not np.issubdtype(x.dtype, np.floating):
            raise op_error(name, [x], f"expected a floating-point operand, got {x.dtype}",
                           cls=DTypeError)
        if single_axis and axis is not None and not isinstance(axis, (int, np.integer)):
            raise op_error(name, [x], f"axis must be an int or None, got {axis!r}")
        axes = normalize_axes(name, x, axis)
        if name in ("max", "min", "argmax", "argmin", "logsumexp"):
            empty = [i for i in axes if x.shape[i] == 0]
            if empty or (axis is None and int(np.prod(x.shape)) == 0):
                raise op_error(name, [x], "zero-size reduction has no identity")
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        dtype = _reduced_dtype(numpy_name or name, x.dtype)
        return Aval(shape, dtype)
    return rule


def kept_shape(shape, axis) -> tuple:
    """`shape` with the reduced axes kept as size 1."""
    nd = len(shape)
    axes = range(nd) if axis is None else [
        a % nd for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis)]
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


_kept_shape = kept_shape  # old name


def _keep(v, x, axis, keepdims):
    """Reshape a reduction's result (or cotangent) so it broadcasts against x."""
    if keepdims:
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
    dof = _reduced_count(x, axis) - ddof
    scale = 2.0 / dof if dof > 0 else math.inf  # PyTorch: nan gradient when N <= ddof
    return mul(_keep(g, x, axis, keepdims), mul(centered, scale))


def _logsumexp_impl(x, axis=None, keepdims=False):
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf rows give -inf, not nan
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return np.asarray(total if keepdims else np.squeeze(total, axis=axis))


def _logsumexp_vjp(g, out, x, axis=None, keepdims=False):
    return mul(_keep(g, x, axis, keepdims), exp(sub(x, _keep(out, x, axis, keepdims))))


def _by_axis(full: str, with_axis: str):
    return lambda x, axis=None, keepdims=False, **_: full if axis is None else with_axis


sum_ = primitive(
    "sum", impl=lambda x, axis=None, keepdims=False: np.asarray(np.sum(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("sum"), kind="reduction",
    vjps=(_sum_vjp,), torch_name=_by_axis("SumBackward0", "SumBackward1"),
    saves=(), codegen="reduce_sum")

mean = primitive(
    "mean", impl=lambda x, axis=None, keepdims=False: np.asarray(np.mean(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("mean"), kind="reduction",
    vjps=(_mean_vjp,), torch_name=_by_axis("MeanBackward0", "MeanBackward1"),
    saves=(), codegen="reduce_mean")

max_ = primitive(
    "max", impl=lambda x, axis=None, keepdims=False: np.asarray(np.max(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("max"), kind="reduction",
    vjps=(_extremum_vjp,), torch_name=_by_axis("MaxBackward1", "MaxBackward0"),
    saves=(0, "out"), codegen="reduce_max")

min_ = primitive(
    "min", impl=lambda x, axis=None, keepdims=False: np.asarray(np.min(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("min"), kind="reduction",
    vjps=(_extremum_vjp,), torch_name=_by_axis("MinBackward1", "MinBackward0"),
    saves=(0, "out"), codegen="reduce_min")

argmax = primitive(
    "argmax",
    impl=lambda x, axis=None, keepdims=False: np.asarray(np.argmax(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("argmax", single_axis=True), kind="reduction", nondiff=True,
    vjps=(_no_grad,), torch_name=None, saves=(), codegen="reduce_argmax")

argmin = primitive(
    "argmin",
    impl=lambda x, axis=None, keepdims=False: np.asarray(np.argmin(x, axis=axis, keepdims=keepdims)),
    shape_rule=reduce_rule("argmin", single_axis=True), kind="reduction", nondiff=True,
    vjps=(_no_grad,), torch_name=None, saves=(), codegen="reduce_argmin")

var = primitive(
    "var",
    impl=lambda x, axis=None, keepdims=False, ddof=0: np.asarray(
        np.var(x, axis=axis, keepdims=keepdims, ddof=ddof)),
    shape_rule=reduce_rule("var"), kind="reduction",
    vjps=(_var_vjp,), torch_name="VarBackward0", saves=(0,), codegen="reduce_var")

logsumexp = primitive(
    "logsumexp", impl=_logsumexp_impl, shape_rule=reduce_rule("logsumexp", "mean", float_only=True),
    kind="reduction", vjps=(_logsumexp_vjp,), torch_name="LogsumexpBackward0",
    saves=(0, "out"), codegen="reduce_logsumexp")

# ------------------------------------------------------------ softmax family


def _softmax_impl(x, axis):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return np.asarray(shifted / np.sum(shifted, axis=axis, keepdims=True))


def _log_softmax_impl(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return np.asarray(shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True)))


def _softmax_rule(name):
    def rule(x, axis):
        x = _aval(x)
        if not np.issubdtype(x.dtype, np.floating):
            raise op_error(name, [x], f"expected a floating-point operand, got {x.dtype}",
                           cls=DTypeError)
        if not isinstance(axis, (int, np.integer)):
            raise op_error(name, [x], f"axis must be an int, got {axis!r}")
        normalize_axes(name, x, axis)
        return x
    return rule


softmax = primitive(
    "softmax", impl=_softmax_impl, shape_rule=_softmax_rule("softmax"), kind="other",
    vjps=(lambda g, out, x, axis: mul(out, sub(g, sum_(mul(g, out), axis=axis, keepdims=True))),),
    torch_name="SoftmaxBackward0", saves=("out",), codegen="softmax")

log_softmax = primitive(
    "log_softmax", impl=_log_softmax_impl, shape_rule=_softmax_rule("log_softmax"), kind="other",
    vjps=(lambda g, out, x, axis: sub(g, mul(exp(out), sum_(g, axis=axis, keepdims=True))),),
    torch_name="LogSoftmaxBackward0", saves=("out",), codegen="log_softmax")

# --------------------------------------------------------------- shape ops


def _reshape_rule(x, shape):
    x = _aval(x)
    shape = tuple(shape)
    if any(d < 0 for d in shape) or (
            int(np.prod(shape, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64))):
        raise op_error("reshape", [x], f"cannot reshape to {shape}")
    return Aval(shape, x.dtype)


reshape = primitive(
    "reshape", impl=lambda x, shape: np.reshape(x, shape), shape_rule=_reshape_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: reshape(g, shape=tuple(np.shape(x))),),
    torch_name="ViewBackward0", saves=(), codegen="reshape")


def _broadcast_to_rule(x, shape):
    x = _aval(x)
    shape = tuple(shape)
    try:
        ok = len(shape) >= x.ndim and tuple(np.broadcast_shapes(x.shape, shape)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise op_error("broadcast_to", [x], f"cannot broadcast to {shape}")
    return Aval(shape, x.dtype)


broadcast_to = primitive(
    "broadcast_to", impl=lambda x, shape: np.broadcast_to(x, shape), shape_rule=_broadcast_to_rule,
    kind="shape",
    vjps=(lambda g, out, x, shape: g,),  # the driver sums g back to x's shape
    torch_name="ExpandBackward0", saves=(), codegen="broadcast")


def _transpose_rule(x, axes):
    x = _aval(x)
    if sorted(axes) != list(range(x.ndim)):
        raise op_error("transpose", [x], f"axes {tuple(axes)} are not a permutation of "
                                         f"the {x.ndim} axes")
    return Aval(tuple(x.shape[a] for a in axes), x.dtype)


def _transpose_torch_name(x, axes):
    moved = [i for i, a in enumerate(axes) if i != a]
    return "TransposeBackward0" if len(moved) == 2 and np.ndim(x) > 2 else "PermuteBackward0"


transpose = primitive(
    "transpose", impl=lambda x, axes: np.transpose(x, axes), shape_rule=_transpose_rule,
    kind="shape",
    vjps=(lambda g, out, x, axes: transpose(g, axes=tuple(int(i) for i in np.argsort(axes))),),
    torch_name=_transpose_torch_name, saves=(), codegen="transpose")


def _concatenate_rule(*xs, axis):
    xs = [_aval(x) for x in xs]
    if not xs:
        raise op_error("concatenate", [], "needs at least one array")
    first = xs[0]
    if first.ndim == 0:
        raise op_error("concatenate", xs, "zero-dimensional arrays cannot be concatenated")
    ax = normalize_axes("concatenate", first, axis)[0]
    for x in xs[1:]:
        if x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != ax):
            raise op_error("concatenate", xs,
                           f"shapes must match except along axis {axis}")
    shape = list(first.shape)
    shape[ax] = sum(x.shape[ax] for x in xs)
    return Aval(tuple(shape), np.dtype(promote(*xs)))


def _concatenate_vjp(i, g, out, *xs, axis):
    ndim = np.ndim(xs[0])
    ax = axis % ndim
    start = sum(np.shape(x)[ax] for x in xs[:i])
    stop = start + np.shape(xs[i])[ax]
    spec = tuple(("slice", start, stop, 1) if d == ax else ("slice", 0, n, 1)
                 for d, n in enumerate(np.shape(out)))
    return getitem(g, spec=spec)


concatenate = primitive(
    "concatenate", impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
    shape_rule=_concatenate_rule, kind="shape",
    vjps=PerOperand(_concatenate_vjp), torch_name="CatBackward0", saves=(),
    codegen="concatenate")

# ------------------------------------------------------------------- matmul


def _matmul_rule(x, y):
    x, y = _aval(x), _aval(y)
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
    batch = broadcast_shapes("matmul", Aval(xb, x.dtype), Aval(yb, y.dtype))
    core = (x.shape[-2],) if x.ndim >= 2 else ()
    core += (y.shape[-1],) if y.ndim >= 2 else ()
    return Aval(batch + core, np.dtype(promote(x, y)))


def _swap_last(v):
    nd = np.ndim(v)
    return transpose(v, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul_promoted(g, x, y):
    """View a matmul with 1-D operands as matrix x matrix: x (k,) -> (1,k), y (k,) -> (k,1)."""
    x2 = reshape(x, shape=(1,) + np.shape(x)) if np.ndim(x) == 1 else x
    y2 = reshape(y, shape=np.shape(y) + (1,)) if np.ndim(y) == 1 else y
    gshape = tuple(np.shape(g))
    if np.ndim(x) == 1:
        gshape = gshape[:len(gshape) - (0 if np.ndim(y) == 1 else 1)] + (1,) + (
            gshape[-1:] if np.ndim(y) != 1 else ())
    if np.ndim(y) == 1:
        gshape = gshape + (1,)
    return reshape(g, shape=gshape), x2, y2


def _matmul_vjp_x(g, out, x, y):
    g2, x2, y2 = _matmul_promoted(g, x, y)
    gx = matmul(g2, _swap_last(y2))  # (..., n, k)
    if np.ndim(x) == 1:  # drop the promoted row; the driver sums any batch dims
        gx = reshape(gx, shape=np.shape(gx)[:-2] + np.shape(gx)[-1:])
    return gx


def _matmul_vjp_y(g, out, x, y):
    g2, x2, y2 = _matmul_promoted(g, x, y)
    gy = matmul(_swap_last(x2), g2)  # (..., k, m)
    if np.ndim(y) == 1:
        gy = reshape(gy, shape=np.shape(gy)[:-1])
    return gy


def _matmul_torch_name(x, y):
    nx, ny = np.ndim(x), np.ndim(y)
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


matmul = primitive(
    "matmul", impl=_as_array(np.matmul), shape_rule=_matmul_rule, kind="matmul",
    vjps=(_matmul_vjp_x, _matmul_vjp_y), torch_name=_matmul_torch_name, saves=(0, 1),
    codegen="matmul")

# ----------------------------------------------------------------- indexing
# getitem's `spec` has one entry per indexed axis of x (tracegrad.ops.indexing
# builds it from a NumPy index, expanding `...` and trailing axes):
#   int i (0 <= i < dim)            select
#   ("slice", start, stop, step)    normalized by slice.indices; stop None = "run to the start"
#   None                            a new axis of size 1 (consumes no axis of x)
#   ("array", k)                    the k-th index-array operand (integer, may be negative)
# As in NumPy, ints count as advanced indices when any array is present.


def spec_to_index(spec, arrays) -> tuple:
    """The NumPy index tuple that `spec` stands for."""
    out = []
    for e in spec:
        if e is None or isinstance(e, (int, np.integer)):
            out.append(e)
        elif e[0] == "slice":
            out.append(slice(e[1], e[2], e[3]))
        else:
            out.append(np.asarray(arrays[e[1]]))
    return tuple(out)


def slice_length(start, stop, step) -> int:
    return len(range(start, -1 if stop is None else stop, step))


def index_shape(name, x: Aval, spec, arrays) -> tuple:
    """Result shape of x[spec] under NumPy's rules (checked against NumPy in the tests)."""
    has_array = any(isinstance(e, tuple) and e[0] == "array" for e in spec)
    consumed = sum(1 for e in spec if e is not None)
    if consumed != x.ndim:
        raise op_error(name, [x] + list(arrays),
                       f"index has {consumed} entries for a {x.ndim}-d array")
    out, advanced, advanced_at, dim = [], [], [], 0
    for pos, e in enumerate(spec):
        if e is None:
            out.append(1)
            continue
        n = x.shape[dim]
        dim += 1
        if isinstance(e, (int, np.integer)):
            if not 0 <= e < n:
                raise op_error(name, [x], f"index {e} is out of range for axis {dim - 1} "
                                          f"with size {n}", cls=ShapeError)
            if has_array:
                advanced.append(())
                advanced_at.append((pos, len(out)))
        elif e[0] == "slice":
            out.append(slice_length(*e[1:]))
        else:
            arr = arrays[e[1]]
            if not np.issubdtype(arr.dtype, np.integer):
                raise op_error(name, [x, arr], f"index arrays must be integers, got {arr.dtype}",
                               cls=DTypeError)
            advanced.append(arr.shape)
            advanced_at.append((pos, len(out)))
    if not has_array:
        return tuple(out)
    try:
        block = tuple(np.broadcast_shapes(*advanced))
    except ValueError:
        raise op_error(name, [x] + list(arrays),
                       "index arrays cannot be broadcast together") from None
    positions = [p for p, _ in advanced_at]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    insert_at = advanced_at[0][1] if adjacent else 0
    return tuple(out[:insert_at]) + block + tuple(out[insert_at:])


def _getitem_rule(x, *arrays, spec):
    x = _aval(x)
    arrays = [_aval(a) for a in arrays]
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
    for e, n in zip(spec, _consumed_sizes(x, spec)):
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


getitem = primitive(
    "getitem", impl=lambda x, *arrays, spec: np.array(x[spec_to_index(spec, arrays)]),
    shape_rule=_getitem_rule, kind="index",
    vjps=PerOperand(_getitem_vjp), torch_name=_getitem_torch_name, saves=(),
    codegen="getitem")


def _index_add_impl(g, *arrays, spec, shape):
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    index = spec_to_index(spec, arrays)
    if arrays:
        np.add.at(out, index, g)  # repeated indices accumulate
    else:
        out[index] = g  # basic indexing never repeats an element
    return out


def _index_add_rule(g, *arrays, spec, shape):
    g = _aval(g)
    arrays = [_aval(a) for a in arrays]
    expected = index_shape("index_add_zeros", Aval(tuple(shape), g.dtype), spec, arrays)
    if tuple(g.shape) != expected:
        raise op_error("index_add_zeros", [g] + arrays,
                       f"values have shape {g.shape}, the index selects {expected}")
    return Aval(tuple(shape), g.dtype)


def _index_add_vjp(i, gg, out, g, *arrays, spec, shape):
    return getitem(gg, *arrays, spec=spec) if i == 0 else None


index_add_zeros = primitive(
    "index_add_zeros", impl=_index_add_impl, shape_rule=_index_add_rule, kind="index",
    vjps=PerOperand(_index_add_vjp),
    torch_name=lambda g, *arrays, spec, shape: "IndexPutBackward0" if arrays else "SliceBackwardBackward0",
    saves=(), codegen="index_add_zeros")


def _along_axis_shape(name, x, idx, axis):
    x, idx = _aval(x), _aval(idx)
    if not np.issubdtype(idx.dtype, np.integer):
        raise op_error(name, [x, idx], f"indices must be integers, got {idx.dtype}",
                       cls=DTypeError)
    if idx.ndim != x.ndim:
        raise op_error(name, [x, idx], "indices and array must have the same number of dims")
    ax = normalize_axes(name, x, axis)[0]
    others = [Aval(tuple(d for i, d in enumerate(a.shape) if i != ax), a.dtype) for a in (x, idx)]
    batch = broadcast_shapes(name, *others)
    return batch[:ax] + (idx.shape[ax],) + batch[ax:], ax


def _take_along_axis_rule(x, idx, axis):
    shape, _ = _along_axis_shape("take_along_axis", x, idx, axis)
    return Aval(shape, _aval(x).dtype)


def _take_along_axis_vjp(g, out, x, idx, axis):
    # scatter into x's shape, widened to the broadcast batch; the driver sums the rest
    full = list(np.shape(out))
    full[axis % len(full)] = np.shape(x)[axis]
    return put_along_axis_add(g, idx, axis=axis, shape=tuple(full))


def _take_along_axis_impl(x, idx, axis):
    # broadcast the non-axis dims explicitly, so impl and shape rule agree
    shape, ax = _along_axis_shape("take_along_axis", aval_of(x), aval_of(idx), axis)
    x_shape = shape[:ax] + (np.shape(x)[ax],) + shape[ax + 1:]
    return np.take_along_axis(np.broadcast_to(x, x_shape), np.broadcast_to(idx, shape), ax)


take_along_axis = primitive(
    "take_along_axis", impl=_take_along_axis_impl,
    shape_rule=_take_along_axis_rule, kind="index",
    vjps=(_take_along_axis_vjp, _no_grad), torch_name="GatherBackward0", saves=(1,),
    codegen="take_along_axis")


def _along_axis_index(idx, axis, shape):
    """The NumPy fancy index that addresses `shape` at idx along `axis`."""
    ax = axis % len(shape)
    idx = np.broadcast_to(idx, shape[:ax] + (np.shape(idx)[ax],) + shape[ax + 1:])
    grids = list(np.ogrid[tuple(slice(n) for n in idx.shape)])
    grids[ax] = idx
    return tuple(grids)


def _put_along_axis_add_impl(g, idx, axis, shape):
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    np.add.at(out, _along_axis_index(idx, axis, tuple(shape)), g)
    return out


def _put_along_axis_add_rule(g, idx, axis, shape):
    g = _aval(g)
    expected, _ = _along_axis_shape("put_along_axis_add", Aval(tuple(shape), g.dtype), idx, axis)
    if tuple(g.shape) != expected:
        raise op_error("put_along_axis_add", [g, _aval(idx)],
                       f"values have shape {g.shape}, expected {expected}")
    return Aval(tuple(shape), g.dtype)


put_along_axis_add = primitive(
    "put_along_axis_add", impl=_put_along_axis_add_impl, shape_rule=_put_along_axis_add_rule,
    kind="index",
    vjps=(lambda gg, out, g, idx, axis, shape: take_along_axis(gg, idx, axis=axis), _no_grad),
    torch_name="ScatterAddBackward0", saves=(1,), codegen="put_along_axis_add")

# ------------------------------------------------------------ the AD drivers' helper


def sum_to_shape(g, shape):
    """Undo broadcasting: sum `g` down to `shape`. Used once, by the AD drivers."""
    shape = tuple(shape)
    gshape = tuple(np.shape(g))
    if gshape == shape:
        return g
    if len(gshape) < len(shape):  # a cotangent smaller than its operand: widen it first
        return broadcast_to(g, shape=shape)
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and gshape[i + lead] != 1)
    if axes:
        g = sum_(g, axis=axes, keepdims=False)
    if tuple(np.shape(g)) != shape:
        g = reshape(g, shape=shape)
    return g
