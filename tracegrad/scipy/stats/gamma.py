"""The gamma distribution, as jax.scipy.stats.gamma: logpdf, pdf, cdf, logcdf, sf, logsf
(shape a, loc, scale; -inf below loc). The cdfs differentiate in x, loc and scale, not a.

    >>> from tracegrad.scipy.stats import gamma
    >>> round(float(gamma.logpdf(1.0, 2.0)), 6)  # log(x e^-x) at x = 1
    -1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.special import gammainc, gammaincc, gammaln, xlogy
from tracegrad.scipy.stats._common import floats, nan_where, standardize

Array = Any


def logpdf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, scale = standardize(x, loc, scale)
    x, a, loc = floats(x, a, loc)
    linear = A.subtract(xlogy(A.subtract(a, 1.0), y), y)
    out = A.subtract(linear, A.add(gammaln(a), A.log(scale)))
    out = A.where(A.less(x, loc), -np.inf, out)
    return nan_where(A.logical_or(A.less_equal(a, 0), A.less_equal(scale, 0)), out)


def pdf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, a, loc, scale))


def cdf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, _ = standardize(x, loc, scale)
    return gammainc(a, A.maximum(y, 0.0))


def logcdf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.log(cdf(x, a, loc, scale))


def sf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    y, _ = standardize(x, loc, scale)
    return gammaincc(a, A.maximum(y, 0.0))


def logsf(x: Array, a: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.log(sf(x, a, loc, scale))
