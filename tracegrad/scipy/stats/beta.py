"""The beta distribution, as jax.scipy.stats.beta: logpdf, pdf, cdf, logcdf, sf, logsf
(shapes a, b, loc, scale; -inf outside [loc, loc + scale]). The cdfs differentiate in x,
loc and scale, not a or b.

    >>> from tracegrad.scipy.stats import beta
    >>> round(float(beta.pdf(0.5, 2.0, 2.0)), 6)  # 6 x (1 - x)
    1.5
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.special import betainc, betaln, xlog1py, xlogy
from tracegrad.scipy.stats._common import floats, nan_where, standardize

Array = Any


def logpdf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, scale = standardize(x, loc, scale)
    x, a, b, loc = floats(x, a, b, loc)
    linear = A.add(xlogy(A.subtract(a, 1.0), y), xlog1py(A.subtract(b, 1.0), A.negative(y)))
    out = A.subtract(A.subtract(linear, betaln(a, b)), A.log(scale))
    outside = A.logical_or(A.greater(x, A.add(loc, scale)), A.less(x, loc))
    out = A.where(outside, -np.inf, out)
    bad = A.logical_or(A.logical_or(A.less_equal(a, 0), A.less_equal(b, 0)), A.less_equal(scale, 0))
    return nan_where(bad, out)


def pdf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, a, b, loc, scale))


def cdf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, _ = standardize(x, loc, scale)
    return betainc(a, b, A.clip(y, 0.0, 1.0))


def logcdf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.log(cdf(x, a, b, loc, scale))


def sf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, _ = standardize(x, loc, scale)
    return betainc(b, a, A.clip(A.subtract(1.0, y), 0.0, 1.0))


def logsf(x: Array, a: Array, b: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.log(sf(x, a, b, loc, scale))
