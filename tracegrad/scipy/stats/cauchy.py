"""The Cauchy distribution, as jax.scipy.stats.cauchy: logpdf, pdf, cdf, ppf."""

from __future__ import annotations

import math
from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy.stats._common import floats, standardize

Array = Any


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    return A.negative(A.add(A.add(math.log(math.pi), A.log(scale)), A.log1p(A.multiply(z, z))))


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, _ = standardize(x, loc, scale)
    return A.add(0.5, A.divide(A.arctan(z), math.pi))


def ppf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    return A.add(loc, A.multiply(scale, A.tan(A.multiply(math.pi, A.subtract(q, 0.5)))))
