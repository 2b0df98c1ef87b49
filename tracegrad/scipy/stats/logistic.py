"""The logistic distribution, as jax.scipy.stats.logistic: logpdf, pdf, cdf, sf, ppf."""

from __future__ import annotations

from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy import special
from tracegrad.scipy.stats._common import floats, standardize

Array = Any


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    a = A.abs(z)  # -|z| - 2 log(1 + e^-|z|): no overflow in either tail
    return A.subtract(
        A.subtract(A.negative(a), A.multiply(2.0, A.log1p(A.exp(A.negative(a))))), A.log(scale)
    )


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.expit(standardize(x, loc, scale)[0])


def sf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return special.expit(A.negative(standardize(x, loc, scale)[0]))


def ppf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    return A.add(A.multiply(special.logit(q), scale), loc)
