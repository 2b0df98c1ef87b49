"""Random numbers with JAX's key semantics: `tracegrad.random` is spelled as `jax.random`.

A key is a uint32 array of shape (2,) (JAX's raw `PRNGKey`); every draw is a
pure function of its key, computed by the counter-based Threefry-2x32 generator
(the `threefry2x32` primitive of the rule table, tracegrad/ops/special.py: NumPy
in eager mode and on the interpreter, a scalar helper inlined into the fused
loop of Numba kernels). So the same code runs on NumPy arrays, under
`tg.compile`/`tg.jit`, under `tg.vmap` over a batch of keys from
`split(key, n)`, and under `tg.grad`, where draws are constants:
`normal(key) * sigma + mu` differentiates through mu and sigma.

The bits follow JAX's default (`jax_threefry_partitionable`, the default since
JAX 0.5): `PRNGKey`, `split`, `fold_in`, `bits`, `randint` (int32 and int64),
`permutation`, `choice`, `rademacher` and `geometric` give JAX's very integers,
`uniform` on [0, 1), `bernoulli`, `categorical` and `triangular` its very
values (tests/random/test_random_keys.py); `normal`, `truncated_normal`,
`multivariate_normal`, `gumbel`, `exponential`, `laplace`, `logistic`,
`cauchy`, `lognormal`, `pareto`, `weibull_min`, `maxwell`, `rayleigh`,
`orthogonal`, the gamma family (`gamma`, `loggamma`, `beta`, `dirichlet`,
`chisquare`, `t`: JAX's rejection loop, the same acceptances) and `uniform`
with bounds agree to a few ulp (SciPy's erfinv and NumPy's log where XLA has
its own polynomials, and no FMA). Gamma variates differentiate in their shape
by implicit reparameterization, as JAX's. Not here yet: `poisson`, `binomial`,
typed key arrays (`key` returns the raw uint32 key).

Floating-point draws default to float64 (tracegrad's NumPy default; JAX's
default is float32 unless `jax_enable_x64` is set): pass `dtype=np.float32` for
JAX's default values.

    >>> import numpy as np, tracegrad as tg
    >>> key = tg.random.PRNGKey(0)
    >>> k1, k2 = tg.random.split(key)
    >>> tg.random.normal(k1, (3,), dtype=np.float32).round(4)
    array([ 1.004 , -0.9063, -0.7482], dtype=float32)
    >>> tg.vmap(lambda k: tg.random.uniform(k))(tg.random.split(key, 4)).shape
    (4,)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.ops import numpy_names as N
from tracegrad.ops import special as S
from tracegrad.ops import table as T
from tracegrad.ops.core import ArgumentError, DTypeError, ShapeError, user_location_suffix

__all__ = [
    "bernoulli",
    "beta",
    "bits",
    "categorical",
    "cauchy",
    "chisquare",
    "choice",
    "dirichlet",
    "exponential",
    "fold_in",
    "gamma",
    "geometric",
    "gumbel",
    "key",
    "key_data",
    "laplace",
    "loggamma",
    "logistic",
    "lognormal",
    "maxwell",
    "multivariate_normal",
    "normal",
    "orthogonal",
    "pareto",
    "permutation",
    "PRNGKey",
    "rademacher",
    "randint",
    "rayleigh",
    "shuffle",
    "split",
    "t",
    "triangular",
    "truncated_normal",
    "uniform",
    "weibull_min",
    "wrap_key_data",
]

Array = Any
_U32 = np.dtype(np.uint32)
_DEFAULT_FLOAT = np.dtype(np.float64)


# ------------------------------------------------------------------ keys


def _dtype_of(v) -> np.dtype:
    dtype = getattr(v, "dtype", None)  # (tracers and tensors have one; never np.asarray them)
    return np.dtype(dtype if dtype is not None else np.asarray(v).dtype)


def PRNGKey(seed: int | Array) -> Array:
    """A key from an integer seed: uint32 [seed >> 32, seed & 0xFFFFFFFF], as JAX's.

    >>> import tracegrad as tg
    >>> tg.random.PRNGKey(42)
    array([ 0, 42], dtype=uint32)
    """
    if isinstance(seed, (int, np.integer)):
        s = int(seed)
        return np.array([(s >> 32) & 0xFFFFFFFF, s & 0xFFFFFFFF], dtype=_U32)
    dtype = _dtype_of(seed)
    if np.shape(seed) != () or dtype.kind not in "iub":
        raise DTypeError(
            f"PRNGKey: the seed must be an integer scalar, got {dtype}{list(np.shape(seed))}"
            + user_location_suffix()
        )
    lo = T.astype(seed, dtype="uint32")
    if dtype.itemsize <= 4:  # JAX: a 32-bit seed shifted right by 32 is 0
        hi = T.full_like(lo, value=0, dtype="uint32")
    else:
        hi = T.astype(A.floor_divide(seed, 2**32), dtype="uint32")
    return A.stack([hi, lo])


def key(seed: int | Array) -> Array:
    """`jax.random.key(seed)`: here the same raw uint32[2] key as `PRNGKey`
    (tracegrad has no typed key arrays; `key_data` and `wrap_key_data` are identities)."""
    return PRNGKey(seed)


def key_data(keys: Array) -> Array:
    """The uint32 data of a key (the key itself: keys are raw uint32 arrays here)."""
    return keys


def wrap_key_data(data: Array, *, impl: str | None = None) -> Array:
    """A key from its uint32 data (the data itself)."""
    return data


def _check_key(name: str, k) -> tuple:
    shape = tuple(np.shape(k))
    dtype = _dtype_of(k)
    if shape != (2,) or dtype != _U32:
        hint = (
            "; for a batch of keys from split(key, n), map over it with tg.vmap"
            if len(shape) == 2 and shape[-1] == 2
            else ""
        )
        raise ArgumentError(
            f"{name}: expected a key, a uint32 array of shape (2,) from PRNGKey or split, "
            f"got {dtype}{list(shape)}{hint}" + user_location_suffix()
        )
    return k[0], k[1]


def _shape(shape) -> tuple:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _counters(shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """JAX's iota_2x32_shape: the 64-bit index of each element, as (high, low) words."""
    n = int(np.prod(shape, dtype=np.int64))
    if n >= 2**32:
        raise ShapeError(f"random: {n} draws exceed 2**32 per key" + user_location_suffix())
    return np.zeros(shape, _U32), np.arange(n, dtype=_U32).reshape(shape)


