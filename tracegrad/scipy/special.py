"""`scipy.special`'s functions, traceable and differentiable, as `jax.scipy.special`.

gammaln, digamma, polygamma, erfinv, log_ndtr and ndtri are rule-table primitives
(tracegrad/ops/special.py, SciPy's implementation, derivatives in tracegrad ops); the
others are composites of tracegrad ops. Integer operands compute in float64.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.scipy.special import gammaln, logsumexp
    >>> float(gammaln(5.0)), float(tg.grad(gammaln)(1.0))  # log 4!, digamma(1) = -gamma
    (3.1780538303479458, -0.5772156649015329)
    >>> logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0]), return_sign=True)
    (array(1.54132485), array(-1.))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.ops import numpy_names as N
from tracegrad.ops import special as S
from tracegrad.ops.core import aval_of

__all__ = [
    "betainc",
    "betaln",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "gammainc",
    "gammaincc",
    "gammaln",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "softmax",
    "xlog1py",
    "xlogy",
]

Array = Any


def _float(x):
    """x as a floating-point value: Python numbers and int/bool arrays in float64."""
    if not hasattr(x, "dtype"):
        return np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, np.float64))
    if aval_of(x).dtype.kind in "biu":  # (eager tensors' dtypes are not NumPy's)
        return A.astype(x, np.float64)
    return x


def gammaln(x: Array) -> Array:
    """log|Gamma(x)|; its derivative is digamma(x)."""
    return S.gammaln(_float(x))


def digamma(x: Array) -> Array:
    """The digamma function psi(x) = d/dx log Gamma(x); its derivative is polygamma(1, x)."""
    return S.digamma(_float(x))


psi = digamma


def polygamma(n: int, x: Array) -> Array:
    """The n-th derivative of digamma (n a static int >= 0), as scipy.special.polygamma."""
    return S.polygamma(_float(x), n=int(n))


def gammainc(a: Array, x: Array) -> Array:
    """The regularized lower incomplete gamma function P(a, x) (differentiable in x)."""
    return S.gammainc(_float(a), _float(x))


def gammaincc(a: Array, x: Array) -> Array:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return S.gammaincc(_float(a), _float(x))


def betainc(a: Array, b: Array, x: Array) -> Array:
    """The regularized incomplete beta function I_x(a, b) (differentiable in x)."""
    return S.betainc(_float(a), _float(b), _float(x))


def erf(x: Array) -> Array:
    """The error function."""
    return N.erf(_float(x))


def erfc(x: Array) -> Array:
    """1 - erf(x), accurate where erf(x) is near 1: 2 * ndtr(-x * sqrt(2))."""
    return A.multiply(2.0, ndtr(A.multiply(_float(x), -math.sqrt(2.0))))


def erfinv(x: Array) -> Array:
    """The inverse of erf on (-1, 1)."""
    return S.erfinv(_float(x))


def log_ndtr(x: Array) -> Array:
    """log of the standard normal cdf, accurate far into both tails."""
    return S.log_ndtr(_float(x))


def ndtr(x: Array) -> Array:
    """The standard normal cdf, exp(log_ndtr(x)) (accurate relative to its size)."""
    return A.exp(log_ndtr(x))


def ndtri(p: Array) -> Array:
    """The standard normal quantile function, the inverse of ndtr."""
    return S.ndtri(_float(p))


def expit(x: Array) -> Array:
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return A.sigmoid(_float(x))


def logit(x: Array) -> Array:
    """log(x / (1 - x)), the inverse of expit."""
    x = _float(x)
    return A.subtract(A.log(x), A.log1p(A.negative(x)))


def _safe(x, y, fn):
    """x * fn(y), 0 where x == 0 (gradients too: no 0 * inf)."""
    x, y = _float(x), _float(y)
    ok = A.not_equal(x, 0)
    safe_y = A.where(ok, y, 1.0)
    return A.where(ok, A.multiply(x, fn(safe_y)), 0.0)


def xlogy(x: Array, y: Array) -> Array:
    """x * log(y), 0 where x == 0."""
    return _safe(x, y, A.log)


def xlog1py(x: Array, y: Array) -> Array:
    """x * log1p(y), 0 where x == 0."""
    return _safe(x, y, A.log1p)


def entr(x: Array) -> Array:
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    x = _float(x)
    return A.where(A.less(x, 0), -np.inf, A.negative(xlogy(x, x)))


def betaln(a: Array, b: Array) -> Array:
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    a, b = _float(a), _float(b)
    return A.subtract(A.add(gammaln(a), gammaln(b)), gammaln(A.add(a, b)))


def multigammaln(a: Array, d: int) -> Array:
    """The log of the multivariate gamma function of dimension d (a static int)."""
    d = int(d)
    a = _float(a)
    halves = 0.5 * np.arange(d, dtype=np.float64)
    terms = gammaln(A.subtract(A.expand_dims(a, -1), halves))
    return A.add(A.sum(terms, axis=-1), 0.25 * d * (d - 1) * math.log(math.pi))


def logsumexp(
    a: Array,
    axis: int | Sequence[int] | None = None,
    b: Array | None = None,
    keepdims: bool = False,
    return_sign: bool = False,
):
    """log(sum(b * exp(a))) over `axis`, without overflow; with return_sign, the pair
    (log|sum|, sign of the sum), as scipy.special.logsumexp."""
    a = _float(a)
    if b is None and not return_sign:
        return A.logsumexp(a, axis=axis, keepdims=keepdims)
    if b is not None:
        b = _float(b)
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
        a, b = A.broadcast_to(a, shape), A.broadcast_to(b, shape)
    m = A.max(a, axis=axis, keepdims=True)
    m = A.where(A.isfinite(m), m, 0.0)
    e = A.exp(A.subtract(a, m))
    s = A.sum(e if b is None else A.multiply(b, e), axis=axis, keepdims=True)
    sign = A.sign(s)
    out = A.add(A.log(A.abs(s) if return_sign else s), m)
    if not keepdims:
        axes = tuple(range(len(np.shape(a)))) if axis is None else axis
        out, sign = A.squeeze(out, axis=axes), A.squeeze(sign, axis=axes)
    return (out, sign) if return_sign else out


def softmax(x: Array, axis: int | None = None) -> Array:
    """exp(x) / sum(exp(x)) over `axis` (None: all axes), as scipy.special.softmax."""
    x = _float(x)
    if axis is None:
        return A.exp(A.subtract(x, A.logsumexp(x, axis=None, keepdims=True)))
    return A.softmax(x, axis=axis)


def log_softmax(x: Array, axis: int | None = None) -> Array:
    """x - logsumexp(x) over `axis` (None: all axes)."""
    x = _float(x)
    if axis is None:
        return A.subtract(x, A.logsumexp(x, axis=None, keepdims=True))
    return A.log_softmax(x, axis=axis)
