"""Rule-table rows for random bits and special functions (issue 26): threefry2x32,
erfinv, gammaln, digamma and polygamma.

Each is defined once, like the primitives of tracegrad/ops/table.py (whose end
imports this module): a NumPy/SciPy implementation, a shape rule, vjp rules in
tracegrad ops and a code-generation entry. They are elementwise over their
broadcast operands (vmap batches them as such: tracegrad/batching.py).
threefry2x32 generates code: a straight-line scalar helper that mathlib inlines
into fused Numba loops; the special functions, like `erf`, run their SciPy impl
between kernel segments in compiled mode (codegen="numpy").

`threefry2x32(k0, k1, x0, x1, word)` is the Threefry-2x32 block cipher (20
rounds, Salmon et al. 2011), the counter-based generator of JAX's
`jax.random`, on uint32 operands: `word` 0 or 1 selects an output word, 2 gives
their xor (JAX's 32-bit random bits). tracegrad.random builds keys, `split`,
`fold_in` and the samplers from it.

    >>> import numpy as np
    >>> from tracegrad.ops import special as S
    >>> k = np.uint32([0x13198A2E, 0x03707344]); x = np.uint32([0x243F6A88, 0x85A308D3])
    >>> [hex(int(S.threefry2x32(k[0], k[1], x[0], x[1], word=w))) for w in (0, 1)]
    ['0xc4923a9c', '0x483df7a0']
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import (
    Aval,
    DTypeError,
    aval_of,
    op_error,
    primitive,
    user_location_suffix,
)
from tracegrad.ops.rulekit import (
    array_avals,
    as_aval,
    broadcast_shapes,
    elementwise_rule,
    no_grad,
    returns_array,
)
from tracegrad.runtime import mathlib

# ------------------------------------------------------------- threefry2x32

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # Threefry's key-schedule constant


def threefry_block(k0, k1, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds on uint32 arrays (wrapping arithmetic), as JAX's
    `threefry2x32_p`: five groups of four rounds, a key injection after each. In place
    on two broadcast buffers (six times faster than fresh arrays per step)."""
    k0, k1, x0, x1 = (np.asarray(v, dtype=_U32) for v in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(_PARITY))
    shape = np.broadcast_shapes(k0.shape, k1.shape, x0.shape, x1.shape)
    a = np.broadcast_to(np.add(x0, ks[0], dtype=_U32), shape).copy()
    b = np.broadcast_to(np.add(x1, ks[1], dtype=_U32), shape).copy()
    t = np.empty_like(b)
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            np.add(a, b, out=a)
            np.left_shift(b, np.uint32(r), out=t)  # b = rotl(b, r) ^ a
            np.right_shift(b, np.uint32(32 - r), out=b)
            np.bitwise_or(b, t, out=b)
            np.bitwise_xor(b, a, out=b)
        np.add(a, ks[(i + 1) % 3], out=a, dtype=_U32)
        np.add(b, ks[(i + 2) % 3], out=b, dtype=_U32)
        np.add(b, np.uint32(i + 1), out=b, dtype=_U32)
    return a, b


def _threefry_impl(k0, k1, x0, x1, word):
    with np.errstate(over="ignore"):  # 0-d operands are NumPy scalars, which warn on wrap
        a, b = threefry_block(k0, k1, x0, x1)
    out = a if word == 0 else b if word == 1 else a ^ b
    return np.asarray(out, dtype=_U32)


def _threefry_rule(k0, k1, x0, x1, word):
    operands = (k0, k1, x0, x1)
    shape = broadcast_shapes("threefry2x32", *operands)
    for v in operands:
        if isinstance(v, Aval) and v.dtype != _U32:
            raise op_error(
                "threefry2x32",
                array_avals(*operands),
                f"operands must be uint32, got {v.dtype}",
                cls=DTypeError,
            )
    if word not in (0, 1, 2):
        raise op_error("threefry2x32", array_avals(*operands), f"word must be 0, 1 or 2: {word}")
    return Aval(shape, _U32)