def _block(k0, k1, x0, x1, word: int):
    return S.threefry2x32(k0, k1, x0, x1, word=word)


def split(key: Array, num: int | Sequence[int] = 2) -> Array:
    """`num` new keys, shape (num, 2) (or `(*num, 2)` for a tuple), as jax.random.split.

    >>> import tracegrad as tg
    >>> tg.random.split(tg.random.PRNGKey(0))
    array([[1797259609, 2579123966],
           [ 928981903, 3453687069]], dtype=uint32)
    """
    k0, k1 = _check_key("split", key)
    hi, lo = _counters(_shape(num))
    return A.stack([_block(k0, k1, hi, lo, 0), _block(k0, k1, hi, lo, 1)], axis=-1)


def fold_in(key: Array, data: int | Array) -> Array:
    """A new key from `key` and an integer (its low 32 bits), as jax.random.fold_in.

    >>> import tracegrad as tg
    >>> tg.random.fold_in(tg.random.PRNGKey(0), 1)
    array([ 928981903, 3453687069], dtype=uint32)
    """
    k0, k1 = _check_key("fold_in", key)
    if isinstance(data, (int, np.integer)):
        lo = np.uint32(int(data) & 0xFFFFFFFF)
    else:
        if np.shape(data) != ():
            raise ShapeError("fold_in: data must be a scalar" + user_location_suffix())
        lo = T.astype(data, dtype="uint32")
    zero = np.uint32(0)
    return A.stack([_block(k0, k1, zero, lo, 0), _block(k0, k1, zero, lo, 1)])


def bits(key: Array, shape: int | Sequence[int] = (), dtype=np.uint32) -> Array:
    """Random uint32 bits of `shape` (JAX's `random.bits` for 32-bit dtypes)."""
    if np.dtype(dtype) != _U32:
        raise DTypeError(f"bits: only uint32 is supported, got {np.dtype(dtype)}")
    k0, k1 = _check_key("bits", key)
    hi, lo = _counters(_shape(shape))
    return _block(k0, k1, hi, lo, 2)


# ------------------------------------------------------------------ samplers


