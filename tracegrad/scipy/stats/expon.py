"""The exponential distribution, as jax.scipy.stats.expon: logpdf, pdf, cdf, logcdf, sf,
logsf (loc, scale; -inf below loc)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.stats._common import floats, standardize

Array = Any


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    return A.where(A.less(z, 0), -np.inf, A.subtract(A.negative(A.log(scale)), z))


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, _ = standardize(x, loc, scale)
    return A.negative(A.expm1(A.negative(A.maximum(z, 0.0))))


def logcdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.log(cdf(x, loc, scale))


def sf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logsf(x, loc, scale))


def logsf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, _ = standardize(x, loc, scale)
    return A.negative(A.maximum(z, 0.0))


def ppf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    return A.add(A.multiply(A.negative(A.log1p(A.negative(q))), scale), loc)