def _threefry_helper(word: int) -> str:
    """Source of `tg_threefry<word>(k0, k1, x0, x1)` for generated kernels: the same 20
    rounds on scalars, straight-line (mathlib inlines it into the fused loop), carried in
    uint64 and masked to 32 bits after each add and rotation (Numba widens uint32 sums)."""
    ks = ("a0", "a1", "a2")
    body = [
        "m = np.uint64(0xFFFFFFFF)",
        "a0 = np.uint64(k0)",
        "a1 = np.uint64(k1)",
        f"a2 = a0 ^ a1 ^ np.uint64({_PARITY})",
        "x = (np.uint64(x0) + a0) & m",
        "y = (np.uint64(x1) + a1) & m",
    ]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            body.append("x = (x + y) & m")
            body.append(f"y = (((y << np.uint64({r})) | (y >> np.uint64({32 - r}))) & m) ^ x")
        body.append(f"x = (x + {ks[(i + 1) % 3]}) & m")
        body.append(f"y = (y + {ks[(i + 2) % 3]} + np.uint64({i + 1})) & m")
    body.append("return " + ("x", "y", "x ^ y")[word])
    return f"def tg_threefry{word}(k0, k1, x0, x1):\n" + "".join(f"    {b}\n" for b in body)


for _word in (0, 1, 2):
    mathlib._define(f"tg_threefry{_word}", _threefry_helper(_word))

threefry2x32 = primitive(
    "threefry2x32",
    impl=_threefry_impl,
    shape_rule=_threefry_rule,
    kind="elementwise",
    nondiff=True,
    vjps=(no_grad,) * 4,
    torch_name=None,
    saves=(),
    # a fused loop's scalar expression: the helper above, inlined (tracegrad.runtime.mathlib)
    codegen=lambda word: f"tg_threefry{word}({{0}}, {{1}}, {{2}}, {{3}})",
)

# ------------------------------------------------------------ special functions


def _float_impl(fn):
    """A SciPy ufunc on float operands (int/bool in float64), 0-d results as arrays."""

    def impl(x, **attrs):
        if type(x) is np.ndarray and x.dtype.kind in "biu":
            x = x.astype(np.float64)
        return np.asarray(fn(x, **attrs))

    return returns_array(impl)


def _scipy(name):
    import scipy.special

    return getattr(scipy.special, name)


def _special(name, impl, vjp, torch_name, attrs_rule=None, saves=(0,)):
    rule = elementwise_rule(name, float_only=True)
    return primitive(
        name,
        impl=_float_impl(impl),
        shape_rule=rule if attrs_rule is None else attrs_rule(rule),
        kind="other",
        vjps=(vjp,),
        torch_name=torch_name,
        saves=saves,
        codegen="numpy",
    )


_SQRT_PI_2 = math.sqrt(math.pi) / 2

# erfinv'(x) = sqrt(pi)/2 * exp(erfinv(x)^2); +-inf at |x| = 1 as in JAX and PyTorch
erfinv = _special(
    "erfinv",
    lambda x: _scipy("erfinv")(x),
    lambda g, out, x: T.mul(g, T.mul(_SQRT_PI_2, T.exp(T.mul(out, out)))),
    "ErfinvBackward0",
    saves=("out",),
)
gammaln = _special(
    "gammaln",
    lambda x: _scipy("gammaln")(x),
    lambda g, out, x: T.mul(g, digamma(x)),
    "LgammaBackward0",
)
digamma = _special(
    "digamma",
    lambda x: _scipy("psi")(x),
    lambda g, out, x: T.mul(g, polygamma(x, n=1)),
    "DigammaBackward0",
)


def _polygamma_rule(rule):
    def checked(x, n):
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise op_error("polygamma", [as_aval(x)], f"n must be an int >= 0, got {n!r}")
        return rule(x)

    return checked


# polygamma(x, n=k) is scipy.special.polygamma(k, x); its derivative is order k + 1
polygamma = _special(
    "polygamma",
    lambda x, n: _scipy("polygamma")(n, x).astype(np.result_type(x, np.float32)),
    lambda g, out, x, n: T.mul(g, polygamma(x, n=n + 1)),
    "PolygammaBackward0",
    attrs_rule=_polygamma_rule,
)

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

