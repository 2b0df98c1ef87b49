"""The Laplace distribution, as jax.scipy.stats.laplace: logpdf, pdf, cdf."""

from __future__ import annotations

import math
from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy.stats._common import standardize

Array = Any


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    return A.negative(A.add(A.add(A.log(scale), math.log(2.0)), A.abs(z)))


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, _ = standardize(x, loc, scale)
    half_tail = A.multiply(0.5, A.exp(A.negative(A.abs(z))))
    return A.where(A.less(z, 0), half_tail, A.subtract(1.0, half_tail))
