"""The normal distribution, as jax.scipy.stats.norm: logpdf, pdf, cdf, logcdf, sf, logsf,
ppf, isf (loc and scale broadcast with x; all differentiable in x, loc and scale).

    >>> import tracegrad as tg
    >>> from tracegrad.scipy.stats import norm
    >>> round(float(norm.logpdf(0.0)), 6), float(tg.grad(norm.cdf)(0.0)) == float(norm.pdf(0.0))
    (-0.918939, True)
"""

from __future__ import annotations

import math
from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy import special
from tracegrad.scipy.stats._common import floats, standardize

Array = Any
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    return A.subtract(A.multiply(-0.5, A.multiply(z, z)), A.add(A.log(scale), _HALF_LOG_2PI))


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.ndtr(standardize(x, loc, scale)[0])


def logcdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.log_ndtr(standardize(x, loc, scale)[0])


def sf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.ndtr(A.negative(standardize(x, loc, scale)[0]))


def logsf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.log_ndtr(A.negative(standardize(x, loc, scale)[0]))


def ppf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    return A.add(A.multiply(special.ndtri(q), scale), loc)


def isf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    return A.add(A.multiply(A.negative(special.ndtri(q)), scale), loc)