# log of the standard normal cdf, accurate in both tails (scipy.special.log_ndtr);
# d/dx = pdf(x) / cdf(x) = exp(-x^2/2 - log(2 pi)/2 - out)
log_ndtr = _special(
    "log_ndtr",
    lambda x: _scipy("log_ndtr")(x),
    lambda g, out, x: T.mul(g, T.exp(T.sub(T.sub(T.mul(-0.5, T.mul(x, x)), _LOG_SQRT_2PI), out))),
    "LogNdtrBackward0",
    saves=(0, "out"),
)
# the standard normal quantile (scipy.special.ndtri); d/dp = 1 / pdf(out)
ndtri = _special(
    "ndtri",
    lambda x: _scipy("ndtri")(x),
    lambda g, out, x: T.mul(g, T.exp(T.add(T.mul(0.5, T.mul(out, out)), _LOG_SQRT_2PI))),
    "NdtriBackward0",
    saves=("out",),
)


# ------------------------------------------- incomplete gamma and beta (the cdfs)
# Differentiable in x (their derivative there is the density); gammainc/gammaincc in a
# too (first order: P's series differentiated term by term, gammainc_grad_a below);
# a gradient of betainc with respect to a or b raises, never a silent zero.


def _no_shape_gradient(name: str, which: str):
    def rule(g, out, *operands, **attrs):
        raise NotImplementedError(
            f"{name}: the gradient with respect to {which} is not implemented (only with "
            f"respect to x){user_location_suffix()}"
        )

    return rule


def _gammainc_x(regularized_upper: bool):
    def rule(g, out, a, x):  # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)
        density = T.exp(T.sub(T.sub(T.mul(T.sub(a, 1.0), T.log(x)), x), gammaln(a)))
        return T.mul(g, T.neg(density) if regularized_upper else density)

    return rule


def _in_result_dtype(fn):
    """fn on float operands, its result in NumPy's promoted dtype (a Python float
    parameter keeps a float32 x float32, which SciPy's ufuncs would widen)."""

    def impl(*xs):
        dtype = np.result_type(*xs, np.float32)
        return np.asarray(fn(*(np.asarray(x, np.float64) for x in xs)), dtype=dtype)

    return impl


def _binary_special(name, impl, vjps, torch_name):
    return primitive(
        name,
        impl=_in_result_dtype(impl),
        shape_rule=elementwise_rule(name, float_only=True),
        kind="other",
        vjps=vjps,
        torch_name=torch_name,
        saves=(0, 1),
        codegen="numpy",
    )


def _gammainc_a(upper: bool):
    def rule(g, out, a, x):  # dP/da by its series (first order: gammainc_grad_a is nondiff)
        da = gammainc_grad_a(a, x)
        return T.mul(g, T.neg(da) if upper else da)

    return rule


gammainc = _binary_special(  # the regularized lower incomplete gamma P(a, x)
    "gammainc",
    lambda a, x: _scipy("gammainc")(a, x),
    (_gammainc_a(False), _gammainc_x(False)),
    "IgammaBackward0",
)
gammaincc = _binary_special(  # the regularized upper incomplete gamma Q(a, x) = 1 - P
    "gammaincc",
    lambda a, x: _scipy("gammaincc")(a, x),
    (_gammainc_a(True), _gammainc_x(True)),
    "IgammacBackward0",
)


def _betainc_x(g, out, a, b, x):  # d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)
    log_density = T.sub(
        T.add(T.mul(T.sub(a, 1.0), T.log(x)), T.mul(T.sub(b, 1.0), T.log1p(T.neg(x)))),
        T.sub(T.add(gammaln(a), gammaln(b)), gammaln(T.add(a, b))),
    )
    return T.mul(g, T.exp(log_density))


