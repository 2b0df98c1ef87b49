"""The uniform distribution on [loc, loc + scale], as jax.scipy.stats.uniform: logpdf,
pdf, cdf, ppf."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.stats._common import floats

Array = Any


def logpdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    x, loc, scale = floats(x, loc, scale)
    outside = A.logical_or(A.less(x, loc), A.greater(x, A.add(loc, scale)))
    return A.where(outside, -np.inf, A.negative(A.log(A.broadcast_to(scale, np.shape(x)))))


def pdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, loc, scale))


def cdf(x: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    x, loc, scale = floats(x, loc, scale)
    return A.clip(A.divide(A.subtract(x, loc), scale), 0.0, 1.0)


def ppf(q: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    q, loc, scale = floats(q, loc, scale)
    inside = A.logical_and(A.greater_equal(q, 0), A.less_equal(q, 1))
    return A.where(inside, A.add(loc, A.multiply(q, scale)), np.nan)