def _float_dtype(name: str, dtype) -> np.dtype:
    dt = _DEFAULT_FLOAT if dtype is None or dtype is float else np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise DTypeError(f"{name}: dtype must be float32 or float64, got {dt}")
    return dt


def _unit(key, shape: tuple, dtype: np.dtype):
    """Floats in [0, 1) from the mantissa bits, exactly JAX's: for float32,
    (bits >> 9) * 2**-23; for float64, (64 bits >> 12) * 2**-52 (computed in float64,
    where both are exact)."""
    k0, k1 = _check_key("uniform", key)
    hi, lo = _counters(shape)
    if dtype == np.float32:
        b = T.astype(_block(k0, k1, hi, lo, 2), dtype="float64")
        return T.astype(T.mul(T.floor(T.mul(b, 2.0**-9)), 2.0**-23), dtype="float32")
    w0 = T.astype(_block(k0, k1, hi, lo, 0), dtype="float64")
    w1 = T.astype(_block(k0, k1, hi, lo, 1), dtype="float64")
    return T.mul(T.add(T.mul(w0, 2.0**20), T.floor(T.mul(w1, 2.0**-12))), 2.0**-52)


def _in_dtype(v, dtype: np.dtype):
    """A bound as an array of `dtype` (traced bounds are cast, as JAX's)."""
    if isinstance(v, (int, float, np.generic, np.ndarray)):
        return np.asarray(v, dtype=dtype)
    return T.astype(v, dtype=dtype.name) if np.dtype(v.dtype) != dtype else v


def uniform(
    key: Array,
    shape: int | Sequence[int] = (),
    dtype=None,
    minval: float | Array = 0.0,
    maxval: float | Array = 1.0,
) -> Array:
    """Uniform floats in [minval, maxval), as jax.random.uniform.

    >>> import numpy as np, tracegrad as tg
    >>> tg.random.uniform(tg.random.PRNGKey(0), (2,), np.float32)
    array([0.947667 , 0.9785799], dtype=float32)
    """
    dt = _float_dtype("uniform", dtype)
    shape = _shape(shape)
    lo, hi = _in_dtype(minval, dt), _in_dtype(maxval, dt)
    floats = _unit(key, shape, dt)
    return A.maximum(lo, A.add(A.multiply(floats, A.subtract(hi, lo)), lo))