betainc = primitive(  # the regularized incomplete beta I_x(a, b)
    "betainc",
    impl=_in_result_dtype(lambda a, b, x: _scipy("betainc")(a, b, x)),
    shape_rule=elementwise_rule("betainc", float_only=True),
    kind="other",
    vjps=(
        _no_shape_gradient("betainc", "a"),
        _no_shape_gradient("betainc", "b"),
        _betainc_x,
    ),
    torch_name="BetaincBackward0",
    saves=(0, 1, 2),
    codegen="numpy",
)


# ------------------------------------------------------------- gamma variates
# JAX's `random_gamma`: Marsaglia and Tsang's rejection method, one key per element
# (jax/_src/random: _gamma_one), each element's loop replayed with NumPy over all
# elements at once (a mask per loop), so the draws are JAX's.


def _split_keys(k0, k1, n: int) -> list:
    """split(key, n) for arrays of keys: the n new keys' (word0, word1)."""
    return [threefry_block(k0, k1, np.uint32(0), np.uint32(i)) for i in range(n)]


def _unit_np(k0, k1, dtype):
    """uniform(key, ()) in [0, 1) for arrays of keys, as tracegrad.random._unit."""
    a, b = threefry_block(k0, k1, np.uint32(0), np.uint32(0))
    if dtype == np.float32:
        return (np.floor((a ^ b).astype(np.float64) * 2.0**-9) * 2.0**-23).astype(np.float32)
    return (a.astype(np.float64) * 2.0**20 + np.floor(b.astype(np.float64) * 2.0**-12)) * 2.0**-52


def _uniform_np(k0, k1, dtype, lo, hi):
    lo, hi = np.asarray(lo, dtype), np.asarray(hi, dtype)
    return np.maximum(lo, _unit_np(k0, k1, dtype) * (hi - lo) + lo)


