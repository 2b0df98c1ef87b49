"""Student's t distribution, as jax.scipy.stats.t: logpdf and pdf; and cdf, as HIPS
autograd's (through the incomplete beta function: differentiable in x, loc and scale).

>>> from tracegrad.scipy.stats import t
>>> round(float(t.pdf(0.0, 1.0)), 6)  # Cauchy at 0: 1 / pi
0.31831
"""

from __future__ import annotations

import math
from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy.special import betainc, gammaln
from tracegrad.scipy.stats._common import floats, standardize

Array = Any


def logpdf(x: Array, df: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    (df,) = floats(df)
    half = A.multiply(A.add(df, 1.0), 0.5)
    norm = A.subtract(
        A.subtract(gammaln(half), gammaln(A.multiply(df, 0.5))),
        A.add(A.multiply(0.5, A.log(A.multiply(df, math.pi))), A.log(scale)),
    )
    return A.subtract(norm, A.multiply(half, A.log1p(A.divide(A.multiply(z, z), df))))


def pdf(x: Array, df: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, df, loc, scale))


def cdf(x: Array, df: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    """1 - I_{df / (df + z^2)}(df / 2, 1 / 2) / 2 for z >= 0, and its mirror for z < 0."""
    z, _ = standardize(x, loc, scale)
    (df,) = floats(df)
    tail = A.multiply(
        0.5, betainc(A.multiply(df, 0.5), 0.5, A.divide(df, A.add(df, A.multiply(z, z))))
    )
    return A.where(A.greater_equal(z, 0), A.subtract(1.0, tail), tail)