def normal(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Standard normal floats, as jax.random.normal: sqrt(2) * erfinv(u) for u uniform
    in (-1, 1)."""
    dt = _float_dtype("normal", dtype)
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    u = uniform(key, shape, dt, lo, 1.0)
    return T.mul(np.array(np.sqrt(2), dt), S.erfinv(u))


def truncated_normal(
    key: Array, lower: float | Array, upper: float | Array, shape=None, dtype=None
) -> Array:
    """Normal floats truncated to (lower, upper), as jax.random.truncated_normal."""
    dt = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower), np.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dt)
    lower, upper = _in_dtype(lower, dt), _in_dtype(upper, dt)
    a = N.erf(A.divide(lower, sqrt2))
    b = N.erf(A.divide(upper, sqrt2))
    out = T.mul(sqrt2, S.erfinv(uniform(key, shape, dt, a, b)))
    if isinstance(lower, np.ndarray) and isinstance(upper, np.ndarray):
        lo = np.nextafter(lower, np.array(np.inf, dt))
        hi = np.nextafter(upper, np.array(-np.inf, dt))
        return A.minimum(A.maximum(out, lo), hi)
    return A.minimum(A.maximum(out, lower), upper)  # traced bounds: the closed interval


def bernoulli(key: Array, p: float | Array = 0.5, shape=None) -> Array:
    """Bools that are True with probability p, as jax.random.bernoulli."""
    dt = _dtype_of(p) if hasattr(p, "dtype") else _DEFAULT_FLOAT
    dt = dt if dt.kind == "f" else _DEFAULT_FLOAT
    shape = tuple(np.shape(p)) if shape is None else _shape(shape)
    return A.less(uniform(key, shape, dt), _in_dtype(p, dt))


def exponential(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Exponential(1) floats, as jax.random.exponential: -log1p(-u)."""
    dt = _float_dtype("exponential", dtype)
    return A.negative(A.log1p(A.negative(uniform(key, shape, dt))))


def gumbel(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Standard Gumbel floats, as jax.random.gumbel (its default mode, "low")."""
    dt = _float_dtype("gumbel", dtype)
    u = uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)
    return A.negative(A.log(A.negative(A.log(u))))


def categorical(key: Array, logits: Array, axis: int = -1, shape=None) -> Array:
    """Indices drawn with probabilities softmax(logits) along `axis` (the Gumbel-max
    trick, as jax.random.categorical with replace=True)."""
    lshape = tuple(np.shape(logits))
    dt = _dtype_of(logits)
    dt = dt if dt.kind == "f" else _DEFAULT_FLOAT
    ax = axis % len(lshape)
    batch = lshape[:ax] + lshape[ax + 1 :]
    shape = batch if shape is None else _shape(shape)
    if shape[len(shape) - len(batch) :] != batch:
        raise ShapeError(
            f"categorical: shape {shape} must end with the logits' batch shape {batch}"
            + user_location_suffix()
        )
    prefix = shape[: len(shape) - len(batch)]
    full = list(shape[len(shape) - len(batch) :])
    full.insert(ax, lshape[ax])
    noise = gumbel(key, (*prefix, *full), dt)
    expanded = A.reshape(logits, (1,) * len(prefix) + lshape) if prefix else logits
    return A.argmax(A.add(noise, expanded), axis=ax + len(prefix) if axis >= 0 else axis)


def _random_bits(key, shape: tuple, nbits: int):
    """JAX's `_random_bits` for 32 or 64 bits: word0 ^ word1, or word0 << 32 | word1."""
    k0, k1 = _check_key("randint", key)
    hi, lo = _counters(shape)
    if nbits == 32:
        return _block(k0, k1, hi, lo, 2)
    w0 = T.astype(_block(k0, k1, hi, lo, 0), dtype="uint64")
    w1 = T.astype(_block(k0, k1, hi, lo, 1), dtype="uint64")
    return A.add(A.multiply(w0, np.uint64(2**32)), w1)  # (exact: no carry into bit 64)


def randint(
    key: Array, shape: int | Sequence[int], minval: int, maxval: int, dtype=np.int64
) -> Array:
    """Integers in [minval, maxval) for static int bounds, as jax.random.randint: JAX's
    algorithm (two draws of the dtype's width combined modulo the span, in wrapping
    unsigned arithmetic), so int32 and int64 draws are JAX's (int64: with x64 on).

    >>> import tracegrad as tg
    >>> tg.random.randint(tg.random.PRNGKey(0), (4,), 0, 10)
    array([5, 1, 5, 7])
    """
    shape = _shape(shape)
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise DTypeError(
            f"randint: dtype must be int32 or int64, got {dtype}" + user_location_suffix()
        )
    if not all(isinstance(v, (int, np.integer)) for v in (minval, maxval)):
        raise ArgumentError("randint: minval and maxval must be ints" + user_location_suffix())
    nbits = dtype.itemsize * 8
    info = np.iinfo(dtype)
    lo = min(max(int(minval), info.min), info.max)
    hi = min(max(int(maxval), info.min), info.max)
    span = 1 if hi <= lo else (hi - lo) % 2**nbits
    if int(maxval) > info.max and hi > lo:  # JAX: one more when maxval is past the range
        span = (span + 1) % 2**nbits
    unsigned = np.dtype(f"uint{nbits}")
    k = split(key)
    higher, lower = _random_bits(k[0], shape, nbits), _random_bits(k[1], shape, nbits)
    if span == 0:  # the whole range: XLA's x % 0 is x, so the offset is `lower`
        offset = lower
    else:
        mult = (2 ** (nbits // 2) % span) ** 2 % 2**nbits % span  # squared in wrapping uint
        span_u, mult_u = np.array(span, unsigned), np.array(mult, unsigned)
        offset = A.add(
            A.multiply(A.remainder(higher, span_u), mult_u), A.remainder(lower, span_u)
        )  # unsigned: wraps as JAX's
        offset = A.remainder(offset, span_u)
    return A.add(T.astype(offset, dtype=dtype.name), np.array(lo, dtype))


def choice(
    key: Array,
    a: int | Array,
    shape: Sequence[int] = (),
    replace: bool = True,
    p: Array | None = None,
    axis: int = 0,
) -> Array:
    """Entries of `a` (or of arange(a)) drawn along `axis`, with or without replacement,
    uniformly or with probabilities `p`, as jax.random.choice."""
    shape = _shape(shape)
    scalar = isinstance(a, (int, np.integer))
    n = int(a) if scalar else int(np.shape(a)[axis])
    draws = int(np.prod(shape))
    if not replace and draws > n:
        raise ShapeError(
            f"choice: cannot take {draws} draws from {n} without replacement"
            + user_location_suffix()
        )
    if p is None and replace:
        ind = randint(key, shape, 0, n)
    elif p is None:
        perm = permutation(key, n if scalar else a, axis)
        index = (slice(None),) * (0 if scalar else axis) + (slice(draws),)
        out = perm[index]
        return A.reshape(out, shape) if scalar else _place(out, a, axis, shape)
    else:
        probs = p if _dtype_of(p).kind == "f" else T.astype(p, dtype="float64")
        if replace:
            cuml = A.cumsum(probs)
            r = A.multiply(cuml[-1], A.subtract(1.0, uniform(key, shape, _dtype_of(probs))))
            # searchsorted(cuml, r): how many cumulative sums lie below r
            below = A.less(A.reshape(cuml, (1,) * len(shape) + (n,)), A.expand_dims(r, -1))
            ind = A.sum(T.astype(below, dtype="int64"), axis=-1)
        else:  # the Gumbel top-k trick, as JAX
            g = A.add(gumbel(key, (n,), _dtype_of(probs)), A.log(probs))
            ind = A.argsort(A.negative(g), kind="stable")[:draws]
    if scalar:
        return A.reshape(ind, shape)
    return _place(N.take(a, A.reshape(ind, (-1,)), axis=axis), a, axis, shape)


def _place(taken, a, axis: int, shape: tuple):
    a_shape = tuple(np.shape(a))
    return A.reshape(taken, a_shape[:axis] + tuple(shape) + a_shape[axis + 1 :])


def multivariate_normal(
    key: Array, mean: Array, cov: Array, shape=None, dtype=None, method: str = "cholesky"
) -> Array:
    """Draws from N(mean, cov), as jax.random.multivariate_normal: mean + L z with L
    cov's Cholesky factor (method="cholesky", JAX's default)."""
    if method != "cholesky":
        raise ArgumentError(f"multivariate_normal: method {method!r} (only 'cholesky')")
    dt = _float_dtype("multivariate_normal", dtype)
    m_shape, c_shape = tuple(np.shape(mean)), tuple(np.shape(cov))
    if shape is None:
        shape = np.broadcast_shapes(m_shape[:-1], c_shape[:-2])
    z = normal(key, tuple(shape) + m_shape[-1:], dt)
    factor = A.linalg.cholesky(cov)
    return A.add(mean, A.einsum("...ij,...j->...i", factor, z))


def rademacher(key: Array, shape: int | Sequence[int] = (), dtype=np.int64) -> Array:
    """-1 or +1 with equal probability, as jax.random.rademacher."""
    b = T.astype(bernoulli(key, 0.5, _shape(shape)), dtype=np.dtype(dtype).name)
    return T.astype(A.subtract(A.multiply(2, b), 1), dtype=np.dtype(dtype).name)


def laplace(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Laplace(0, 1) floats, as jax.random.laplace."""
    dt = _float_dtype("laplace", dtype)
    u = uniform(key, shape, dt, -1.0 + np.finfo(dt).epsneg, 1.0)
    return A.multiply(A.sign(u), A.log1p(A.negative(A.abs(u))))


def logistic(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Standard logistic floats, as jax.random.logistic."""
    dt = _float_dtype("logistic", dtype)
    x = uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)
    return A.subtract(A.log(x), A.log1p(A.negative(x)))


def cauchy(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """Standard Cauchy floats, as jax.random.cauchy."""
    dt = _float_dtype("cauchy", dtype)
    u = uniform(key, shape, dt, np.finfo(dt).eps, 1.0)
    return A.tan(A.multiply(np.array(np.pi, dt), A.subtract(u, np.array(0.5, dt))))


def _param_shape(shape, *params) -> tuple:
    return np.broadcast_shapes(*(np.shape(p) for p in params)) if shape is None else _shape(shape)


def lognormal(key: Array, sigma: float | Array = 1.0, shape=None, dtype=None) -> Array:
    """exp(sigma * z) for standard normal z, as jax.random.lognormal."""
    dt = _float_dtype("lognormal", dtype)
    sigma = _in_dtype(sigma, dt)
    return A.exp(A.multiply(normal(key, _param_shape(shape, sigma), dt), sigma))


def pareto(key: Array, b: float | Array, shape=None, dtype=None) -> Array:
    """Pareto(b) floats, exp(e / b) for exponential e, as jax.random.pareto."""
    dt = _float_dtype("pareto", dtype)
    b = _in_dtype(b, dt)
    return A.exp(A.divide(exponential(key, _param_shape(shape, b), dt), b))


def weibull_min(
    key: Array, scale: float | Array, concentration: float | Array, shape=(), dtype=None
) -> Array:
    """Weibull floats by the inverse cdf, as jax.random.weibull_min."""
    dt = _float_dtype("weibull_min", dtype)
    scale, concentration = _in_dtype(scale, dt), _in_dtype(concentration, dt)
    u = uniform(key, shape, dt)
    base = A.negative(A.log1p(A.negative(u)))
    return A.multiply(A.power(base, A.divide(np.array(1, dt), concentration)), scale)


def maxwell(key: Array, shape: int | Sequence[int] = (), dtype=None) -> Array:
    """The norm of three standard normals, as jax.random.maxwell."""
    dt = _float_dtype("maxwell", dtype)
    z = normal(key, _shape(shape) + (3,), dt)
    return A.sqrt(A.sum(A.multiply(z, z), axis=-1))


def rayleigh(key: Array, scale: float | Array, shape=None, dtype=None) -> Array:
    """scale * sqrt(-2 log u), as jax.random.rayleigh."""
    dt = _float_dtype("rayleigh", dtype)
    scale = _in_dtype(scale, dt)
    u = uniform(key, _param_shape(shape, scale), dt)
    return A.multiply(scale, A.sqrt(A.multiply(A.log(u), -2.0)))


def geometric(key: Array, p: float | Array, shape=None, dtype=np.int64) -> Array:
    """The number of Bernoulli(p) trials to the first success, as jax.random.geometric."""
    dt = _dtype_of(p) if hasattr(p, "dtype") and _dtype_of(p).kind == "f" else _DEFAULT_FLOAT
    p = _in_dtype(p, dt)
    u = uniform(key, _param_shape(shape, p), dt)
    u = A.where(A.equal(u, 0), np.array(1, dt), u)
    g = A.add(A.floor(A.divide(A.log(u), A.log1p(A.negative(p)))), 1)
    return T.astype(g, dtype=np.dtype(dtype).name)


def triangular(key: Array, left, mode, right, shape=None, dtype=None) -> Array:
    """Triangular(left, mode, right) floats by the inverse cdf, as jax.random.triangular."""
    dt = _float_dtype("triangular", dtype)
    shape = _param_shape(shape, left, mode, right)
    left, mode, right = (A.broadcast_to(_in_dtype(v, dt), shape) for v in (left, mode, right))
    width = A.subtract(right, left)
    fc = A.divide(A.subtract(mode, left), width)
    u = uniform(key, shape, dt)
    out1 = A.add(left, A.sqrt(A.multiply(A.multiply(u, width), A.subtract(mode, left))))
    out2 = A.subtract(
        right, A.sqrt(A.multiply(A.multiply(A.subtract(1.0, u), width), A.subtract(right, mode)))
    )
    return A.where(A.less(u, fc), out1, out2)


def orthogonal(key: Array, n: int, shape: Sequence[int] = (), dtype=None, m: int | None = None):
    """Haar-random orthogonal (n, m) matrices: the signed Q of a normal matrix's QR, as
    jax.random.orthogonal."""
    dt = _float_dtype("orthogonal", dtype)
    m = n if m is None else int(m)
    z = normal(key, (*_shape(shape), max(n, m), min(n, m)), dt)
    q, r = A.linalg.qr(z)
    d = A.diagonal(r, axis1=-2, axis2=-1)
    x = A.multiply(q, A.expand_dims(A.sign(d), -2))
    return A.swapaxes(x, -1, -2) if n < m else x


def _gamma(key, a, shape, dtype, log_space: bool):
    dt = _float_dtype("gamma", dtype)
    shape = tuple(np.shape(a)) if shape is None else _shape(shape)
    a = A.broadcast_to(_in_dtype(a, dt), shape)
    n = int(np.prod(shape, dtype=np.int64))
    keys = split(key, n)  # one key per element, as JAX's random_gamma
    k0, k1 = A.reshape(keys[:, 0], shape), A.reshape(keys[:, 1], shape)
    return S.random_gamma(k0, k1, a, log_space=log_space)


def gamma(key: Array, a: float | Array, shape=None, dtype=None) -> Array:
    """Gamma(a, 1) floats, as jax.random.gamma (Marsaglia-Tsang, one key per element;
    differentiable in a by implicit reparameterization)."""
    return _gamma(key, a, shape, dtype, log_space=False)


def loggamma(key: Array, a: float | Array, shape=None, dtype=None) -> Array:
    """log of Gamma(a, 1) floats, accurate for small a, as jax.random.loggamma."""
    return _gamma(key, a, shape, dtype, log_space=True)


def beta(key: Array, a: float | Array, b: float | Array, shape=None, dtype=None) -> Array:
    """Beta(a, b) floats from two log-gamma draws, as jax.random.beta."""
    dt = _float_dtype("beta", dtype)
    shape = _param_shape(shape, a, b)
    keys = split(key)
    log_a = loggamma(keys[0], A.broadcast_to(_in_dtype(a, dt), shape), shape, dt)
    log_b = loggamma(keys[1], A.broadcast_to(_in_dtype(b, dt), shape), shape, dt)
    log_max = A.maximum(log_a, log_b)
    ga, gb = A.exp(A.subtract(log_a, log_max)), A.exp(A.subtract(log_b, log_max))
    return A.divide(ga, A.add(ga, gb))


def dirichlet(key: Array, alpha: Array, shape=None, dtype=None) -> Array:
    """Dirichlet(alpha) vectors (last axis), the softmax of log-gamma draws, as
    jax.random.dirichlet."""
    dt = _float_dtype("dirichlet", dtype)
    a_shape = tuple(np.shape(alpha))
    if len(a_shape) < 1:
        raise ShapeError("dirichlet: alpha must have at least one axis" + user_location_suffix())
    shape = a_shape[:-1] if shape is None else _shape(shape)
    logs = loggamma(key, _in_dtype(alpha, dt), shape + a_shape[-1:], dt)
    e = A.exp(A.subtract(logs, A.max(logs, axis=-1, keepdims=True)))
    return A.divide(e, A.sum(e, axis=-1, keepdims=True))


def chisquare(key: Array, df: float | Array, shape=None, dtype=None) -> Array:
    """Chi-square(df) floats, 2 exp(loggamma(df / 2)), as jax.random.chisquare."""
    dt = _float_dtype("chisquare", dtype)
    half = A.divide(_in_dtype(df, dt), np.array(2, dt))
    shape = tuple(np.shape(df)) if shape is None else _shape(shape)
    return A.multiply(A.exp(loggamma(key, half, shape, dt)), np.array(2, dt))


def t(key: Array, df: float | Array, shape=None, dtype=None) -> Array:
    """Student's t(df) floats, z sqrt(df / 2 / g) for g ~ Gamma(df / 2), as jax.random.t."""
    dt = _float_dtype("t", dtype)
    shape = tuple(np.shape(df)) if shape is None else _shape(shape)
    keys = split(key)
    z = normal(keys[0], shape, dt)
    half = A.divide(_in_dtype(df, dt), np.array(2, dt))
    g = gamma(keys[1], half, shape, dt)
    return A.multiply(z, A.sqrt(A.divide(half, g)))


def shuffle(key: Array, x: Array, axis: int = 0) -> Array:
    """x's entries along `axis` in random order (JAX's sort-based `_shuffle`)."""
    x_shape = tuple(np.shape(x))
    size = int(np.prod(x_shape))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key)
        key, sub = keys[0], keys[1]
        order = A.argsort(bits(sub, x_shape), axis=axis, kind="stable")
        x = A.take_along_axis(x, order, axis=axis)
    return x


def permutation(key: Array, x: int | Array, axis: int = 0, independent: bool = False) -> Array:
    """A random permutation of arange(x) (int x) or of x along `axis`, as
    jax.random.permutation."""
    if isinstance(x, (int, np.integer)):
        return shuffle(key, np.arange(int(x)), 0)
    if independent or len(np.shape(x)) == 1:
        return shuffle(key, x, axis)
    order = shuffle(key, np.arange(np.shape(x)[axis]), 0)
    return N.take(x, order, axis=axis)