def _normal_np(k0, k1, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform_np(k0, k1, dtype, lo, 1.0)
    return np.asarray(np.array(np.sqrt(2), dtype) * _scipy("erfinv")(u), dtype)


def _gamma_impl(k0, k1, alpha, log_space):
    alpha = np.asarray(alpha)
    dt = np.dtype(alpha.dtype)
    shape = np.broadcast_shapes(np.shape(k0), np.shape(k1), alpha.shape)
    k0, k1 = (np.broadcast_to(np.asarray(k, _U32), shape).ravel() for k in (k0, k1))
    a = np.broadcast_to(alpha, shape).ravel()
    c1, third = dt.type(1), dt.type(1.0 / 3.0)
    boost = a >= c1
    a_boosted = np.where(boost, a, a + c1)
    d = a_boosted - third
    c = third / np.sqrt(d)
    (key0, key1), (sub0, sub1) = _split_keys(k0, k1, 2)
    X, V, U = np.zeros_like(a), np.ones_like(a), np.full_like(a, 2)

    def rejected(X, V, U):
        with np.errstate(divide="ignore", invalid="ignore"):
            first = U >= c1 - dt.type(0.0331) * (X * X)
            second = np.log(U) >= X * dt.type(0.5) + d * (c1 - V + np.log(V))
        return first & second

    active = rejected(X, V, U)
    while active.any():
        i = np.flatnonzero(active)
        (n0, n1), (x0, x1), (u0, u1) = _split_keys(key0[i], key1[i], 3)
        x, v = np.zeros(len(i), dt), np.full(len(i), -c1, dt)
        inner = v <= 0
        while inner.any():
            j = np.flatnonzero(inner)
            (x0[j], x1[j]), (s0, s1) = _split_keys(x0[j], x1[j], 2)
            x[j] = _normal_np(s0, s1, dt)
            v[j] = c1 + x[j] * c[i][j]
            inner = v <= 0
        key0[i], key1[i] = n0, n1
        X[i], V[i], U[i] = x * x, v * v * v, _uniform_np(u0, u1, dt, 0.0, 1.0)
        active = rejected(X, V, U)
    with np.errstate(divide="ignore"):
        if log_space:
            log_samples = np.log1p(-_uniform_np(sub0, sub1, dt, 0.0, 1.0))  # -exponential
            log_boost = np.where(boost | (log_samples == 0), dt.type(0), log_samples * (c1 / a))
            out = np.log(d) + np.log(V) + log_boost
        else:
            samples = c1 - _uniform_np(sub0, sub1, dt, 0.0, 1.0)
            out = d * V * np.where(boost, c1, samples ** (c1 / a))
    return np.asarray(out, dt).reshape(shape)


def _gamma_rule(k0, k1, alpha, log_space):
    alpha = as_aval(alpha)
    if not np.issubdtype(alpha.dtype, np.floating):
        raise op_error("random_gamma", [alpha], "alpha must be floating-point", cls=DTypeError)
    return Aval(broadcast_shapes("random_gamma", k0, k1, alpha), alpha.dtype)


def _gammainc_da(a, x, max_terms: int = 2000):
    """d/da of the regularized lower incomplete gamma P(a, x), by its series
    P = sum_n x^(a+n) e^-x / Gamma(a+n+1) differentiated term by term. Where the series
    has not converged after `max_terms` terms (x far above a), central differences of
    SciPy's gammainc in a (about 1e-9 relative) take its place."""
    gammaln_, digamma_ = _scipy("gammaln"), _scipy("digamma")
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.zeros(a.shape)
    done = np.zeros(a.shape, bool)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        log_x = np.log(x)
        for n in range(max_terms):
            an = a + (n + 1)
            w = np.exp((an - 1) * log_x - x - gammaln_(an))
            out += np.where(w > 0, w * (log_x - digamma_(an)), 0.0)
            done |= (an > x) & (w <= 1e-17 * np.maximum(np.abs(out), 1e-300))
            if n > 20 and done.all():
                break
    if not done.all():
        h = 1e-5 * np.maximum(a[~done], 1.0)
        up = _scipy("gammainc")(a[~done] + h, x[~done])
        down = _scipy("gammainc")(a[~done] - h, x[~done])
        out[~done] = (up - down) / (2 * h)
    return out


gammainc_grad_a = primitive(  # dP(a, x)/da (first order only)
    "gammainc_grad_a",
    impl=_in_result_dtype(lambda a, x: _gammainc_da(a, x)),
    shape_rule=elementwise_rule("gammainc_grad_a", float_only=True),
    kind="other",
    nondiff=True,
    vjps=(no_grad, no_grad),
    torch_name=None,
    saves=(),
    codegen="numpy",
)


def _gamma_grad_impl(alpha, sample):
    """dz/dalpha of a Gamma(alpha) variate z, by implicit reparameterization (as JAX's
    random_gamma_grad): -(dP/dalpha)(alpha, z) / density(z)."""
    dt = np.result_type(alpha, sample)
    a, z = np.asarray(alpha, np.float64), np.asarray(sample, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_density = (a - 1) * np.log(z) - z - _scipy("gammaln")(a)
        out = -_gammainc_da(a, z) / np.exp(log_density)
    return np.asarray(out, dt)


random_gamma_grad = primitive(  # d(sample)/d(alpha) of gamma variates (first order only)
    "random_gamma_grad",
    impl=_gamma_grad_impl,
    shape_rule=elementwise_rule("random_gamma_grad", float_only=True),
    kind="other",
    nondiff=True,
    vjps=(no_grad, no_grad),
    torch_name=None,
    saves=(),
    codegen="numpy",
)


def _gamma_vjp_alpha(g, out, k0, k1, alpha, log_space):
    if not log_space:
        return T.mul(g, random_gamma_grad(alpha, out))
    # d log z = dz / z; an exp(log z) that rounds to 0 is the smallest float, as JAX
    z = T.exp(out)
    tiny = float(np.finfo(aval_of(out).dtype).tiny)
    z = T.where(T.eq(z, 0), tiny, z)
    return T.mul(g, T.div(random_gamma_grad(alpha, z), z))


random_gamma = primitive(  # Gamma(alpha) variates (log_space: their logs), one key per element
    "random_gamma",
    impl=_gamma_impl,
    shape_rule=_gamma_rule,
    kind="other",
    vjps=(no_grad, no_grad, _gamma_vjp_alpha),
    torch_name="RandomGammaBackward0",
    saves=(2, "out"),
    codegen="numpy",
)
